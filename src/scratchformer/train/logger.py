"""Run logging: ``metrics.jsonl`` (one JSON object per event) and TensorBoard event files.

Each event has ``step``, ``split`` (``train``, ``val`` or ``test``) and metric names, e.g.
``{"step": 200, "split": "val", "loss": 1.93, "perplexity": 6.9, "exact_match": 0.41}``. A (split, step)
pair appears at most once: a resumed run first drops what was logged after the checkpoint it resumes
from (``prune``), and the test split is measured once, at the end.

TensorBoard files are written when the ``tensorboard`` package is installed (the ``tensorboard`` extra);
otherwise the run says so once.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.atomic import atomic_write_text, writing


class MetricsLogger:
    def __init__(self, run_dir: Path, enabled: bool = True, tensorboard: bool = True, purge_step: int | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.enabled = enabled
        self.path = run_dir / "metrics.jsonl"
        self.writer = None
        if enabled and tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is an optional extra
                if say is not None:
                    say('note: TensorBoard files are skipped (pip install -e ".[tensorboard]" to write them); '
                        "metrics.jsonl has every number")
            else:
                self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=purge_step)

    def log(self, step: int, split: str, **metrics: Any) -> None:
        """Append one event; a write that fails leaves no part of its line and raises ``WriteError``."""
        if not self.enabled:
            return
        record = {"step": step, "split": split, **{k: _plain(v) for k, v in metrics.items()}}
        data = (json.dumps(record) + "\n").encode("utf-8")
        with writing("metrics.jsonl", self.path.parent, needed=len(data)):
            append_line(self.path, data)
        if self.writer is not None:
            with writing("the TensorBoard files", self.path.parent / "tensorboard"):
                for name, value in metrics.items():
                    if isinstance(value, (int, float)) and math.isfinite(value):
                        self.writer.add_scalar(f"{split}/{name}", value, step)
                self.writer.flush()

    def close(self, failing: bool = False) -> None:
        """Close the TensorBoard files; ``failing``: the run is already ending on an error, which a second one
        (the same full disk, say) must not hide."""
        if self.writer is None:
            return
        writer, self.writer = self.writer, None
        try:
            with writing("the TensorBoard files", self.path.parent / "tensorboard"):
                writer.close()
        except OSError:
            if not failing:
                raise


def append_line(path: Path, data: bytes) -> None:
    """Append ``data`` (one line) to ``path``, whole or not at all: a write that fails part-way is cut off again."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start, done = os.lseek(fd, 0, os.SEEK_END), 0
        try:
            while done < len(data):
                done += os.write(fd, data[done:])
        except OSError:
            os.ftruncate(fd, start)  # the file ends with a whole line, as before
            raise
    finally:
        os.close(fd)


def _plain(v: Any) -> Any:
    if isinstance(v, float):
        return float(f"{v:.7g}") if math.isfinite(v) else str(v)  # 7 significant digits
    return v


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def prune(run_dir: Path, step: int) -> None:
    """Keep the events of steps up to ``step`` (a resumed run's checkpoint), except the test ones (a run
    measures its test split once, at its end). Rewritten atomically."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    kept = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:  # a line cut short by a kill: it belongs to no step we keep
            continue
        if row.get("step", 0) <= step and row.get("split") != "test":
            kept.append(line)
    if len(kept) != len(lines):
        atomic_write_text(path, "".join(line + "\n" for line in kept), "metrics.jsonl")
