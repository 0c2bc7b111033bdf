"""Frozen layers (``trainable=all|head|last:N``): what trains is what the setting names, the optimizer holds only
that, and every other weight comes out of training bit-identical."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import tiny
from scratchformer.app.cli import main
from scratchformer.checkpoint import load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.models import build_model
from scratchformer.train.optim import param_groups
from scratchformer.train.trainable import apply_trainable

TEXT = "to be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n" * 40
QUICK = ["d_model=32", "n_heads=2", "n_layers=3", "d_ff=64", "max_len=32", "batch_size=4", "eval_every=5",
         "num_threads=1", "--quiet"]


def trained_names(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("arch", ["gpt", "seq2seq", "encoder", "vit"])
def test_each_family_trains_its_head_or_its_last_blocks_and_nothing_else(arch):
    extra = dict(vocab_size=1, max_len=17, image_size=8, patch_size=2) if arch == "vit" else {"tie_embeddings": False}
    model = build_model(tiny(arch, n_layers=3, **extra))
    trained, total = apply_trainable(model, "head")
    names = trained_names(model)
    heads = {"gpt": {"lm_head.weight"}, "seq2seq": {"lm_head.weight"}, "encoder": {"head.weight", "head.bias"},
             "vit": {"head.weight", "head.bias"}}[arch]
    assert names == heads and trained == sum(p.numel() for n, p in model.named_parameters() if n in heads) < total
    apply_trainable(model, "last:1")
    stack = "decoder" if arch in ("gpt", "seq2seq") else "encoder"
    blocks = {n.split(".")[2] for n in trained_names(model) if n.startswith(f"{stack}.layers.")}
    assert blocks == {"2"} and heads <= trained_names(model)
    assert not any(n.startswith(f"{stack}.layers.0.") for n in trained_names(model))
    optimized = {id(p) for group in param_groups(model, 0.1) for p in group["params"]}
    assert optimized == {id(p) for p in model.parameters() if p.requires_grad}  # the optimizer holds what trains


def test_more_blocks_than_the_model_has_or_an_unknown_word_is_refused():
    model = build_model(tiny("gpt", n_layers=2))
    with pytest.raises(ConfigError, match="more blocks than the model has"):
        apply_trainable(model, "last:3")
    for word in ("last:0", "tail", "last:x"):
        with pytest.raises(ConfigError, match="is not all, head or last:N"):
            apply_trainable(model, word)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("trainable")
    text = root / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    run = root / "base"
    assert main(["train", "task=lm", "--data", str(text), "max_steps=5", *QUICK, "--out", str(run)]) == 0
    return run, text


def test_last_1_from_a_run_changes_only_the_last_block_the_final_norm_and_the_head(base_run, tmp_path, capsys):
    base, text = base_run
    out = tmp_path / "last1"
    assert main(["train", "task=lm", f"init_from={base}", "--data", str(text), "trainable=last:1", "max_steps=5",
                 "max_len=32", "eval_every=5", "num_threads=1", "--out", str(out)]) == 0
    assert "trainable=last:1:" in capsys.readouterr().err
    before = load_checkpoint(base).model.state_dict()
    after = load_checkpoint(out).model.state_dict()
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed and all(n.startswith(("decoder.layers.2.", "decoder.norm.", "embed.token.")) for n in changed)
    assert "embed.token.weight" in changed  # tied: the output matrix is the token embedding
    assert torch.equal(before["decoder.layers.1.ffn.linear1.weight"], after["decoder.layers.1.ffn.linear1.weight"])


def test_trainable_past_the_depth_is_one_line_and_exit_2(base_run, tmp_path, capsys):
    base, text = base_run
    code = main(["train", "task=lm", f"init_from={base}", "--data", str(text), "trainable=last:7", "max_steps=2",
                 "max_len=32", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:") and "more blocks than the model has (3)" in last
    assert not (tmp_path / "r").exists()  # the new run's folder is gone again
