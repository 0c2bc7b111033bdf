"""A task from settings and files: its data read by the pipeline, handed to the class its registry entry names."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scratchformer.data.pipeline import load_data
from scratchformer.data.roles import DataFiles
from scratchformer.distributed import DistInfo
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import spec
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.values import model_config
from scratchformer.tasks.base import Task
from scratchformer.tokenizers import Tokenizer

__all__ = ["build_task", "make_task", "resolve_model_config", "starting_tokenizer"]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def make_task(cfg: TrainConfig, model: ModelConfig, data: Any, log: Callable[[str], None] = _stderr,
              tokenizer: Tokenizer | None = None) -> Task:
    """The task object of ``cfg.task`` (its registry entry's class) on data already read (``load_data``)."""
    return spec(cfg.task).runner_class()(cfg, model, data, log, tokenizer)


def build_task(cfg: TrainConfig, model_kw: dict[str, Any], data: DataFiles | list[str] | None = None,
               log: Callable[[str], None] = _stderr, tokenizer: Tokenizer | None = None,
               label_names: list[str] | None = None, *, dist: DistInfo | None = None, quiet: bool = False) -> Task:
    """The task for ``cfg.task`` on ``data``; pass ``tokenizer`` (a checkpoint's) to reuse it instead of training
    one, and ``label_names`` (a classifier's) to keep its classes."""
    tokenizer = tokenizer or starting_tokenizer(cfg)
    ready = load_data(spec(cfg.task), cfg, DataFiles.of(data), tokenizer=tokenizer, labels=label_names,
                      training=False, dist=dist, say=log, quiet=quiet)
    return make_task(cfg, model_config(model_kw, cfg), ready, log, tokenizer)


def starting_tokenizer(cfg: TrainConfig) -> Tokenizer | None:
    """The tokenizer a run starts from when it is not trained on the data: fine-tuning (``init_from``) uses the
    pretrained model's or the scratchformer run's own. None: train one."""
    if not cfg.init_from:
        return None
    from scratchformer.checkpoint import find_checkpoint, load_checkpoint
    from scratchformer.interop.pretrained import find_pretrained
    from scratchformer.tokenizers import PretrainedTokenizer

    base = find_checkpoint(cfg.init_from)
    if base is not None:
        return load_checkpoint(base).tokenizer
    return PretrainedTokenizer.from_file(find_pretrained(cfg.init_from, cfg.data_dir) / "tokenizer.json")


def resolve_model_config(task: Task, model_kw: dict[str, Any] | None = None) -> ModelConfig:
    """The model ``task`` trains: its settings' model with the vocabulary (and classes) its data decides."""
    return task.model_config
