"""What a training run returns (``TrainResult``); the error that stops one is ``errors.TrainingError``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from torch import nn

from scratchformer.nn.config import ModelConfig
from scratchformer.tasks import Task

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    out_dir: Path
    model: nn.Module
    task: Task
    model_config: ModelConfig
    step: int
    val: dict[str, float] = field(default_factory=dict)  # validation metrics of the kept checkpoint (best/, averaged/)
    test: dict[str, float] = field(default_factory=dict)  # test metrics of that same checkpoint
    last_val: dict[str, float] = field(default_factory=dict)  # the last evaluation's validation metrics
    samples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""  # "", "early stopping", "time budget"
    is_main: bool = True  # False on the other ranks of a distributed run (they print nothing)
    averaged_steps: list[int] = field(default_factory=list)  # average_last: the steps whose mean is averaged/
    before_averaging: dict[str, float] = field(default_factory=dict)  # then: best/'s (else last/'s) validation metrics
