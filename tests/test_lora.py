"""LoRA runs as a user makes them (``lora_rank=R init_from=RUN``): only the adapters (and a classifier's head) train,
the base comes out bit-identical, the checkpoint holds the adapters alone with the base's fingerprint, the commands
use base + adapters, export merges them, and each mistake ends in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import shared_runs
from conftest import inputs_for, tiny_model
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint, load_model
from scratchformer.families import FAMILIES
from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.feedforward import FeedForward
from scratchformer.nn.lora import LORA_TARGETS, add_lora, merge_lora
from scratchformer.settings.resolve import resolve
from scratchformer.train.start import train

# The LoRA runs' own settings: the shared QUICK with the base's window (max_len=32).
QUICK = ["max_len=32", *shared_runs.QUICK]


@pytest.fixture(scope="module")
def base_run(shared_run, shared_file) -> tuple[Path, Path]:
    """The shared ``gpt_untied`` run (two blocks, an output layer of its own) and the verse it read: read only."""
    return shared_run("gpt_untied"), shared_file("verse.txt")


def lora_run(base: Path, text: Path, out: Path, *extra: str):
    settings = dict(s.split("=", 1) for s in [*QUICK[:-1], "lora_rank=4", "lora_alpha=8", *extra])
    return train(resolve(overrides={"task": "lm", "init_from": str(base), **settings}, data=[str(text)]), out,
                 quiet=True)


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


def test_a_lora_run_trains_its_adapters_alone_and_saves_only_them(base_run, tmp_path):
    base, text = base_run
    result = lora_run(base, text, tmp_path / "lora", "lora_targets=query,value,ff")
    before = load_checkpoint(base).model.state_dict()
    model = result.model
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".lora_A." in n or ".lora_B." in n for n in trained)
    for name, tensor in model.state_dict().items():  # the base, bit for bit, after 6 steps
        if ".lora_" not in name:
            assert torch.equal(tensor, before[name]), name
    assert any(model.state_dict()[n].abs().max() > 0 for n in trained if ".lora_B." in n)  # B has moved from 0

    saved = load_file(tmp_path / "lora" / "best" / "model.safetensors")
    assert set(saved) == trained
    full = (base / "best" / "model.safetensors").stat().st_size
    assert (tmp_path / "lora" / "best" / "model.safetensors").stat().st_size < full / 4
    meta = json.loads((tmp_path / "lora" / "best" / "config.json").read_text())["lora"]
    assert meta["rank"] == 4 and meta["targets"] == ["query", "value", "ff"]
    assert meta["base"]["path"] == str((base / "best").resolve()) and len(meta["base"]["sha256"]) == 64

    merged = load_model(tmp_path / "lora")  # base + adapters, folded into plain weights
    ids = torch.randint(1, 20, (2, 12))
    with torch.no_grad():
        assert (merged(ids) - model.eval()(ids)).abs().max() < 1e-5
    assert not any(".lora_" in n for n in merged.state_dict())


def test_a_lora_run_resumes_generates_evaluates_and_exports_merged(base_run, tmp_path, capsys):
    base, text = base_run
    out = tmp_path / "lora"
    lora_run(base, text, out)
    assert main(["train", "--out", str(out), "--resume", "max_steps=9", "--quiet"]) == 0
    assert json.loads((out / "last" / "config.json").read_text())["step"] == 9
    assert main(["generate", "--ckpt", str(out), "--prompt", "to be", "--max-new-tokens", "5", "--seed", "0"]) == 0
    assert main(["evaluate", "--ckpt", str(out), "--data", str(text)]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    assert "LoRA: rank 4 (alpha 8) on query, value, merged into the base" in capsys.readouterr().out
    assert main(["export", "--ckpt", str(out), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    transformers = pytest.importorskip("transformers", reason="the hf extra reads the export back")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = torch.randint(1, 20, (1, 10))
    with torch.no_grad():
        assert (hf(ids).logits - load_model(out)(ids)).abs().max() < 1e-4


def test_trainable_head_changes_the_output_matrix_and_nothing_else(base_run, tmp_path):
    base, text = base_run
    settings = dict(s.split("=", 1) for s in [*QUICK[:-1], "trainable=head"])
    train(resolve(overrides={"task": "lm", "init_from": str(base), **settings}, data=[str(text)]), tmp_path / "h",
          quiet=True)
    before, after = load_checkpoint(base).model.state_dict(), load_checkpoint(tmp_path / "h").model.state_dict()
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert changed == {"lm_head.weight"}


def test_a_classifier_and_a_translator_take_lora_from_runs_of_their_family(shared_run, shared_file, tmp_path, capsys):
    """The shared classifier and translator (``shared_runs``) as bases."""
    rows, quick = shared_file("labelled.tsv"), shared_runs.QUICK
    assert main(["train", "task=classify", f"init_from={shared_run('classifier')}", "--data", str(rows),
                 "lora_rank=2", *quick, "--out", str(tmp_path / "cls")]) == 0
    lora = json.loads((tmp_path / "cls" / "best" / "config.json").read_text())["lora"]
    assert lora["trained"] == ["head.weight", "head.bias"]  # a classifier's head trains beside the adapters
    assert main(["classify", "--ckpt", str(tmp_path / "cls"), "good fun 3"]) == 0

    pairs = shared_file("pairs.tsv")
    assert main(["train", "task=translate", f"init_from={shared_run('translator')}", "--data", str(pairs),
                 "lora_rank=2", "lora_targets=query,key,value", "eval_decode=4", *quick, "--out",
                 str(tmp_path / "s2s_lora")]) == 0
    saved = load_file(tmp_path / "s2s_lora" / "best" / "model.safetensors")
    assert any("cross_attn" in n for n in saved)  # the decoder's attention over the encoder is adapted too
    capsys.readouterr()
    assert main(["translate", "--ckpt", str(tmp_path / "s2s_lora"), "ein haus 3"]) == 0


@pytest.mark.parametrize("words, says", [
    (["lora_rank=4"], "lora_rank=4 adapts a pretrained model, and this run has none"),
    (["lora_rank=0", "lora_alpha=32"], "lora_rank=0 turns LoRA off, so lora_alpha=32.0 has nothing to set"),
    (["lora_rank=-2"], "lora_rank=-2 turns LoRA off"),
    (["lora_rank=4", "init_from=BASE", "lora_targets=q_proj"],
     "q_proj is not a projection LoRA adapts (choose from query, key, value, output, ff, or all)"),
    (["lora_rank=4", "init_from=BASE", "trainable=head"], "lora_rank and trainable=head both choose what trains"),
])
def test_each_lora_mistake_is_one_line_and_exit_2(base_run, tmp_path, capsys, words, says):
    base, text = base_run
    words = [w.replace("BASE", str(base)) for w in words]
    code = main(["train", "task=lm", "--data", str(text), *words, *QUICK, "--out", str(tmp_path / "r")])
    line = error_line(capsys)
    assert code == 2 and says in line, line
    assert not (tmp_path / "r").exists()


def test_an_adapter_run_whose_base_moved_or_changed_is_refused_naming_both(base_run, tmp_path, capsys):
    base, text = base_run
    copy = tmp_path / "base"
    shutil.copytree(base, copy)
    out = tmp_path / "lora"
    lora_run(copy, text, out)
    weights = copy / "best" / "model.safetensors"
    state = load_file(weights)
    state["decoder.norm.weight"] = state["decoder.norm.weight"] + 1
    from safetensors.torch import save_file

    save_file(state, weights)
    assert main(["generate", "--ckpt", str(out), "--prompt", "to", "--max-new-tokens", "2"]) == 2
    line = error_line(capsys)
    assert "the base changed" in line and str(copy / "best") in line and "sha256" in line, line
    assert main(["train", "--out", str(out), "--resume", "max_steps=8", "--quiet"]) == 2
    assert "the base changed" in error_line(capsys)
    shutil.rmtree(copy)
    assert main(["evaluate", "--ckpt", str(out), "--data", str(text)]) == 2
    line = error_line(capsys)
    assert "no longer there" in line and str(copy / "best") in line, line


def test_loading_a_lora_run_checks_its_base_by_its_headers_and_hashes_it_in_full_only_when_they_differ(
        base_run, tmp_path, capsys, monkeypatch):
    """A large base is not hashed for every command: loading reads its files' sizes, times and headers (a few kB);
    every byte only when those differ (the base copied, or changed: then refused), and with ``info --verify``."""
    import scratchformer.checkpoints.adapters as adapters

    base, text = base_run
    copy = tmp_path / "base"
    shutil.copytree(base, copy)
    out = tmp_path / "lora"
    lora_run(copy, text, out)
    hashed, read = [], []
    full, opened = adapters.fingerprint, Path.open

    class Counted:  # a weight file opened by the check, counting the bytes it reads
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def read(self, n=-1):
            data = self.handle.read(n)
            read.append(len(data))
            return data

    def counting_open(path, *args, **kw):
        handle = opened(path, *args, **kw)
        mode = args[0] if args else kw.get("mode", "r")
        binary = mode.startswith("r") and "b" in mode
        return Counted(handle) if path.suffix == ".safetensors" and binary else handle

    monkeypatch.setattr(adapters, "fingerprint", lambda folder: hashed.append(folder) or full(folder))
    monkeypatch.setattr(Path, "open", counting_open)
    assert main(["generate", "--ckpt", str(out), "--prompt", "to", "--max-new-tokens", "2"]) == 0
    size = (copy / "best" / "model.safetensors").stat().st_size
    assert not hashed and 0 < sum(read) < min(size, 16_384)  # the header alone
    assert main(["info", str(out), "--verify"]) == 0
    assert hashed and "base verified" in capsys.readouterr().out
    weights = copy / "best" / "model.safetensors"
    weights.write_bytes(weights.read_bytes())  # the same bytes, a new time: hashed once in full, and accepted
    hashed.clear()
    assert main(["generate", "--ckpt", str(out), "--prompt", "to", "--max-new-tokens", "2"]) == 0 and hashed
    assert main(["info", str(base_run[0]), "--verify"]) == 2
    assert "holds no adapters" in error_line(capsys)


@pytest.mark.parametrize("arch", FAMILIES)
def test_every_target_adapts_every_family_of_the_registry_and_merges_exactly(arch):
    """Every family the registry lists (so one added later too): each target adapts its projections, the model
    starts as it was (B = 0), trained adapters change its output, and merging them gives the same output."""
    model = tiny_model(arch).eval()
    inputs = inputs_for(model.config)
    with torch.no_grad():
        before = model(**inputs)
    attention = sum(isinstance(m, MultiHeadAttention) for m in model.modules())
    ffn = sum(len([a for a in ("linear1", "linear2", "linear3") if getattr(m, a) is not None])
              for m in model.modules() if isinstance(m, FeedForward))
    count = add_lora(model, 2, 4.0, LORA_TARGETS)
    assert count == 4 * attention + ffn and attention and ffn
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs), before, atol=0, rtol=0)  # B = 0: exactly the base
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.normal_(std=0.5, generator=torch.Generator().manual_seed(len(name)))
        adapted = model(**inputs)
        assert (adapted - before).abs().max() > 1e-3
        torch.testing.assert_close(merge_lora(model)(**inputs), adapted, atol=1e-5, rtol=0)
    assert not any(".lora_" in n for n, _ in model.named_parameters())


def test_lora_matrices_take_no_weight_decay_and_a_reset_leaves_the_frozen_base_alone():
    """The two stated choices of nn/lora.py and train/optim.py: A and B are in the undecayed group (the adapted
    matrices, frozen, in none), and ``reset_parameters`` starts the adapters anew without touching the base."""
    from scratchformer.nn.lora import LoRALinear
    from scratchformer.train.optim import param_groups

    model = tiny_model("gpt")
    add_lora(model, 2, 4.0, ("query", "value", "ff"))
    model.requires_grad_(False)
    for name, p in model.named_parameters():
        p.requires_grad_(".lora_" in name)
    decayed, undecayed = ({id(p) for p in group["params"]} for group in param_groups(model, 0.1))
    adapters = {id(p) for n, p in model.named_parameters() if ".lora_" in n}
    assert adapters and adapters <= undecayed and not decayed
    layer = next(m for m in model.modules() if isinstance(m, LoRALinear))
    base = layer.weight.detach().clone()
    with torch.no_grad():
        for b in layer.lora_B.values():
            b.fill_(1.0)
    layer.reset_parameters()
    assert torch.equal(layer.weight, base) and all(not b.any() for b in layer.lora_B.values())
