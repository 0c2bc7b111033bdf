"""Starting a training run: its session (the run directory, the device, the processes, where a resumed run
continues), then the task and the model for its ready data, then the loop.

A run goes through four steps, which ``scratchformer train`` takes one by one (``app/commands.py``) and ``train``
takes for a caller in Python:

    settings      resolve(...) -> Resolved           settings/   (the precedence rule; ModelConfig built once)
    session       open_run(out, cfg, resume=...)     session.py  (refuses a used directory, joins torchrun)
    data          load_data(task, cfg, files, ...)   data/       (files -> tokenizer -> prepared corpora -> views)
    training      train_on(session, resolved, data)  here        (the task, the model, trainer.Trainer)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from scratchformer.data.pipeline import load_data
from scratchformer.data.roles import DataFiles
from scratchformer.models import build_model
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.build import make_task
from scratchformer.train.result import TrainResult
from scratchformer.train.session import Session, open_run
from scratchformer.train.trainer import Trainer

__all__ = ["Session", "open_run", "train", "train_on"]


def train_on(session: Session, run: Resolved, data: Any) -> TrainResult:
    """Train on ready data (``data.load_data``): the task, a new model (or one fine-tuned from ``init_from``),
    the loop (``trainer.Trainer``)."""
    cfg = run.train
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    task = make_task(cfg, run.model, data, session.log, session.tokenizer)
    if cfg.init_from:
        from scratchformer.train.fine_tune import fine_tuned

        model = fine_tuned(cfg, run.split()[0], task, session.log)
    else:
        model = build_model(task.model_config)
    return Trainer(task, model, run, session).run()


def train(model_kw: dict[str, Any], cfg: TrainConfig, out_dir: str | Path,
          data: DataFiles | list[str] | None = None, *, resume: bool = False,
          echo: Callable[[str], None] | None = None, quiet: bool = False, run: Resolved | None = None) -> TrainResult:
    """Train a model from Python; returns it with its final validation and test metrics.

    ``model_kw``: ``ModelConfig`` fields chosen (the vocabulary and classes follow from the data). ``data``: the
    files by role (``DataFiles``), or a list of ``--data`` paths. ``run``: resolved settings (``resolve``), which
    replace ``model_kw`` and ``cfg`` and say where each setting came from."""
    run = run or Resolved.of(model_kw, cfg, DataFiles.of(data))
    with open_run(Path(out_dir), run.train, resume=resume, quiet=quiet, echo=echo) as session:
        ready = load_data(run.task, run.train, run.data, tokenizer=session.tokenizer, dist=session.dist,
                          say=session.log, quiet=quiet)
        return train_on(session, run, ready)
