"""What a run trains: the task (its data and tokenizer) and the model, fresh or from a pretrained one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from scratchformer.checkpoint import find_checkpoint, load_checkpoint
from scratchformer.data.sources import DataFiles
from scratchformer.models import build_model
from scratchformer.nn.config import ConfigError
from scratchformer.tokenizers import Tokenizer
from scratchformer.train.config import TrainConfig
from scratchformer.train.distributed import DistInfo
from scratchformer.train.fine_tune import classifier_from_run, pretrained_classifier
from scratchformer.train.tasks import Task, build_task, resolve_model_config


def task_and_model(cfg: TrainConfig, model_kw: dict[str, Any], data: DataFiles, tokenizer: Tokenizer | None,
                   log: Callable[[str], None], info: DistInfo | None = None,
                   quiet: bool = False) -> tuple[Task, nn.Module]:
    """The task on ``data`` and a new model for it. ``tokenizer``: a resumed run's own (else one is trained,
    or taken from ``init_from``). With ``init_from``, the model starts from that scratchformer run's encoder or
    from pretrained BERT weights (``fine_tune.py``). ``info``: the distributed run (rank 0 prepares the data)."""
    base_dir = find_checkpoint(cfg.init_from) if cfg.init_from else None  # a scratchformer run to start from?
    base = load_checkpoint(base_dir) if base_dir is not None else None
    if base is not None:  # its tokenizer, and by default inputs as long as its model takes
        model_kw = {"max_len": base.model_config.max_len, **model_kw}
        tokenizer = tokenizer or base.tokenizer
    task = build_task(cfg, model_kw, data, log, tokenizer=tokenizer, info=info, quiet=quiet)
    if not task.has_split("train"):
        raise ConfigError("no training data: --data names the training file (--val and --test alone cannot train)")
    if base is not None:
        return task, classifier_from_run(base, str(base_dir), model_kw, task, log)
    if cfg.init_from:
        return task, pretrained_classifier(cfg, model_kw, task, log)
    return task, build_model(resolve_model_config(task, model_kw))
