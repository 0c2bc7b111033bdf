"""A task from (settings, model, data): the runner its registry entry names, on data read by the pipeline."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

from scratchformer.data.pipeline import load_data
from scratchformer.data.roles import DataFiles
from scratchformer.data.task_data import TaskData
from scratchformer.distributed import DistInfo
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import spec
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Task
from scratchformer.tasks.classify import ClassifyTask
from scratchformer.tasks.dpo import DPOTask
from scratchformer.tasks.grpo import GRPOTask
from scratchformer.tasks.image import ImageTask
from scratchformer.tasks.instruct import InstructTask
from scratchformer.tasks.lm import LMTask
from scratchformer.tasks.mlm import MaskedLMTask
from scratchformer.tasks.seq2seq import Seq2SeqTask, TranslationTask
from scratchformer.tokenizers import Tokenizer

__all__ = ["RUNNERS", "build_task", "make_task"]

# The classes that run tasks, by the runner id a task's registry entry declares (``TaskSpec.runner``).
RUNNERS: dict[str, type[Task]] = {cls.__name__: cls for cls in (
    Seq2SeqTask, TranslationTask, LMTask, ClassifyTask, MaskedLMTask, ImageTask, InstructTask, DPOTask, GRPOTask)}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def make_task(cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None] = _stderr) -> Task:
    """The task object of ``cfg.task`` (its registry entry's runner) on data already read (``load_data``), for
    ``model``, the settings' model with the fields the data decides (its vocabulary and classes) filled in."""
    return RUNNERS[spec(cfg.task).runner](cfg, dataclasses.replace(model, **data.model_fields()), data, log)


def build_task(cfg: TrainConfig, model: ModelConfig, files: DataFiles | list[str] | None = None, *,
               tokenizer: Tokenizer | None = None, labels: list[str] | None = None,
               log: Callable[[str], None] = _stderr, dist: DistInfo | None = None, quiet: bool = False,
               template: dict[str, str] | None = None) -> Task:
    """The task for ``cfg.task`` on ``files`` (its data read by ``load_data``, then ``make_task``): for a caller with
    settings and files, a checkpoint's evaluation say. ``tokenizer``: a checkpoint's (else the one of the model a
    fine-tuning run starts from, ``find_source``, or one trained on the data); ``labels``: a trained classifier's
    classes; ``template``: an instruction-tuned model's prompt template (else the base's, where it has one)."""
    base = None
    if cfg.init_from and (tokenizer is None or template is None):
        from scratchformer.checkpoints import find_source

        base = find_source(cfg.init_from, cfg.data_dir)
    if base is not None:
        tokenizer = tokenizer or base.tokenizer()
        template = template or (base.template if not getattr(cfg, "template", None) else None)
    data = load_data(spec(cfg.task), cfg, DataFiles.of(files), tokenizer=tokenizer, labels=labels, training=False,
                     dist=dist, say=log, quiet=quiet, template=template,
                     base=base.path if base is not None else None)
    return make_task(cfg, model, data, log)
