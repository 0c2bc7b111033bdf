"""The GPU path, checked on the CPU: precision (fp32 | bf16 | fp16), the fp16
gradient scaler across --resume, device choice and refusal, pinned-memory transfers, fused AdamW and
torch.compile."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import shared_runs
from conftest import exactly
from scratchformer.app.cli import main
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks import LMTask
from scratchformer.train import device as device_mod
from scratchformer.train import train

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 40)
SIZES = {key: int(value) for key, value in (word.split("=") for word in shared_runs.TINY)}  # the shared tiny model
TINY_LM = dict(task="lm", **SIZES, max_len=32, batch_size=4, eval_every=3, eval_batches=1, log_every=1, dropout=0.0,
               num_threads=1)


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    f = tmp_path / "corpus.txt"
    f.write_text(TEXT, encoding="utf-8")
    return f


def run(tmp_path: Path, text_file: Path, name: str, resume: bool = False, **settings) -> Path:
    train(exactly({**TINY_LM, "max_steps": 6, **settings}, [str(text_file)]), tmp_path / name, resume=resume,
          echo=lambda s: None)
    return tmp_path / name


def weights(out: Path, name: str = "last") -> dict[str, torch.Tensor]:
    return load_file(str(out / name / "model.safetensors"))


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def one_line_error(capsys, code: int, *needles: str) -> None:
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    for needle in needles:
        assert needle in last, last


# ------------------------------------------------------------------------------------ precision


@pytest.mark.parametrize("precision,dtype", [("fp32", None), ("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_each_precision_trains_under_the_autocast_it_names(tmp_path, text_file, monkeypatch, precision, dtype):
    seen = set()
    real = LMTask.loss_sum

    def spy(self, model, batch, ls):
        if model.training:
            on = torch.is_autocast_enabled("cpu")
            seen.add(torch.get_autocast_dtype("cpu") if on else None)
        return real(self, model, batch, ls)

    monkeypatch.setattr(LMTask, "loss_sum", spy)
    out = run(tmp_path, text_file, "run", precision=precision, max_steps=3)
    assert seen == {dtype}
    rows = [r for r in metrics(out) if r["split"] == "train"]
    assert all(math.isfinite(r["loss"]) for r in rows)
    assert all(("loss_scale" in r) == (precision == "fp16") for r in rows)  # fp16 logs its loss scale
    assert all(v.dtype == torch.float32 for v in weights(out).values())  # the weights themselves stay fp32
    assert json.loads((out / "config.json").read_text())["train"]["precision"] == precision


def test_fp16_resume_continues_with_the_saved_loss_scale(tmp_path, text_file):
    full = run(tmp_path, text_file, "full", precision="fp16")
    half = run(tmp_path, text_file, "half", precision="fp16", max_steps=3)
    assert torch.load(half / "last" / "trainer_state.pt", weights_only=True)["grad_scaler"]["_growth_tracker"] == 3
    run(tmp_path, text_file, "half", resume=True, precision="fp16")
    a, b = weights(full), weights(half)
    assert all(torch.equal(a[k], b[k]) for k in a)
    sa = torch.load(full / "last" / "trainer_state.pt", weights_only=True)["grad_scaler"]
    sb = torch.load(half / "last" / "trainer_state.pt", weights_only=True)["grad_scaler"]
    assert sa == sb and sa["_growth_tracker"] == 6  # 6 good steps in a row, counted across the resume


def test_an_overflowing_fp16_step_is_skipped_and_the_scale_halved(tmp_path, text_file, monkeypatch):
    real = LMTask.loss_sum
    calls = {"n": 0}

    def overflowing(self, model, batch, ls):  # step 2's gradients overflow once scaled by 2^16
        calls["n"] += model.training
        loss = real(self, model, batch, ls)
        return loss * 1e34 if model.training and calls["n"] == 2 else loss

    monkeypatch.setattr(LMTask, "loss_sum", overflowing)
    out = run(tmp_path, text_file, "run", precision="fp16")
    scales = [r["loss_scale"] for r in metrics(out) if r["split"] == "train"]
    assert scales == [65536.0] + [32768.0] * 5
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)["optimizer"]["state"]
    assert {float(s["step"]) for s in state.values()} == {5.0}  # 6 steps, one skipped


# ------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("argv,needles", [
    (["precision=fp8"], ["precision='fp8'", "fp32, bf16, fp16"]),
    (["device=tpu"], ["device='tpu'", "auto, cpu, cuda, mps"]),
    pytest.param(["device=cuda"], ["device=cuda", "no CUDA GPU"],
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")),
    pytest.param(["device=mps"], ["device=mps", "no Apple GPU"],
                 marks=pytest.mark.skipif(device_mod.available("mps"), reason="this machine has mps")),
])
def test_unknown_or_absent_precision_and_device_fail_with_one_line(tmp_path, capsys, argv, needles):
    out = tmp_path / "run"
    one_line_error(capsys, main(["train", *argv, "max_steps=1", "--out", str(out)]), *needles)
    assert not out.exists()


def test_compile_without_a_compiler_fails_with_one_line(tmp_path, capsys, monkeypatch):
    from scratchformer.train import device as loop

    monkeypatch.setattr(loop, "compile_unavailable", lambda device: "torch.compile on the CPU needs a C++ compiler")
    out = tmp_path / "run"
    one_line_error(capsys, main(["train", "compile=true", "max_steps=1", "--out", str(out)]),
                   "compile=true", "C++ compiler", "compile=false")
    assert not out.exists()


# ------------------------------------------------------------------------------------ device


def test_auto_takes_cuda_then_mps_then_cpu(monkeypatch):
    have: set[str] = set()
    monkeypatch.setattr(device_mod, "available", lambda name: name == "cpu" or name in have)
    assert device_mod.pick_device("auto").type == "cpu"
    have.add("mps")
    assert device_mod.pick_device("auto").type == "mps"
    have.add("cuda")
    assert device_mod.pick_device("auto").type == "cuda"
    assert device_mod.pick_device("cpu").type == "cpu"


def test_batches_for_cuda_go_through_pinned_memory_without_blocking(monkeypatch):
    batch = {"x": torch.arange(6).view(2, 3), "y": torch.ones(2, 3)}
    cpu = device_mod.to_device(batch, torch.device("cpu"))
    assert all(cpu[k] is batch[k] for k in batch)  # already there: no copy

    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **kw: calls.append(("to", str(a[0]), kw)) or self)
    moved = device_mod.to_device(batch, torch.device("cuda"))
    assert set(moved) == set(batch)
    assert calls == ["pin", ("to", "cuda", {"non_blocking": True})] * 2


def test_adamw_is_fused_where_torch_has_it_and_updates_as_the_plain_loop_does():
    from scratchformer import GPT, ModelConfig
    from scratchformer.train.optim import make_optimizer

    cfg = TrainConfig(lr=1e-2, weight_decay=0.1)
    models = [GPT(ModelConfig(**{**shared_runs.TINY_MODEL, "arch": "gpt"})) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    start = [p.detach().clone() for p in models[0].parameters()]
    fused = make_optimizer(models[0], cfg, torch.device("cpu"))
    plain = make_optimizer(models[1], cfg)  # no device: torch's default implementation
    assert fused.defaults["fused"] is device_mod.has_fused_adamw(torch.device("cpu"))
    assert not plain.defaults["fused"]
    for step in range(5):  # the same gradients for both (Adam amplifies the noise of near-zero ones)
        for model, opt in zip(models, (fused, plain)):
            gen = torch.Generator().manual_seed(step)
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=gen)
            opt.step()
    moved = 0.0
    for a, b, s in zip(models[0].parameters(), models[1].parameters(), start):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        moved = max(moved, float((a.detach() - s).abs().max()))
    assert moved > 1e-3  # the weights did move


# ------------------------------------------------------------------------------------ compile


@pytest.mark.slow
def test_compile_true_trains_as_eager_does(tmp_path, text_file, monkeypatch):
    why = device_mod.compile_unavailable(torch.device("cpu"))
    if why:
        pytest.skip(why)
    compiled = []
    real = torch.compile
    monkeypatch.setattr(torch, "compile", lambda module, **kw: compiled.append(module) or real(module, **kw))
    fast = weights(run(tmp_path, text_file, "compiled", compile=True, max_steps=2, eval_every=2))
    assert len(compiled) == 1
    eager = weights(run(tmp_path, text_file, "eager", max_steps=2, eval_every=2))
    for name in eager:
        torch.testing.assert_close(fast[name], eager[name], atol=1e-5, rtol=1e-4)
