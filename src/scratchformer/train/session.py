"""A training run's session: its directory, device and processes, and where a resumed run continues."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import torch

from scratchformer.checkpoints import ModelSource
from scratchformer.distributed import DistInfo, cleanup, init_distributed
from scratchformer.errors import ConfigError
from scratchformer.settings.config import TrainConfig
from scratchformer.tokenizers import Tokenizer
from scratchformer.train.device import pick_device
from scratchformer.train.lock import RunLock
from scratchformer.train.progress import Progress
from scratchformer.train.resume import check_out_dir, pick_checkpoint, remove_leftovers

__all__ = ["Session", "open_run"]


@dataclass
class Session:
    """Where and how a run trains: its directory, device and processes, and (resuming) the checkpoint it
    continues from. A context manager: leaving it leaves the process group of a distributed run."""

    out: Path
    resume: bool
    device: torch.device
    dist: DistInfo
    progress: Progress
    checkpoint: Path | None
    tokenizer: Tokenizer | None  # the resumed checkpoint's, or the one of the model fine-tuned from
    lock: RunLock | None = None  # held by the process that writes the run (rank 0)
    base: ModelSource | None = None  # what init_from names (train/fine_tune.starting_point), found once
    base_template: dict[str, str] | None = None  # the prompt template of the run fine-tuned from, if it has one
    sharded: bool = False  # the model split across the processes (shard=fsdp under torchrun: train/fsdp.py)

    @property
    def log(self) -> Callable[[str], None]:
        return self.progress.say

    @property
    def template(self) -> dict[str, str] | None:
        """The resumed checkpoint's prompt template (an instruction-tuned run's), else the one the run it starts from
        was tuned with (``base_template``), else None."""
        from scratchformer.checkpoints import read_meta

        return read_meta(self.checkpoint).get("template") if self.checkpoint is not None else self.base_template

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        try:
            cleanup(self.dist, finished=kind is None)
        finally:
            if self.lock is not None:
                self.lock.release(failing=kind is not None)


def open_run(out: Path, cfg: TrainConfig, *, resume: bool = False, quiet: bool = False,
             echo: Callable[[str], None] | None = None, base: ModelSource | None = None,
             sharded: bool = False) -> Session:
    """Pick the device; join the process group when started by ``torchrun``; on rank 0, take the run directory's
    lock (``lock.py``: one writer), refuse a directory that holds another run (or, resuming, nothing) and remove
    what a killed write left; find the checkpoint a resumed run continues from."""
    device = pick_device(cfg.device)
    dist = init_distributed(device)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
        torch.cuda.set_device(device)
    say = echo or (lambda s: print(s, file=sys.stderr))
    progress = Progress(say if dist.is_main else None, quiet=quiet)
    lock = RunLock(out) if dist.is_main else None
    try:
        if lock is not None:  # rank 0 alone: another rank, started later, would find rank 0's own files there
            lock.acquire(progress.say)
            check_out_dir(out, resume)
            remove_leftovers(out)
        ckpt = pick_checkpoint(out, progress.say) if resume else None
        return Session(out, resume, device, dist, progress, ckpt, _tokenizer(ckpt, base), lock, base,
                       _base_template(cfg, base), sharded)
    except BaseException:
        if lock is not None:
            lock.release(failing=True)
        cleanup(dist)
        raise


def _tokenizer(ckpt: Path | None, base: ModelSource | None) -> Tokenizer | None:
    """A resumed checkpoint's tokenizer, or the one of the model a run is fine-tuned from (``init_from``); None: the
    data pipeline trains one."""
    from scratchformer.checkpoints import find_source

    if ckpt is not None:
        return find_source(ckpt).tokenizer()
    if base is None:
        return None
    tokenizer = base.tokenizer()
    if tokenizer is None:
        raise ConfigError(f"{base.path} has no tokenizer.json: training on text needs the model's own tokenizer")
    return tokenizer


def _base_template(cfg: TrainConfig, base: ModelSource | None) -> dict[str, str] | None:
    """The prompt template of the run ``init_from`` names, when it was tuned with one (an instruction-tuned run) and
    ``template`` names none: a run that tunes it further asks as it was taught. None: the settings decide."""
    return base.template if base is not None and not getattr(cfg, "template", None) else None
