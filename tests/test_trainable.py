"""Frozen layers (``trainable=all|head|last:N``): what trains is what the setting names, the optimizer holds only
that, and every other weight comes out of training bit-identical."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import inputs_for, tiny, tiny_model
from scratchformer import load_model
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, family
from scratchformer.models import build_model
from scratchformer.train.optim import param_groups
from scratchformer.train.trainable import apply_trainable


def trained_names(model) -> set[str]:
    return {n for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("arch", FAMILIES)
def test_each_family_trains_its_head_or_its_last_blocks_and_nothing_else(arch):
    """Every family of the registry (so one added later too): ``head`` trains the output layer alone (a classifier's
    head and pooler, a language model's output matrix), ``last:1`` the last block, the final norm and the head; an
    optimizer step on the model's own loss then changes what trains and leaves every other weight bit-identical."""
    entry = family(arch)
    extra = ({"pooling": "pooler"} if "pooler" in entry.poolings else {}) if entry.classifies \
        else {"tie_embeddings": False}
    model = tiny_model(arch, n_layers=3, norm="pre", **extra)
    config = model.config
    trained, total = apply_trainable(model, "head")
    heads = {n for n, _ in model.named_parameters() if n.split(".")[0] in (*entry.parts.head, entry.parts.pooler)}
    assert trained_names(model) == heads and heads and trained == sum(
        p.numel() for n, p in model.named_parameters() if n in heads) < total
    _step_changes_only(model, config, heads)
    apply_trainable(model, "last:1")
    blocks = entry.parts.blocks
    names = trained_names(model)
    assert {n[len(blocks) + 1:].split(".")[0] for n in names if n.startswith(f"{blocks}.")} == {"2"}
    assert heads <= names and any(n.startswith(f"{entry.parts.final_norm}.") for n in names)
    assert names == heads | {n for n, _ in model.named_parameters()
                             if n.startswith((f"{blocks}.2.", f"{entry.parts.final_norm}."))}
    optimized = {id(p) for group in param_groups(model, 0.1) for p in group["params"]}
    assert optimized == {id(p) for p in model.parameters() if p.requires_grad}  # the optimizer holds what trains
    _step_changes_only(model, config, names)


def _step_changes_only(model: torch.nn.Module, config, names: set[str]) -> None:
    """One AdamW step on a loss of the model's output: the weights in ``names`` change, no other by a bit."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-2)
    out = model(**inputs_for(config)).float()
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed == names, changed ^ names
    model.zero_grad(set_to_none=True)


def test_more_blocks_than_the_model_has_or_an_unknown_word_is_refused():
    model = build_model(tiny("gpt", n_layers=2))
    with pytest.raises(ConfigError, match="more blocks than the model has"):
        apply_trainable(model, "last:3")
    for word in ("last:0", "tail", "last:x"):
        with pytest.raises(ConfigError, match="is not all, head or last:N"):
            apply_trainable(model, word)


@pytest.fixture(scope="module")
def base_run(shared_run, shared_file) -> tuple[Path, Path]:
    """The shared ``gpt_base`` run (three blocks, tied embeddings, max_len 32) and the verse it read: read only."""
    return shared_run("gpt_base"), shared_file("verse.txt")


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


LABELLED = "".join(f"{text}\t{label}\n" for text, label in [
    ("a gem of a film", "pos"), ("a waste of two hours", "neg"), ("to be is to see the light", "pos"),
    ("that is the dull question", "neg"), ("noble in the mind", "pos"), ("the slings of outrageous fortune", "neg"),
] * 20)


def test_a_gpt_classifier_from_a_gpt_run_trains_its_head_or_its_last_block_and_explains_itself(base_run, tmp_path,
                                                                                                capsys):
    """The GPT classifier is a family like any other: ``trainable=head`` leaves every weight of the GPT's blocks
    bit-identical to the base's, ``last:1`` trains the last block too, and ``explain`` reads it layer by layer."""
    base, _ = base_run
    data = tmp_path / "reviews.tsv"
    data.write_text(LABELLED, encoding="utf-8")
    gpt = load_model(base).state_dict()
    runs = {}
    for trainable in ("head", "last:1"):
        runs[trainable] = tmp_path / trainable.replace(":", "")
        assert main(["train", "task=classify", f"init_from={base.resolve()}", "--data", str(data),
                     f"trainable={trainable}", "max_steps=4", "eval_every=4", "num_threads=1", "--quiet",
                     "--out", str(runs[trainable])]) == 0
    head = load_model(runs["head"]).state_dict()
    blocks = [n for n in gpt if n.startswith("decoder.layers.")]
    assert blocks and all(torch.equal(head[n], gpt[n]) for n in blocks)  # bit for bit
    assert all(torch.equal(head[n], gpt[n]) for n in gpt if n in head)  # the embeddings and final norm too
    last = load_model(runs["last:1"]).state_dict()
    changed = {n for n in blocks if not torch.equal(last[n], gpt[n])}
    assert changed and all(n.startswith("decoder.layers.2.") for n in changed)
    capsys.readouterr()
    assert main(["explain", "--ckpt", str(runs["head"]), "--prompt", "noble in the mind"]) == 0
    out = capsys.readouterr().out
    assert "a classifier (a GPT reading its last real token)" in out
    assert [line.split()[:2] for line in out.splitlines() if line.startswith("layer ")] == [
        ["layer", "0"], ["layer", "1"], ["layer", "2"]]
