"""`scratchformer explain`: every stage in order, shapes that follow from the config, totals that add up."""

from __future__ import annotations

import re

import pytest

from scratchformer.app.cli import main
from scratchformer.app.explain import explain
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.config import ModelConfig


def _total(text: str) -> int:
    return int(re.search(r"total parameters: ([\d,]+)", text).group(1).replace(",", ""))


@pytest.mark.parametrize("arch", ["seq2seq", "gpt", "encoder"])
def test_explain_lists_every_block_and_the_total_matches_the_formula(arch):
    cfg = ModelConfig(arch=arch, vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=48, max_len=16)
    text = explain(cfg, batch=2, length=5, target_length=3)
    assert _total(text) == count_parameters_formula(cfg) == sum(p.numel() for p in __import__(
        "scratchformer").build_model(cfg).parameters())
    assert "match" in text and "MISMATCH" not in text
    n_ffn = {"seq2seq": 4, "gpt": 2, "encoder": 2}[arch]
    assert text.count("feed-forward 32->48->32") == n_ffn
    assert "(2, 5, 48) -> (2, 5, 32)" in text or arch == "seq2seq"
    if arch == "seq2seq":
        assert text.count("cross-attention") == 2
        assert "scores (2, 4, 3, 5)" in text  # cross-attention (B, H, T, S): 3 target queries, 5 source keys
        assert "scores (2, 4, 3, 3)" in text and "scores (2, 4, 5, 5)" in text
        assert text.rstrip().endswith("output: (2, 3, 50)")
    elif arch == "gpt":
        assert text.count("masked self-attention") == 2 and "cross-attention" not in text
        assert text.rstrip().endswith("output: (2, 5, 50)")
    else:
        assert "mean pooling" in text and text.rstrip().endswith("output: (2, 2)")


def test_explain_of_masked_token_pretraining_ends_in_the_tied_table_not_the_head(capsys):
    cfg = ModelConfig(arch="encoder", vocab_size=50, d_model=32, n_heads=4, n_layers=2, d_ff=48, max_len=16)
    text = explain(cfg, batch=2, length=5, predict_tokens=True)
    assert text.rstrip().endswith("output: (10, 50)")  # logits over the vocabulary at each (masked) position
    assert "pooling" not in text and "unused while pretraining" in text
    assert "match" in text and "MISMATCH" not in text  # the unused head still counts in the total
    with pytest.raises(ValueError, match="encoder"):
        explain(ModelConfig(arch="gpt", vocab_size=50, d_model=32, n_heads=4, n_layers=1, d_ff=48, max_len=16),
                predict_tokens=True)
    assert main(["explain", "--preset", "sst2-mlm", "--length", "4"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("output: (4, 8000)")


def test_explain_command_takes_model_and_training_presets(capsys):
    assert main(["explain", "--preset", "paper-base", "n_layers=1", "--length", "4"]) == 0
    out = capsys.readouterr().out
    assert out.count("(encoder layer)") == 1 and out.count("(decoder layer)") == 1  # n_layers reaches both stacks
    assert "scores (1, 8, 4, 4)" in out
    assert main(["explain", "--preset", "shakespeare-char"]) == 0
    out = capsys.readouterr().out
    assert "vocab_size=69 assumed" in out and "masked self-attention" in out
    assert main(["explain", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_explain_of_a_vit_starts_from_pixels_and_classifies_from_the_class_token(capsys):
    cfg = ModelConfig(arch="vit", image_size=12, patch_size=4, channels=3, d_model=32, n_heads=4, n_layers=2, d_ff=48,
                      n_classes=5)
    text = explain(cfg, batch=2)
    assert "(2, 3, 12, 12) pixels -> (2, 10, 32)" in text  # 9 patches of 3 x 4 x 4 and the class token
    assert text.count("scores (2, 4, 10, 10)") == 2 and "class token's final state [:, 0]" in text
    assert _total(text) == count_parameters_formula(cfg) and "MISMATCH" not in text
    assert text.rstrip().endswith("output: (2, 5)")
    assert main(["demo", "--preset", "vit-base", "n_layers=1"]) == 0
    out = capsys.readouterr().out
    assert "match" in out and "MISMATCH" not in out and "class logits (2, 1000)" in out
