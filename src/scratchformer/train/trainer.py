"""``train``: the function that runs a training run, from its settings to a trained model.

The run itself, step by step, is ``loop.Trainer``; ``train`` picks the device, joins a distributed run when
started by ``torchrun``, and hands the settings, the data and a place to report progress to the loop.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from scratchformer.data.sources import DataFiles
from scratchformer.nn.config import ConfigError
from scratchformer.train.config import TrainConfig
from scratchformer.train.device import pick_device
from scratchformer.train.distributed import cleanup, init_distributed
from scratchformer.train.loop import Trainer, TrainingError, TrainResult
from scratchformer.train.progress import Progress
from scratchformer.train.resume import RunDirError, check_out_dir
from scratchformer.train.run_info import RunInfo

__all__ = ["RunDirError", "TrainResult", "Trainer", "TrainingError", "check_out_dir", "pick_device", "train"]


def train(model_kw: dict[str, Any], cfg: TrainConfig, out_dir: str | Path,
          data: DataFiles | list[str] | None = None, *, resume: bool = False,
          echo: Callable[[str], None] | None = None, quiet: bool = False, run: RunInfo | None = None) -> TrainResult:
    """Train a model; returns it with its final validation and test metrics.

    ``model_kw``: ``ModelConfig`` fields chosen by the user (the rest follow from the task and data).
    ``data``: the user's files by role (``DataFiles``), or a list of ``--data`` paths. ``run``: how the
    settings were resolved (the CLI passes it, to print and save where each setting came from).
    """
    model_kw = {**model_kw, "arch": model_kw.get("arch", cfg.arch)}  # the task decides the family
    if model_kw["arch"] != cfg.arch:
        raise ConfigError(f"arch={model_kw['arch']!r} does not fit task={cfg.task!r} (needs arch={cfg.arch!r})")
    out = Path(out_dir)
    check_out_dir(out, resume)
    device = pick_device(cfg.device)
    info = init_distributed(device)
    if info.enabled and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    say = echo or (lambda s: print(s, file=sys.stderr))
    progress = Progress(say if info.is_main else None, quiet=quiet)
    run = run or RunInfo.from_config(model_kw, cfg, DataFiles.of(data))
    try:
        result = Trainer(model_kw, cfg, out, run, resume, device, info, progress).run()
        cleanup(info, finished=True)
        return result
    finally:
        cleanup(info)
