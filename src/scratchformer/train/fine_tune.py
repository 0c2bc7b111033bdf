"""Starting a classifier from a pretrained encoder (``init_from``): real BERT weights, or a scratchformer run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from scratchformer.checkpoint import Checkpoint
from scratchformer.models import EncoderClassifier
from scratchformer.nn.config import ConfigError, ModelConfig
from scratchformer.train.config import TrainConfig
from scratchformer.train.tasks import Task


def pretrained_classifier(cfg: TrainConfig, model_kw: dict[str, Any], task: Task,
                          log: Callable[[str], None]) -> nn.Module:
    """A classifier whose encoder is the pretrained BERT ``cfg.init_from`` (its head freshly initialised)."""
    from scratchformer.interop import bert_from_pretrained
    from scratchformer.interop.pretrained import find_pretrained

    own = {"arch", "pooling", "max_len"}  # max_len here only limits the inputs (see ClassifyTask)
    clash = sorted(set(model_kw) - own)
    if clash:
        raise ConfigError(f"init_from={cfg.init_from} fixes the architecture; remove {', '.join(clash)}")
    folder = find_pretrained(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
    n_classes = task.model_fields().get("n_classes", 2)
    model = bert_from_pretrained(folder, n_classes=n_classes, pooling=model_kw.get("pooling", "mean"))
    log(f"initialised from {folder} (the classification head is new)")
    return model.train()


def classifier_from_run(base: Checkpoint, run: str, model_kw: dict[str, Any], task: Task,
                        log: Callable[[str], None]) -> nn.Module:
    """A classifier that starts from the encoder of a scratchformer checkpoint (a ``task=mlm`` run, say):
    the same architecture and weights, a new head for this task's classes. ``pooling`` and ``dropout``
    may be chosen anew; other model settings, if given, must agree with the checkpoint's."""
    have = base.model_config
    if have.arch != "encoder":
        raise ConfigError(f"init_from={run} holds a {have.arch} model; a classifier starts only from an encoder "
                          "(a task=mlm or task=classify run)")
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(model_kw.items())
             if k not in ("arch", "pooling", "dropout", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={run} fixes the architecture; remove or match {', '.join(clash)}")
    max_len = getattr(task, "max_len", have.max_len)
    if max_len > have.max_len:
        raise ConfigError(f"max_len={max_len} is longer than the max_len={have.max_len} of init_from={run}; "
                          f"set max_len={have.max_len} or less")
    fields = {**have.to_dict(), "n_classes": task.model_fields().get("n_classes", 2),
              "pooling": model_kw.get("pooling", have.pooling), "dropout": model_kw.get("dropout", have.dropout)}
    model = EncoderClassifier(ModelConfig(**fields))
    encoder = {k: v for k, v in base.model.state_dict().items() if not k.startswith(("head.", "pooler."))}
    missing, unexpected = model.load_state_dict(encoder, strict=False)
    assert not unexpected and all(k.startswith(("head.", "pooler.")) for k in missing), (missing, unexpected)
    log(f"initialised from {run} (step {base.step} of a task={base.task} run; the classification "
        "head" + (" and the pooler are" if model.pooler is not None else " is") + " new)")
    return model.train()
