"""Where a checkpoint's benchmark results are kept: ``benchmarks.json`` in its run directory (for a Hugging Face
folder, which is the user's and is not written into: in the current directory), or the ``--output`` file (and the
run's own file too: a run keeps every result it took, for its report). One JSON object keyed by benchmark name; a new
result replaces the one of the same name and leaves the others, so that a run's file gathers every benchmark it has
taken (``report`` reads it). Written atomically: a failure leaves the file as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scratchformer.atomic import atomic_write_text
from scratchformer.checkpoints import find_checkpoint
from scratchformer.errors import DataError

__all__ = ["RESULTS_FILE", "merge_results", "read_results", "results_path"]

RESULTS_FILE = "benchmarks.json"


def results_path(ckpt: str | Path, output: str | Path | None = None) -> tuple[Path, bool]:
    """``(the file results go to, whether it is beside rather than in a run)``: ``output`` if given; else the run
    directory's ``benchmarks.json`` (a checkpoint's run: the folder holding its ``metrics.jsonl``); else, for a
    Hugging Face folder, ``benchmarks.json`` in the current directory."""
    if output is not None:
        return Path(output), False
    found = find_checkpoint(ckpt)
    if found is None:
        return Path.cwd() / RESULTS_FILE, True
    run = found.parent if (found.parent / "metrics.jsonl").is_file() else found
    return run / RESULTS_FILE, False


def read_results(path: Path) -> dict[str, Any]:
    """The results already in ``path`` ({} when there is no such file); one line if it is not a results file."""
    if not path.exists():
        return {}
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"{path} is not a results file ({type(err).__name__}); give another --output or move it "
                        "away") from None
    if not isinstance(earlier, dict):
        raise DataError(f"{path} is not a results file (not a JSON object); give another --output or move it away")
    return earlier


def merge_results(path: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Write ``results`` into ``path``, over the earlier results of the same benchmarks; returns the whole file."""
    merged = {**read_results(path), **results}
    atomic_write_text(path, json.dumps(merged, indent=2) + "\n", what=path.name)
    return merged
