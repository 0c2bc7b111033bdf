"""Tasks: what the training loop needs to know about each kind of data, one module per family.

- ``seq2seq``: copy / reverse / sort (built-in, infinite fresh data) and translation.
- ``lm``: language modelling on a text (random windows of ``max_len`` tokens, as nanoGPT).
- ``classify``: labelled text.
- ``mlm``: masked-token prediction (BERT's pretraining objective), to pretrain an encoder that a
  classifier is then fine-tuned from (``init_from=RUN_DIR``).
- ``image``: labelled images, for a Vision Transformer (no tokenizer: the model reads pixels).

Where the examples come from (a user's files by role, or a named dataset, and how validation data is
carved out) is the data layer's plan (``data.sources``); ``build_task`` asks for it, has every source
prepared into a corpus on disk or reuses the one prepared before (``train/corpora.py``), and hands the
task its tokenizer and a view of each split. Images are small and are not prepared: ``task=image`` gets
its splits in memory (``data.image_splits``) and decodes them itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from scratchformer.data.errors import DataError
from scratchformer.data.image_splits import image_splits
from scratchformer.data.sources import FORMATS, DataFiles, DataPlan, plan_files, plan_named
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import PAD_ID, Tokenizer
from scratchformer.train.config import TrainConfig
from scratchformer.train.corpora import load_task_data
from scratchformer.train.distributed import DistInfo
from scratchformer.train.tasks.base import Batch, EpochBatches, Task, split_rows, step_generator
from scratchformer.train.tasks.classify import ClassifyTask, drop_tokens
from scratchformer.train.tasks.image import ImageTask
from scratchformer.train.tasks.lm import LMTask
from scratchformer.train.tasks.mlm import MaskedLMTask, TokenPredictor, mask_tokens
from scratchformer.train.tasks.seq2seq import Seq2SeqTask

__all__ = ["Batch", "ClassifyTask", "EpochBatches", "ImageTask", "LMTask", "MaskedLMTask", "Seq2SeqTask", "Task",
           "build_task", "drop_tokens", "mask_tokens", "resolve_model_config", "split_rows", "step_generator",
           "starting_tokenizer", "task_plan", "TokenPredictor"]

SYNTHETIC = ("copy", "reverse", "sort")


def task_plan(cfg: TrainConfig, files: DataFiles, label_names: list[str] | None = None) -> DataPlan | None:
    """Which files a task reads: a named dataset's, or the user's (None: a built-in task makes its own).
    ``task=image`` has no plan (its images are read into memory, ``data.image_splits``)."""
    if cfg.task == "image":
        raise DataError("task=image reads its images into memory at the start of a run; nothing is prepared")
    if cfg.task in SYNTHETIC:
        if files:
            raise DataError(f"the built-in task {cfg.task!r} makes its own data; --data, --val and --test need "
                            "task=lm, translate, classify, mlm or image")
        return None
    if cfg.dataset is not None:
        return plan_named(cfg.task, cfg.dataset, cfg.data_dir, files, val_fraction=cfg.val_fraction, seed=cfg.seed)
    if not files:
        named = {"lm": "tinyshakespeare", "translate": "multi30k", "classify": "sst2", "mlm": "sst2"}[cfg.task]
        raise DataError(f"task={cfg.task} needs data: --data PATH ({FORMATS[cfg.task]}), or dataset={named}")
    return plan_files(cfg.task, files, val_fraction=cfg.val_fraction, seed=cfg.seed, label_names=label_names)


def build_task(cfg: TrainConfig, model_kw: dict[str, Any], data: DataFiles | list[str] | None = None,
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
               tokenizer: Tokenizer | None = None, label_names: list[str] | None = None, *,
               info: DistInfo | None = None, quiet: bool = False) -> Task:
    """The task for ``cfg.task`` on ``data``; pass ``tokenizer`` (a checkpoint's) to reuse it instead of training
    one, and ``label_names`` (a classifier's) to keep its classes. ``info``: the distributed run this process
    is part of (rank 0 prepares the corpora, the others wait for it)."""
    if cfg.task == "image":  # images are small: read into memory, never prepared into a corpus
        return ImageTask(cfg, model_kw, image_splits(cfg.dataset, cfg.data_dir, DataFiles.of(data),
                                                     val_fraction=cfg.val_fraction, seed=cfg.seed,
                                                     label_names=label_names), log)
    plan = task_plan(cfg, DataFiles.of(data), label_names)
    if plan is None:
        return Seq2SeqTask(cfg, model_kw, None, log, tokenizer)
    task_data = load_task_data(cfg, plan, tokenizer or starting_tokenizer(cfg), info=info, say=log, quiet=quiet)
    if cfg.task == "mlm":
        return MaskedLMTask(cfg, model_kw, task_data, log)
    cls = {"seq2seq": Seq2SeqTask, "gpt": LMTask, "encoder": ClassifyTask}[cfg.arch]
    return cls(cfg, model_kw, task_data, log)


def starting_tokenizer(cfg: TrainConfig) -> Tokenizer | None:
    """The tokenizer a run starts from when it is not trained on the data: fine-tuning (``init_from``) uses the
    pretrained model's or the scratchformer run's own. None: train one."""
    if cfg.task != "classify" or not cfg.init_from:
        return None
    from scratchformer.checkpoint import find_checkpoint, load_checkpoint
    from scratchformer.interop.pretrained import find_pretrained
    from scratchformer.tokenizers import PretrainedTokenizer

    base = find_checkpoint(cfg.init_from)
    if base is not None:
        return load_checkpoint(base).tokenizer
    return PretrainedTokenizer.from_file(find_pretrained(cfg.init_from, cfg.data_dir) / "tokenizer.json")


def resolve_model_config(task: Task, model_kw: dict[str, Any]) -> ModelConfig:
    """Task defaults, then the user's fields; the vocabulary always comes from the tokenizer (if there is one:
    a ViT reads pixels)."""
    fields = {**task.model_fields(), **model_kw}
    if task.tokenizer is not None:
        fields["vocab_size"] = task.tokenizer.vocab_size
        fields["pad_id"] = PAD_ID
    return ModelConfig(**fields)
