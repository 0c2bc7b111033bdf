"""Faults lose nothing: a write that fails at any of a run's write sites, a real full disk, a save killed half-way,
a second writer and a stale lock each end in one line (or a note), leave no temporary file, and leave a run that
``--resume`` continues. Tested by injecting the fault, each site in turn."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import shared_runs
from scratchformer.app.cli import main
from scratchformer.errors import RunDirError

# The shared tiny model, with this module's own schedule: the write sites are counted against it (metrics.jsonl's
# 3rd line, TensorBoard's 4th scalar, the save after step 6), and every run here ends at step 9.
TINY = ["task=lm", *shared_runs.TINY, "max_len=16", "batch_size=4", "log_every=2", "eval_every=3", "eval_batches=1",
        "max_steps=9"]
FULL = OSError(errno.ENOSPC, "No space left on device")


BOOK = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(300))


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text(BOOK)
    return path


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> Path:
    """A run of ``TINY`` on the book that nothing stopped, made once for every test that compares with it (read
    only)."""
    root, threads = tmp_path_factory.mktemp("unbroken"), torch.get_num_threads()
    (root / "book.txt").write_text(BOOK)
    try:
        assert train(root / "book.txt", root / "run") == 0
    finally:
        torch.set_num_threads(threads)
    return root / "run"


def train(text: Path, out: Path, *words: str) -> int:
    return main(["train", "--data", str(text), *TINY, *words, "--out", str(out)])


def leftovers(*folders: Path) -> list[str]:
    """Temporary files or folders (and locks) anywhere under ``folders``."""
    return [str(p) for folder in folders if folder.exists() for p in folder.rglob("*")
            if p.name.startswith(".") and (".tmp" in p.name or p.name == ".lock")]


def one_error_line(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code != 0 and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    return last


def rows(out: Path) -> list[tuple[str, int]]:
    return [(r["split"], r["step"]) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())]


def failing_on(call: int, real, error: BaseException, when=lambda *a, **k: True):
    """``real``, failing with ``error`` on its ``call``-th call among those ``when`` selects."""
    seen = [0]

    def fake(*args, **kwargs):
        if when(*args, **kwargs):
            seen[0] += 1
            if seen[0] == call:
                raise error
        return real(*args, **kwargs)

    return fake


def _sites(monkeypatch, out: Path, corpora: Path) -> dict:
    import safetensors.torch
    from torch.utils.tensorboard import SummaryWriter

    import scratchformer.atomic as atomic
    import scratchformer.checkpoints.checkpoint as checkpoint
    from scratchformer.data.corpus import writer
    from scratchformer.train import logger

    return {  # site -> (object, attribute, fake)
        "checkpoint weights": (safetensors.torch, "save_model", failing_on(2, safetensors.torch.save_model, FULL)),
        "trainer state": (checkpoint.torch, "save", failing_on(2, torch.save, RuntimeError(
            "[enforce fail at inline_container.cc:672] . unexpected pos 3558592 vs 3558480"))),
        "metrics.jsonl": (logger, "append_line", failing_on(3, logger.append_line, FULL)),
        "tensorboard": (SummaryWriter, "add_scalar", failing_on(4, SummaryWriter.add_scalar,
                                                                OSError(errno.EIO, "Input/output error"))),
        "config.json": (atomic.os, "replace", failing_on(1, os.replace, OSError(errno.EROFS, "Read-only file system"),
                                                         when=lambda src, dst: Path(dst) == out / "config.json")),
        "history": (safetensors.torch, "save_model", failing_on(1, safetensors.torch.save_model, FULL,
                                                                 when=lambda m, p, *a, **k: "history" in str(p))),
        "tokenizer": (atomic.os, "replace", failing_on(1, os.replace, OSError(errno.EACCES, "Permission denied"),
                                                       when=lambda src, dst: Path(dst).name == "tokenizer.json"
                                                       and corpora in Path(dst).parents)),
        "prepared corpus": (writer, "_write_bytes", failing_on(1, writer._write_bytes, FULL)),
    }


SITES = ["checkpoint weights", "trainer state", "metrics.jsonl", "tensorboard", "config.json", "history",
         "tokenizer", "prepared corpus"]


@pytest.mark.parametrize("quiet", [False, True], ids=["loud", "quiet"])
@pytest.mark.parametrize("site", SITES)
def test_a_failed_write_at_each_site_ends_in_one_line_and_the_run_resumes(tmp_path, text, capsys, monkeypatch,
                                                                          site, quiet):
    pytest.importorskip("tensorboard", reason="the TensorBoard site needs the tensorboard extra")
    corpora = tmp_path / "corpora"
    monkeypatch.setenv("SCRATCHFORMER_CORPORA", str(corpora))
    out = tmp_path / "run"
    words = [*(["average_last=2"] if site == "history" else []), *(["--quiet"] if quiet else [])]
    with monkeypatch.context() as m:
        m.setattr(*_sites(m, out, corpora)[site])
        line = one_error_line(capsys, train(text, out, *words))
    said = "no space left on the disk of" if site == "prepared corpus" else "could not write"
    assert said in line and ("no space left" not in line or "free" in line), line
    assert leftovers(out, corpora) == []
    if (out / "config.json").is_file():  # the run got as far as starting: it resumes from its last checkpoint
        assert main(["train", "--resume", "--out", str(out), *words]) == 0, capsys.readouterr().err
    else:  # it failed before it started: nothing was left, and the same command now runs
        assert not out.exists() or not any(out.iterdir())
        assert train(text, out, *words) == 0
    assert json.loads((out / "last" / "config.json").read_text())["step"] == 9
    assert len(rows(out)) == len(set(rows(out)))  # every (split, step) once
    assert leftovers(out, corpora) == []


def _mount(path: Path, size: str) -> None:
    path.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode:
        pytest.skip(f"this machine does not let the tests mount a small filesystem ({done.stderr.decode().strip()})")


def test_a_real_full_disk_ends_in_one_line_and_the_run_resumes_once_there_is_room(tmp_path, capsys):
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    disk = tmp_path / "disk"
    _mount(disk, "700k")
    try:
        out = disk / "run"
        args = ["train", "--preset", "copy", "max_steps=4", "eval_every=2", "n_test=20", "eval_decode=0", "--quiet",
                "--out", str(out)]
        line = one_error_line(capsys, main(args))
        assert "could not write the checkpoint" in line and "no space left on device (it needs about" in line, line
        assert leftovers(out) == []
        subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        assert main(["train", "--resume", "--quiet", "--out", str(out)]) == 0
        assert json.loads((out / "last" / "config.json").read_text())["step"] == 4 and leftovers(out) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)


READ_ONLY = """
import subprocess, sys
import scratchformer.train.trainer as trainer
from scratchformer.app.cli import main

real_step = trainer.Trainer.train_step
def step(self, i):
    if i == 5:  # the file system under the run becomes read-only in the middle of the run
        subprocess.run(["mount", "-o", "remount,ro", sys.argv[1]], check=True)
    return real_step(self, i)
trainer.Trainer.train_step = step
sys.exit(main(sys.argv[2:]))
"""


def test_a_run_directory_made_read_only_mid_run_ends_in_one_line_and_resumes(tmp_path, text, capsys):
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    disk = tmp_path / "disk"
    _mount(disk, "64m")
    try:
        out = disk / "run"
        argv = ["train", "--data", str(text), *TINY, "--out", str(out)]
        # a process of its own: the lock it leaves must be a process's that has ended, for the resume to take it over
        done = subprocess.run([sys.executable, "-c", READ_ONLY, str(disk), *argv], capture_output=True, text=True)
        err = done.stderr.strip().splitlines()
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert err[-1].startswith("scratchformer: error: could not write") and "read-only file system" in err[-1], err
        assert ".lock" not in err[-1]  # the lock it could not remove stays, and is not what the run ends with
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        assert main(["train", "--resume", "--out", str(out)]) == 0
        assert "taking over the lock" in capsys.readouterr().err
        assert json.loads((out / "last" / "config.json").read_text())["step"] == 9 and leftovers(out) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)


KILLER = """
import os, signal, sys
import scratchformer.atomic as atomic
import safetensors.torch
from scratchformer.app.cli import main
from scratchformer.errors import RunDirError

point, real_replace, real_save = sys.argv[1], os.replace, safetensors.torch.save_model
def die():
    os.kill(os.getpid(), signal.SIGKILL)
def save_model(model, path, *a, **k):
    real_save(model, path, *a, **k)
    if point == "weights written" and ".last.tmp" in path and os.environ.get("ARMED") == "1":
        die()
def replace(src, dst):
    real_replace(src, dst)
    armed = os.environ.get("ARMED") == "1" and os.path.basename(dst) in (".last.old", "last")
    if armed and point == {".last.old": "old moved aside", "last": "new in place"}[os.path.basename(dst)]:
        die()
safetensors.torch.save_model, atomic.os.replace = save_model, replace
os.environ["ARMED"] = "0"
orig = main
import scratchformer.train.trainer as trainer
real_step = trainer.Trainer.train_step
def step(self, i):
    if i == 5:
        os.environ["ARMED"] = "1"  # the save after step 6 dies
    return real_step(self, i)
trainer.Trainer.train_step = step
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("point", ["weights written", "old moved aside", "new in place"])
def test_a_save_killed_half_way_never_leaves_a_checkpoint_that_loads_wrong(tmp_path, text, capsys, point,
                                                                           unbroken):
    out = tmp_path / "run"
    argv = ["train", "--data", str(text), *TINY, "--out", str(out)]
    # a process of its own: it is SIGKILLed half-way through a save
    done = subprocess.run([sys.executable, "-c", KILLER, point, *argv], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (out / ".lock").exists()  # the killed process never released it
    assert main(["train", "--resume", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "taking over the lock" in err and "Traceback" not in err, err
    assert json.loads((out / "last" / "config.json").read_text())["step"] == 9 and leftovers(out) == []
    # the killed and resumed run computed what an unbroken one computes
    a, b = load_file(str(out / "last" / "model.safetensors")), load_file(str(unbroken / "last" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


HELD = """
import os, sys, time
from pathlib import Path
import scratchformer.train.trainer as trainer
from scratchformer.app.cli import main

waiting, go, real_step = Path(sys.argv[1]), Path(sys.argv[2]), trainer.Trainer.train_step
def step(self, i):
    if i == 5:  # in the middle of the run: say so, then wait until the test has tried to write into it
        waiting.touch()
        deadline = time.monotonic() + 300
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return real_step(self, i)
trainer.Trainer.train_step = step
sys.exit(main(sys.argv[3:]))
"""


def test_a_second_writer_is_refused_while_the_first_finishes_untouched(tmp_path, text, capsys):
    """The first writer is held at step 5 of its 40 until both second writers have been refused (it once ran 400
    steps and the test hoped to be quicker than it): the refusals come while it is surely running."""
    out, waiting, go = tmp_path / "run", tmp_path / "waiting", tmp_path / "go"
    # a process of its own: the lock is between two processes
    first = subprocess.Popen([sys.executable, "-c", HELD, str(waiting), str(go), "train", "--data", str(text), *TINY,
                              "max_steps=40", "eval_every=10", "--quiet", "--out", str(out)],
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not waiting.exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.05)
        assert first.poll() is None and (out / "config.json").is_file(), first.stderr.read()
        for argv in (["train", "--resume", "--out", str(out), "max_steps=500"], ["train", *TINY, "--out", str(out)]):
            line = one_error_line(capsys, main(argv))
            assert f"process {first.pid}" in line and str(out / ".lock") in line, line
    finally:
        go.touch()
        assert first.wait(timeout=600) == 0, first.stderr.read()
    assert json.loads((out / "last" / "config.json").read_text())["step"] == 40
    assert len(rows(out)) == len(set(rows(out))) and leftovers(out) == []


def test_a_stale_lock_is_taken_over_and_another_hosts_lock_is_not(tmp_path, text, capsys):
    out = tmp_path / "run"
    assert train(text, out, "max_steps=3") == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # a process that has ended: its id is free
    dead.wait()
    (out / ".lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    assert main(["train", "--resume", "--out", str(out), "max_steps=6"]) == 0
    assert f"taking over the lock of process {dead.pid}" in capsys.readouterr().err
    (out / ".lock").write_text(json.dumps({"pid": 1234, "host": "elsewhere"}))
    before = (out / "last" / "model.safetensors").read_bytes()
    line = one_error_line(capsys, main(["train", "--resume", "--out", str(out), "max_steps=9"]))
    assert "process 1234 on host elsewhere" in line and str(out / ".lock") in line, line
    assert (out / "last" / "model.safetensors").read_bytes() == before and (out / ".lock").exists()


@pytest.mark.slow
def test_ten_sigterms_at_random_steps_end_bit_identical_to_one_unbroken_run(tmp_path, text, capsys, monkeypatch):
    """Ten runs each stopped by a SIGTERM sent to itself at a random step (as a job scheduler would; the run saves
    after that step and returns 130), each resumed by the next: the end is bit-identical to one unbroken run. In
    this process: the handler the trainer installs catches the signal in pytest's main thread as in a process of
    its own (and is put back after each run)."""
    import random

    import scratchformer.train.trainer as trainer

    # a SIGTERM the trainer did not catch would end this process: its handler is installed in the main thread only
    assert threading.current_thread() is threading.main_thread()
    # one thread in every run: a sum split over another count of threads rounds differently
    steps = ["max_steps=60", "eval_every=7", "save_every=5", "num_threads=1"]
    reference = tmp_path / "reference"
    assert train(text, reference, *steps) == 0
    out = tmp_path / "run"
    stops = sorted(random.Random(0).sample(range(1, 59), 10))
    real_step, stop_at, before = trainer.Trainer.train_step, [None], signal.getsignal(signal.SIGTERM)

    def step(self, i):
        if i == stop_at[0]:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_step(self, i)

    monkeypatch.setattr(trainer.Trainer, "train_step", step)
    for i, stop in enumerate(stops):
        stop_at[0] = stop
        capsys.readouterr()
        argv = ["train", *(["--resume"] if i else ["--data", str(text), *TINY, *steps]), "--out", str(out)]
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 130 and f"interrupted at step {stop + 1}" in err, err
        assert signal.getsignal(signal.SIGTERM) == before  # the run put this process's handler back
    monkeypatch.setattr(trainer.Trainer, "train_step", real_step)
    assert main(["train", "--resume", "--out", str(out)]) == 0
    a = load_file(str(out / "last" / "model.safetensors"))
    b = load_file(str(reference / "last" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert rows(out) == rows(reference)


def test_a_later_rank_does_not_take_its_first_rank_s_files_for_another_run(tmp_path, monkeypatch):
    """Under torchrun, rank 0 takes the lock, checks the directory and begins writing into it; a rank that starts
    later finds rank 0's files there and must not refuse them as another run's (under load it did, and the run
    ended with that rank's one-line error)."""
    from scratchformer.distributed import DistInfo
    from scratchformer.settings.config import TrainConfig
    from scratchformer.train import session

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text("{}")  # what rank 0 has written by then
    monkeypatch.setattr(session, "init_distributed", lambda device: DistInfo(rank=1, world_size=2))
    opened = session.open_run(out, TrainConfig(), quiet=True)
    assert opened.lock is None and opened.dist.rank == 1
    monkeypatch.setattr(session, "init_distributed", lambda device: DistInfo())
    with pytest.raises(RunDirError, match="already holds a run"):  # rank 0 (or one process) still refuses it
        session.open_run(out, TrainConfig(), quiet=True)
