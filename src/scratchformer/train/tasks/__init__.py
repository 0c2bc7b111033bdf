"""Tasks: what the training loop needs to know about each kind of data, one module per family.

- ``seq2seq``: copy / reverse / sort (built-in, infinite fresh data) and translation.
- ``lm``: language modelling on a text (random windows of ``max_len`` tokens, as nanoGPT).
- ``classify``: labelled text.
- ``mlm``: masked-token prediction (BERT's pretraining objective), to pretrain an encoder that a
  classifier is then fine-tuned from (``init_from=RUN_DIR``).
- ``image``: labelled images, for a Vision Transformer (no tokenizer: the model reads pixels).

Where the examples come from (a user's files by role, or a named dataset, and how validation data is
carved out) is the data layer's job (``data.sources``); ``build_task`` asks it, then hands the raw splits
to the task, which tokenizes and batches them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scratchformer.data.errors import DataError
from scratchformer.data.sources import FORMATS, DataFiles, Splits, load_named, load_splits
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import PAD_ID, Tokenizer
from scratchformer.train.config import TrainConfig
from scratchformer.train.tasks.base import Batch, EpochBatches, Task, split_rows, step_generator
from scratchformer.train.tasks.classify import ClassifyTask, drop_tokens
from scratchformer.train.tasks.image import ImageTask
from scratchformer.train.tasks.lm import LMTask
from scratchformer.train.tasks.mlm import MaskedLMTask, TokenPredictor, mask_tokens
from scratchformer.train.tasks.seq2seq import Seq2SeqTask

__all__ = ["Batch", "ClassifyTask", "EpochBatches", "ImageTask", "LMTask", "MaskedLMTask", "Seq2SeqTask", "Task",
           "build_task", "drop_tokens", "load_task_splits", "mask_tokens", "resolve_model_config", "split_rows",
           "step_generator", "TokenPredictor"]

SYNTHETIC = ("copy", "reverse", "sort")


def load_task_splits(cfg: TrainConfig, files: DataFiles, label_names: list[str] | None = None) -> Splits | None:
    """The raw examples of a task: from a named dataset, or from the user's files (None: built-in task)."""
    if cfg.task in SYNTHETIC:
        if files:
            raise DataError(f"the built-in task {cfg.task!r} makes its own data; --data, --val and --test need "
                            "task=lm, translate, classify or mlm")
        return None
    if cfg.dataset is not None:
        return load_named(cfg.task, cfg.dataset, cfg.data_dir, files, val_fraction=cfg.val_fraction, seed=cfg.seed)
    if not files:
        named = {"lm": "tinyshakespeare", "translate": "multi30k", "classify": "sst2", "mlm": "sst2",
                 "image": "digits"}[cfg.task]
        raise DataError(f"task={cfg.task} needs data: --data PATH ({FORMATS[cfg.task]}), or dataset={named}")
    return load_splits(cfg.task, files, val_fraction=cfg.val_fraction, seed=cfg.seed, label_names=label_names)


def build_task(cfg: TrainConfig, model_kw: dict[str, Any], data: DataFiles | list[str] | None = None,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
               tokenizer: Tokenizer | None = None, label_names: list[str] | None = None) -> Task:
    """The task for ``cfg.task`` on ``data``; pass ``tokenizer`` (a checkpoint's) to reuse it instead of training
    one, and ``label_names`` (a classifier's) to keep its classes."""
    splits = load_task_splits(cfg, DataFiles.of(data), label_names)
    if cfg.task == "mlm":
        return MaskedLMTask(cfg, model_kw, splits, log, tokenizer)
    cls = {"seq2seq": Seq2SeqTask, "gpt": LMTask, "encoder": ClassifyTask, "vit": ImageTask}[cfg.arch]
    return cls(cfg, model_kw, splits, log, tokenizer)


def resolve_model_config(task: Task, model_kw: dict[str, Any]) -> ModelConfig:
    """Task defaults, then the user's fields; the vocabulary always comes from the tokenizer (if there is one:
    a ViT reads pixels)."""
    fields = {**task.model_fields(), **model_kw}
    if task.tokenizer is not None:
        fields["vocab_size"] = task.tokenizer.vocab_size
        fields["pad_id"] = PAD_ID
    return ModelConfig(**fields)
