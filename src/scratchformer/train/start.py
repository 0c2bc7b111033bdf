"""Starting a training run: its session (the run directory, the device, the processes, where a resumed run
continues), its data, then the task and the model for that data, then the loop.

A run goes through four steps, written once, here (``train``), for ``scratchformer train`` (``app/train_commands.py``)
and for a caller in Python alike:

    settings      resolve(...) -> Resolved           settings/   (the precedence rule; ModelConfig built once)
    session       open_run(out, cfg, resume=...)     session.py  (refuses a used directory, joins torchrun)
    data          load_data(task, cfg, files, ...)   data/       (files -> tokenizer -> TaskData)
    training      trainer_for(session, run, data)    here        (the task, the model, trainer.Trainer), .run()

The first is the caller's: ``train(resolve(overrides={"task": "copy", "max_steps": 200}), "runs/copy")``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from scratchformer.data.pipeline import load_data
from scratchformer.data.task_data import TaskData
from scratchformer.models import build_model
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.build import make_task
from scratchformer.train.result import TrainResult
from scratchformer.train.session import Session, open_run
from scratchformer.train.trainable import apply_trainable
from scratchformer.train.trainer import Trainer

__all__ = ["train", "trainer_for"]


def train(run: Resolved, out_dir: str | Path, *, resume: bool = False, echo: Callable[[str], None] | None = None,
          quiet: bool = False) -> TrainResult:
    """Train a model; returns it with its final validation and test metrics.

    ``run``: the settings, resolved (``settings.resolve``, or for ``resume`` the run's own,
    ``settings.resume_settings``), with the data files. ``echo``: where the run's lines go (standard error)."""
    from scratchformer.distributed import launched_processes
    from scratchformer.train.fine_tune import starting_point
    from scratchformer.train.fsdp import sharded_run

    sharded = sharded_run(run, launched_processes())  # shard=fsdp: what cannot be, refused before anything starts
    base = starting_point(run) if run.train.init_from else None  # refused here, before any file is written or read
    with open_run(Path(out_dir), run.train, resume=resume, quiet=quiet, echo=echo, base=base,
                  sharded=sharded) as session:
        data = load_data(run.task, run.train, run.data, tokenizer=session.tokenizer, dist=session.dist,
                         say=session.log, quiet=quiet, template=session.template,
                         base=base.path if base is not None else None)
        return trainer_for(session, run, data).run()


def trainer_for(session: Session, run: Resolved, data: TaskData) -> Trainer:
    """The task for ready data, a new model (or one fine-tuned from ``init_from``) and the loop that will train
    it (``trainer.Trainer``; ``.run()`` starts it)."""
    cfg = run.train
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    torch.manual_seed(cfg.seed)
    from scratchformer.train.fine_tune import fine_tuned, fitted_to_base

    base = session.base
    run = fitted_to_base(run, base) if base is not None else run  # inputs no longer than the base reads
    task = make_task(cfg, run.model, data, session.log)
    model, fill = None, None
    if base is not None and session.sharded:  # a large base: built on the meta device, filled once sharded
        from scratchformer.train.fsdp_init import sharded_start

        model, fill = sharded_start(run, task, base, session.log)
    if model is None:
        model = fine_tuned(run, task, base, session.log) if base is not None else build_model(task.model_config)
    if cfg.lora_rank:
        from scratchformer.train.lora import apply_lora

        apply_lora(model, cfg, base, session.log)
    elif cfg.trainable != "all":
        trained, total = apply_trainable(model, cfg.trainable)
        session.log(f"trainable={cfg.trainable}: {trained:,} of {total:,} weights train, the others are frozen")
    if cfg.sharded and not session.sharded:
        session.log("shard=fsdp on one process: the model is whole here; the run's checkpoints stay sharded")
    if fill is None:  # (a model built on the meta device has no weights yet; train/fsdp_init.py fills it)
        task.start(model.to(session.device), session.out, session.dist.is_main)  # (a DPO run's reference)
    return Trainer(task, model, run, session, fill)
