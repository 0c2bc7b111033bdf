"""Run logging: ``metrics.jsonl`` (one JSON object per event) and TensorBoard event files.

Each event has ``step``, ``split`` (``train``, ``val`` or ``test``) and metric names, e.g.
``{"step": 200, "split": "val", "loss": 1.93, "perplexity": 6.9, "exact_match": 0.41}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class MetricsLogger:
    def __init__(self, run_dir: Path, enabled: bool = True, tensorboard: bool = True) -> None:
        self.enabled = enabled
        self.path = run_dir / "metrics.jsonl"
        self.writer = None
        if enabled and tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional at run time
                SummaryWriter = None  # noqa: N806
            if SummaryWriter is not None:
                self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))

    def log(self, step: int, split: str, **metrics: Any) -> None:
        if not self.enabled:
            return
        record = {"step": step, "split": split, **{k: _plain(v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for name, value in metrics.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self.writer.add_scalar(f"{split}/{name}", value, step)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _plain(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6) if math.isfinite(v) else str(v)
    return v


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
