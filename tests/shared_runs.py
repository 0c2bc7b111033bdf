"""Tiny runs and folders made once per test run and read by every test that only reads them.

A run here is a few seconds of training; made by each module that wants one, the same runs were trained a dozen
times per suite. So each kind is built once, by the first test that asks (``conftest.shared_run("copy")``), under
a file lock in a folder that both pytest-xdist workers see (the parent of their own temporary folders), and read by
every later test of either worker. A test that changes a run (resumes it, fine-tunes into it, writes a report into
it) works on ``copy_of(run, tmp_path)``; ``get`` checks that nobody changed a shared run in place, and fails the test
that finds one changed.

The settings of every tiny run live here too (``TINY`` and friends): one place for "a model that trains in a
second", instead of one list per module.

Add a kind: a function ``make(out: Path) -> None`` that trains (or writes) into ``out``, registered in ``MAKERS``;
read it with ``shared_run(name)``. A maker may read another kind with ``get`` (no cycles).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

# ------------------------------------------------------------------------------------ settings of tiny runs

# The model of every tiny run: trains a few steps a second on one core.
TINY = ["d_model=32", "n_heads=2", "n_layers=1", "d_ff=64"]
TWO_LAYERS = ["d_model=32", "n_heads=2", "n_layers=2", "d_ff=64"]
# A few steps, one evaluation at the end, nothing printed but warnings and results.
QUICK = ["max_steps=6", "batch_size=4", "eval_every=6", "eval_batches=1", "num_threads=1", "--quiet"]
# The same tiny model as a ModelConfig's keywords (for tests that build a model without a run).
TINY_MODEL = dict(vocab_size=37, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, dropout=0.0)

# ------------------------------------------------------------------------------------ the data the runs read

TEXT = "to be or not to be, that is the question.\n" * 50
LABELLED = "text\tlabel\n" + "".join(f"good fun {i}\tpos\nbad dull {i}\tneg\n" for i in range(40))
PAIRS = "".join(f"ein haus {i}\ta house {i}\n" for i in range(80))
# Instruction records a tiny GPT learns in a minute: sums and words spelt backwards
RECORDS = [{"instruction": f"Add {a} and {b}.", "input": "", "output": f"{a + b}"} for a in range(6) for b in range(5)]
RECORDS += [{"instruction": "Spell the word backwards.", "input": w, "output": w[::-1]} for w in ("cat", "dog", "sun")]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
FILES: dict[str, str] = {
    "text.txt": TEXT,
    "labelled.tsv": LABELLED,
    "pairs.tsv": PAIRS,
    "records.json": json.dumps(RECORDS),
}


def data_file(root: Path, name: str) -> Path:
    """One of ``FILES`` written into ``root`` (once)."""
    path = root / name
    if not path.exists():  # written whole under another name, then renamed: a worker never reads half a file
        part = root / f".{name}.{os.getpid()}"
        part.write_text(FILES[name], encoding="utf-8")
        os.replace(part, path)
    return path


# ------------------------------------------------------------------------------------ making them once


def _train(*argv: str) -> None:
    """``scratchformer train ...`` in this process, leaving its thread count as it was."""
    from scratchformer.app.cli import main

    threads = torch.get_num_threads()
    try:
        assert main(["train", *argv]) == 0, f"train {' '.join(argv)} failed"
    finally:
        torch.set_num_threads(threads)


def _make_copy(out: Path, files: Path) -> None:
    """A copy model (encoder-decoder) that copies: 300 steps of the copy preset, 50 test strings."""
    _train("--preset", "copy", "max_steps=300", "d_model=64", "d_ff=128", "n_test=50", "eval_every=300",
           "eval_decode=20", "max_seq_len=8", "log_every=50", "--quiet", "--out", str(out))


def _make_lm(out: Path, files: Path) -> None:
    """A character-level GPT on ``TEXT``: 30 steps."""
    _train("task=lm", "--data", str(data_file(files, "text.txt")), *TINY, "max_len=32", "max_steps=30",
           "batch_size=8", "eval_every=30", "eval_batches=1", "log_every=50", "--quiet", "--out", str(out))


def _make_classifier(out: Path, files: Path) -> None:
    """A character-level encoder classifier of ``LABELLED`` (pos / neg): 30 steps."""
    _train("task=classify", "--data", str(data_file(files, "labelled.tsv")), *TINY, "max_steps=30", "batch_size=16",
           "eval_every=30", "log_every=50", "--quiet", "--out", str(out))


def _make_translator(out: Path, files: Path) -> None:
    """A character-level encoder-decoder of ``PAIRS`` (German -> English): 20 steps."""
    _train("task=translate", "--data", str(data_file(files, "pairs.tsv")), *TINY, "max_steps=20", "batch_size=16",
           "eval_every=20", "eval_decode=5", "log_every=50", "--quiet", "--out", str(out))


MAKERS: dict[str, Callable[[Path, Path], None]] = {
    "copy": _make_copy,
    "lm": _make_lm,
    "classifier": _make_classifier,
    "translator": _make_translator,
}


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test run shares (xdist's workers each have a subfolder of one parent)."""
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    root.mkdir(exist_ok=True)
    return root


def _fingerprint(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def get(factory: pytest.TempPathFactory, name: str) -> Path:
    """The run ``name``, made by its maker the first time any worker asks (the others wait for it)."""
    from filelock import FileLock

    root = shared_root(factory)
    out, stamp, files = root / name, root / f"{name}.made.json", root / "files"
    files.mkdir(exist_ok=True)
    with FileLock(str(root / f"{name}.lock")):
        if not stamp.exists():
            if out.exists():  # a maker that failed half-way
                shutil.rmtree(out)
            MAKERS[name](out, files)
            stamp.write_text(json.dumps(_fingerprint(out)))
    if json.loads(stamp.read_text()) != [list(f) for f in _fingerprint(out)]:
        pytest.fail(f"the shared run {name!r} was changed by a test: a test that writes into a run must work on "
                    "shared_runs.copy_of(run, tmp_path)")
    return out


def files_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder of ``FILES`` (written on demand, by ``data_file``)."""
    folder = shared_root(factory) / "files"
    folder.mkdir(exist_ok=True)
    return folder


def processes_lock(factory: pytest.TempPathFactory):
    """The lock a test (or module fixture) holds while it runs several processes (conftest's ``processes`` mark)."""
    from filelock import FileLock

    return FileLock(str(shared_root(factory) / "processes.lock"))


def copy_of(run: Path, folder: Path) -> Path:
    """A copy of ``run`` in ``folder``, for a test that writes into it."""
    target = folder / run.name
    shutil.copytree(run, target)
    return target
