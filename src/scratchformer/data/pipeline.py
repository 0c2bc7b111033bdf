"""The one data pipeline: a task's files by role -> its tokenizer -> prepared corpora -> the views it batches from.

    roles.py      which files a user gave, checked against the task's data form (``roles``)
    plan.py       which source each split reads: the files, or a named dataset's splits (``plan``)
    prepared.py   the tokenizer (a checkpoint's, or trained once and cached) and each source's corpus on disk
    task_data.py  each split as a view of a corpus: a range of tokens, or a set of rows (``TaskData``)

``load_data`` runs them in that order and is the only way in: the training loop, ``evaluate`` and ``prepare``
all call it and receive ready data. A task that makes its own data (copy, reverse, sort) gets None; images
are small and are read into memory (``image_splits``) instead of being prepared.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from scratchformer.data.plan import plan
from scratchformer.data.prepared import Prepared, prepare
from scratchformer.data.roles import DataFiles, roles
from scratchformer.data.task_data import TaskData, task_data
from scratchformer.distributed import DistInfo
from scratchformer.errors import DataError
from scratchformer.registry import TaskSpec
from scratchformer.tokenizers import Tokenizer

if TYPE_CHECKING:
    from scratchformer.data.image_splits import Splits

__all__ = ["DataSettings", "load_data", "prepare_only"]

NO_TRAINING_DATA = "no training data: --data names the training file (--val and --test alone cannot train)"


class DataSettings(Protocol):
    """The settings the pipeline reads (a ``TrainConfig`` has them)."""

    dataset: str | None
    data_dir: str | None
    tokenizer: str
    bpe_vocab_size: int
    lowercase: bool
    tokenizer_sample: int
    val_fraction: float
    seed: int


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def load_data(task: TaskSpec, cfg: DataSettings, files: DataFiles, *, tokenizer: Tokenizer | None = None,
              labels: list[str] | None = None, training: bool = True, dist: DistInfo | None = None,
              say: Callable[[str], None] = _stderr, quiet: bool = False) -> TaskData | Splits | None:
    """The data ``task`` reads from ``files`` (or its named ``cfg.dataset``), ready to batch.

    ``tokenizer``: a checkpoint's, used as it is (else one is trained on the training source, or found trained
    before). ``labels``: a trained classifier's classes. ``training``: refuse data without a training split.
    ``dist``: the distributed run this process is part of (rank 0 prepares, the others wait for it)."""
    if task.data is None:
        roles(task, files)  # refuses files: the task makes its own data
        return None
    if not task.data.prepared:
        from scratchformer.data.image_splits import image_splits

        splits = image_splits(task, cfg.dataset, cfg.data_dir, files, val_fraction=cfg.val_fraction, seed=cfg.seed,
                              label_names=labels)
        if training and not splits.has("train"):
            raise DataError(NO_TRAINING_DATA)
        return splits
    the_plan = plan(task, files, dataset=cfg.dataset, data_dir=cfg.data_dir, val_fraction=cfg.val_fraction,
                    seed=cfg.seed, labels=labels)
    if (training or tokenizer is None) and not the_plan.has("train"):
        raise DataError(NO_TRAINING_DATA)
    tokenizer, prepared = prepare(cfg, the_plan, tokenizer, dist or DistInfo(), say, quiet)
    return task_data(the_plan, tokenizer, prepared)


def prepare_only(task: TaskSpec, cfg: DataSettings, files: DataFiles, tokenizer: Tokenizer | None = None, *,
                 say: Callable[[str], None] = _stderr, quiet: bool = False) -> tuple[Tokenizer, list[Prepared], Path]:
    """``scratchformer prepare``: the tokenizer and the corpora a run on ``files`` would read, made now; also
    the folder that holds them."""
    from scratchformer.data.corpus.cache import corpora_dir

    if task.data is None:
        raise DataError(f"task={task.name} makes its own data: there is nothing to prepare (give task=lm, "
                        "translate, classify or mlm)")
    if not task.data.prepared:
        raise DataError(f"task={task.name} reads its images into memory at the start of a run; nothing is prepared")
    the_plan = plan(task, files, dataset=cfg.dataset, data_dir=cfg.data_dir, val_fraction=cfg.val_fraction,
                    seed=cfg.seed)
    if tokenizer is None and not the_plan.has("train"):
        raise DataError(NO_TRAINING_DATA)
    tokenizer, prepared = prepare(cfg, the_plan, tokenizer, DistInfo(), say, quiet)
    return tokenizer, prepared, corpora_dir()
