"""Sharded training (``shard=fsdp``, PyTorch's FSDP2) under torchrun on the CPU with gloo: two processes give one
process's losses (a GPT and an encoder classifier, each with and without LoRA), a run saved by two processes resumes
on one and on two as if uninterrupted, its Hugging Face export equals the unsharded run's, a large base is built on
the meta device and read row by row; the sharded checkpoint (written by every process, read without running code from
its files) loads like any other; what cannot be sharded is refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import scratchformer
import shared_runs
from conftest import SHARED_DATA, exactly, needs_data, tiny
from scratchformer.app.cli import main
from scratchformer.checkpoints import CheckpointError
from scratchformer.checkpoints.sharded import SHARDS, is_sharded, problem
from scratchformer.distributed import DistInfo
from scratchformer.errors import ConfigError, WriteError
from scratchformer.models import build_model
from scratchformer.settings.config import TrainConfig
from scratchformer.train.fsdp import sharded_run
from scratchformer.train.fsdp_checkpoint import restore_sharded, save_sharded

TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 40)
# The shared two-layer model (a layer a process to shard), every step logged, one thread in every process.
TINY = [*shared_runs.TWO_LAYERS, "max_len=32", "batch_size=8", "log_every=1", "eval_every=1000", "eval_batches=1",
        "dropout=0.0", "num_threads=1", "test_at_end=false"]
CONSTANT = ["schedule=constant", "warmup_steps=0"]  # a run extended by --resume keeps its rates
SST2 = ["task=classify", "--data", str(SHARED_DATA / "sst2" / "dev.tsv"), "word_dropout=0.0", "tokenizer=bpe",
        "bpe_vocab_size=300", "batch_size=16"]


def train(*args: str, processes: int = 1, env: dict | None = None):
    """``scratchformer train ARGS`` in this process (the reference runs: one thread, ``num_threads=1``, as in each
    of several processes), or under ``torchrun --nproc_per_node=processes``; what it said is in ``.stderr``."""
    if processes == 1:
        assert env is None, "a run in this process reads this process's environment"
        said, threads = io.StringIO(), torch.get_num_threads()
        try:  # (a module fixture's run, too, leaves the thread count as it found it)
            with contextlib.redirect_stderr(said), contextlib.redirect_stdout(io.StringIO()):
                code = main(["train", *args])
        finally:
            torch.set_num_threads(threads)
        assert code == 0, said.getvalue()[-3000:]
        return SimpleNamespace(stderr=said.getvalue())
    launch = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    full = {**os.environ, "SCRATCHFORMER_DATA": str(SHARED_DATA), "OMP_NUM_THREADS": "1", **(env or {})}
    # several processes (torchrun)
    r = subprocess.run([sys.executable, *launch, "-m", "scratchformer", "train", *args], capture_output=True,
                       text=True, env=full, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def losses(run: Path) -> dict[int, float]:
    rows = (json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines())
    return {r["step"]: r["loss"] for r in rows if r["split"] == "train"}


def assert_same_losses(a: Path, b: Path, steps: range) -> None:
    la, lb = losses(a), losses(b)
    assert set(steps) <= la.keys() and set(steps) <= lb.keys()
    worst = max(abs(la[s] - lb[s]) for s in steps)
    assert worst <= 1e-5, (worst, [(s, la[s], lb[s]) for s in steps])


# ------------------------------------------------------------------------------------ refusals, in one line


def test_what_cannot_be_sharded_is_refused_in_one_line(monkeypatch):
    run = exactly({"task": "lm", "shard": "fsdp", "batch_size": 6})
    with pytest.raises(ConfigError, match="launch it with torchrun --nproc_per_node=N") as err:
        sharded_run(run, processes=1)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="batch_size=6 does not split evenly across 4 processes"):
        sharded_run(run, processes=4)
    assert sharded_run(run, processes=3)
    resumed = exactly({"task": "lm", "shard": "fsdp"})
    resumed.source["shard"] = "the run"  # a sharded run resumed on one process goes on whole
    assert not sharded_run(resumed, processes=1)
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    with pytest.raises(ConfigError, match="shard=fsdp needs torch 2.6 or newer .* this is torch 2.5.1"):
        sharded_run(run, processes=2)
    for setting, words in (({"optimizer": "muon"}, "optimizer=muon orthogonalises whole weight matrices"),
                           ({"precision": "fp16"}, "precision=fp16 needs a gradient scaler"),
                           ({"ema_decay": 0.99}, "ema_decay keeps a whole copy"),
                           ({"average_last": 3}, "average_last keeps a whole copy")):
        with pytest.raises(ConfigError, match=words):
            TrainConfig(shard="fsdp", **setting)
        TrainConfig(**setting)  # without shard=fsdp, each is fine
    dpo = {"task": "dpo", "init_from": "runs/assistant"}  # its reference is computed on the whole model
    with pytest.raises(ConfigError, match="task=dpo computes its reference on the whole model"):
        TrainConfig(shard="fsdp", **dpo)
    TrainConfig(**dpo)


def test_shard_fsdp_without_torchrun_ends_in_one_line_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--preset", "copy", "max_steps=2", "shard=fsdp", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "torchrun --nproc_per_node=N -m scratchformer train" in err
    assert not out.exists()


# ------------------------------------------------------------------------------------ the sharded checkpoint


def _saved(tmp_path: Path, name: str = "last") -> tuple[Path, torch.nn.Module, torch.optim.Optimizer]:
    """A tiny GPT after one AdamW step, saved in the sharded layout by one process (as a sharded run resumed on one
    process saves it)."""
    from scratchformer.checkpoints import write_beside_weights
    from scratchformer.tokenizers import CharTokenizer

    torch.manual_seed(0)
    model = build_model(tiny("gpt"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randint(0, 37, (2, 9))).sum().backward()
    optimizer.step()
    tokenizer = CharTokenizer.train(["abcdefgh"])
    ckpt = tmp_path / "run" / name
    ckpt.parent.mkdir(exist_ok=True)
    save_sharded(ckpt, model, optimizer, {"step": 1}, lambda tmp, state: write_beside_weights(
        tmp, model, tokenizer, model.config, {"task": "lm", "shard": "fsdp"}, 1, state), DistInfo())
    return ckpt, model, optimizer


def test_a_sharded_checkpoint_loads_whole_and_restores_weights_and_optimizer(tmp_path):
    ckpt, model, optimizer = _saved(tmp_path)
    assert is_sharded(ckpt) and not (ckpt / "model.safetensors").exists() and problem(ckpt) is None
    assert sorted(p.name for p in (ckpt / SHARDS).iterdir()) == [".metadata", "__0_0.distcp"]
    loaded = scratchformer.load_model(tmp_path / "run")  # a run directory: last/
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    torch.manual_seed(1)
    fresh = build_model(tiny("gpt"))
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    state = restore_sharded(ckpt, fresh, fresh_opt)
    assert state["step"] == 1 and "optimizer_groups" not in state
    assert all(torch.equal(a, b) for a, b in zip(fresh.parameters(), model.parameters()))
    want, got = optimizer.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k]["exp_avg_sq"], got[k]["exp_avg_sq"]) and float(want[k]["step"]) == 1.0


def test_the_index_of_the_shards_is_read_without_running_code(tmp_path):
    ckpt, _, _ = _saved(tmp_path)
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    (ckpt / SHARDS / ".metadata").write_bytes(pickle.dumps(Exploit()))
    with pytest.raises(CheckpointError, match=r"\.metadata is unreadable \(posix.system is not part of a checkpoint"):
        scratchformer.load_model(ckpt)
    assert not marker.exists()


def test_a_shard_cut_short_is_found_and_resume_falls_back_to_best(tmp_path):
    from scratchformer.train.resume import pick_checkpoint

    last, _, _ = _saved(tmp_path, "last")
    _saved(tmp_path, "best")
    shard = last / SHARDS / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[:100])
    assert "is cut short" in problem(last)
    said: list[str] = []
    assert pick_checkpoint(tmp_path / "run", said.append) == tmp_path / "run" / "best"
    assert "cut short" in said[0] and "resuming from" in said[0]


def test_a_failed_shard_write_is_one_line_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    import errno

    import torch.distributed.checkpoint as dcp

    ckpt, model, _ = _saved(tmp_path)
    before = sorted(p.name for p in ckpt.rglob("*"))

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(dcp, "save", full_disk)
    with pytest.raises(WriteError, match="could not write the checkpoint last/ in .*: no space left on device") as err:
        _saved(tmp_path)
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in ckpt.rglob("*")) == before and problem(ckpt) is None
    assert [p.name for p in ckpt.parent.iterdir()] == ["last"]  # no temporary directory left


# ------------------------------------------------------------------------------------ a large base, on meta


def test_a_base_read_row_by_row_on_the_meta_device_is_the_base(tmp_path):
    """What fills a model built on the meta device (each process's rows; here one process, whole) equals what one
    process reads: from a sharded run into a classifier with shorter inputs (its head drawn anew, its position table
    cut), and from a Llama folder by its name plan."""
    from scratchformer.checkpoints import find_source
    from scratchformer.train.fsdp_init import fill_from

    ckpt, model, _ = _saved(tmp_path)
    config = tiny("gpt-classifier", n_classes=3, max_len=20)
    with torch.device("meta"):
        classifier = build_model(config)
    fill = fill_from(find_source(ckpt), config)
    torch.manual_seed(0)
    fill(classifier.to_empty(device="cpu"))
    own = classifier.state_dict()
    for name, tensor in model.state_dict().items():
        if name in own:
            assert torch.equal(own[name], tensor[:20] if "position_embedding" in name else tensor), name
    assert own["head.weight"].std() > 0.01  # drawn as build_model draws it: N(0, 0.02)

    transformers = pytest.importorskip("transformers", reason="the hf extra writes the Llama folder")
    folder = tmp_path / "llama"
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False)).save_pretrained(folder)
    whole = scratchformer.load_model(folder)
    with torch.device("meta"):
        built = build_model(whole.config)
    fill_from(find_source(folder), whole.config)(built.to_empty(device="cpu"))
    ids = torch.randint(0, 50, (2, 7))
    assert torch.equal(built.eval()(ids), whole(ids))


# ------------------------------------------------------------------------------------ two processes against one


@pytest.fixture(scope="module")
def gpt_runs(tmp_path_factory) -> dict[str, Path]:
    """A GPT trained 24 steps by one process; the same trained 20 steps by two sharded processes, then resumed to 24
    on one process and on two."""
    root = tmp_path_factory.mktemp("fsdp_gpt")
    corpus = root / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    common = ["--data", str(corpus), "task=lm", "tokenizer=char", *TINY, *CONSTANT]
    runs = {name: root / name for name in ("one", "two", "two_on_one", "two_on_two")}
    train(*common, "max_steps=24", "--out", str(runs["one"]))
    with shared_runs.processes_lock(tmp_path_factory):  # no other test's processes beside these (conftest)
        r = train(*common, "max_steps=20", "shard=fsdp", "--out", str(runs["two"]), processes=2)
        assert "2 processes on cpu, the model sharded across them (FSDP2)" in r.stderr
        for name in ("two_on_one", "two_on_two"):
            shutil.copytree(runs["two"], runs[name])
        train("--resume", "--out", str(runs["two_on_two"]), "max_steps=24", processes=2)
    r = train("--resume", "--out", str(runs["two_on_one"]), "max_steps=24")
    assert "the model is whole here; the run's checkpoints stay sharded" in r.stderr
    return runs


@pytest.mark.slow
def test_two_sharded_processes_give_one_process_losses_and_resume_on_one_or_two(gpt_runs):
    assert_same_losses(gpt_runs["one"], gpt_runs["two"], range(1, 21))
    assert len(list(gpt_runs["two"].glob(f"*/{SHARDS}/*.distcp"))) >= 2  # each process wrote its own
    assert len(list((gpt_runs["two"] / "last" / SHARDS).glob("*.distcp"))) == 2
    for resumed in ("two_on_one", "two_on_two"):
        assert_same_losses(gpt_runs["one"], gpt_runs[resumed], range(21, 25))
    one, two = (scratchformer.load_model(gpt_runs[n]).state_dict() for n in ("one", "two_on_two"))
    for name in one:
        torch.testing.assert_close(two[name], one[name], atol=1e-4, rtol=0)


@pytest.mark.slow
def test_the_hugging_face_export_of_a_sharded_run_gives_the_unsharded_export_s_logits(gpt_runs, tmp_path):
    transformers = pytest.importorskip("transformers", reason="the hf extra loads the exports")
    logits = []
    for name in ("one", "two_on_two"):
        assert main(["export", "--ckpt", str(gpt_runs[name]), "--format", "hf", "--out", str(tmp_path / name)]) == 0
        hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / name).eval()
        with torch.no_grad():
            logits.append(hf(torch.tensor([[1, 5, 9, 2, 7, 3, 3, 8]])).logits)
    torch.testing.assert_close(logits[1], logits[0], atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.processes
def test_lora_on_a_gpt_sharded_gives_one_process_losses(gpt_runs, tmp_path):
    corpus = gpt_runs["one"].parent / "corpus.txt"
    common = ["--data", str(corpus), "task=lm", f"init_from={gpt_runs['one']}", "lora_rank=4", "lora_targets=all",
              "max_steps=20", "lr=1e-2", *[s for s in TINY if not s.startswith(("d_", "n_", "max_len"))]]
    train(*common, "--out", str(tmp_path / "one"))
    train(*common, "shard=fsdp", "--out", str(tmp_path / "two"), processes=2)
    assert_same_losses(tmp_path / "one", tmp_path / "two", range(1, 21))
    a, b = (scratchformer.load_model(tmp_path / n).state_dict() for n in ("one", "two"))
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)


@pytest.mark.slow
@pytest.mark.processes
@needs_data("sst2/dev.tsv")
def test_an_encoder_classifier_with_and_without_lora_sharded_gives_one_process_losses(tmp_path):
    common = [*SST2, *TINY, "max_steps=20", "batch_size=16"]
    train(*common, "--out", str(tmp_path / "one"))
    train(*common, "shard=fsdp", "--out", str(tmp_path / "two"), processes=2)
    assert_same_losses(tmp_path / "one", tmp_path / "two", range(1, 21))
    lora = [*SST2[:3], f"init_from={tmp_path / 'one'}", "lora_rank=4", "lr=1e-2", "max_steps=20", "log_every=1",
            "eval_every=1000", "dropout=0.0", "word_dropout=0.0", "batch_size=16", "num_threads=1",
            "test_at_end=false"]
    train(*lora, "--out", str(tmp_path / "lora_one"))
    train(*lora, "shard=fsdp", "--out", str(tmp_path / "lora_two"), processes=2)
    assert_same_losses(tmp_path / "lora_one", tmp_path / "lora_two", range(1, 21))


@pytest.mark.slow
@pytest.mark.processes
def test_a_llama_folder_built_on_the_meta_device_trains_as_one_process(tmp_path):
    """Forced onto the meta device (the base read row by row), a Llama folder trained further by two processes gives
    one process's losses: nothing in it is new."""
    transformers = pytest.importorskip("transformers", reason="the hf extra writes the Llama folder")
    from test_open_models import write_tokenizer

    folder = tmp_path / "llama"
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64)).save_pretrained(folder)
    write_tokenizer(folder)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    common = ["--data", str(corpus), "task=lm", f"init_from={folder}", "max_len=32", "batch_size=8", "max_steps=20",
              "log_every=1", "eval_every=1000", "eval_batches=1", "num_threads=1", "test_at_end=false", "lr=1e-3"]
    train(*common, "--out", str(tmp_path / "one"))
    r = train(*common, "shard=fsdp", "--out", str(tmp_path / "two"), processes=2,
              env={"SCRATCHFORMER_SHARD_INIT": "meta"})
    assert "on the meta device: each process reads only its rows of each weight" in r.stderr
    assert_same_losses(tmp_path / "one", tmp_path / "two", range(1, 21))
