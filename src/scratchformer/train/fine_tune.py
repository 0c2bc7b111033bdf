"""Starting from a pretrained model (``init_from``): a classifier from a pretrained encoder (real BERT weights, or a
scratchformer run) or from a GPT run (it reads the last real token: ``models/gpt_classifier.py``), a language model
trained further from a Llama, Qwen3 or GPT-2 folder (or a GPT run), or an encoder-decoder trained further from a
translation run. The registry says which task starts from which family (``TaskSpec.bases``).

The classifier takes the base's architecture and weights and a new head for the task's classes; ``dropout`` (and
an encoder's ``pooling``) may be chosen anew, and ``max_len`` (the longest input) up to the encoder's own: its learned
position table is then cut to that many rows, the rows it uses, so the model's config says the length its inputs
are cut to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from scratchformer.checkpoint import checkpoint_family, find_checkpoint, load_checkpoint, read_meta
from scratchformer.errors import ConfigError, DataError
from scratchformer.families import family, parts
from scratchformer.models import build_model
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import spec
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.base import Task

__all__ = ["fine_tuned", "fitted_to_base"]


def fine_tuned(run: Resolved, task: Task, log: Callable[[str], None]) -> nn.Module:
    """The model ``init_from`` starts: a classifier from a scratchformer run's encoder or GPT (else the pretrained
    BERT of that name or folder), or the whole model of a GPT or encoder-decoder run (or a GPT folder) to train
    further. The model settings the run gives (``Resolved.model_settings``) must leave its architecture as it is."""
    cfg, given = run.train, run.model_settings()
    base_dir = find_checkpoint(cfg.init_from)  # type: ignore[arg-type]
    base_family = checkpoint_family(base_dir) if base_dir is not None else None
    if base_family is not None:
        task.spec.check_base(base_family, cfg.init_from)  # type: ignore[arg-type]
    if not task.spec.labels:
        return _whole_model(cfg, base_dir, given, task.model_config.arch, log).train()
    if base_dir is not None:
        base = load_checkpoint(base_dir)
        model = _classifier(base.model, f"{base_dir} (step {base.step} of a task={base.task} run)", given, task, log)
    elif _folder_type(cfg) in ("llama", "qwen3", "gpt2"):  # a Hugging Face GPT folder: a GPT classifier too
        model = _classifier(*_folder_gpt(cfg), given, task, log)
    else:
        model = _from_bert(cfg, given, task, log)
    return _inputs_up_to(model, task.max_len, cfg.init_from).train()  # type: ignore[arg-type]


def _folder_gpt(cfg: TrainConfig) -> tuple[nn.Module, str]:
    """The GPT of the Hugging Face folder ``init_from`` names (in float32, for training), and where it came from."""
    from scratchformer.interop.hf_folder import FolderError, load_folder
    from scratchformer.interop.pretrained import find_pretrained

    folder = find_pretrained(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
    try:
        model, _, architecture = load_folder(folder, torch.float32)
    except FolderError as err:
        raise ConfigError(str(err)) from None
    return model, f"{folder} (a {architecture})"


def _folder_config(cfg: TrainConfig) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face folder ``init_from`` names ({} if none is found there)."""
    import json

    from scratchformer.interop.pretrained import find_pretrained

    try:
        folder = find_pretrained(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
        return dict(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, ConfigError, DataError):
        return {}


def _folder_type(cfg: TrainConfig) -> str:
    """The ``model_type`` of the Hugging Face folder ``init_from`` names ("" if none is found there)."""
    return str(_folder_config(cfg).get("model_type", ""))


def _base_max_len(cfg: TrainConfig) -> int | None:
    """The longest input of the base ``init_from`` names: a run's ``max_len``, a GPT folder's positions."""
    base_dir = find_checkpoint(cfg.init_from)  # type: ignore[arg-type]
    if base_dir is not None:
        return int(read_meta(base_dir)["model"]["max_len"])
    if _folder_type(cfg) not in ("llama", "qwen3", "gpt2"):
        return None  # a BERT folder: its classifier is cut to the task's length (_inputs_up_to)
    hf = _folder_config(cfg)
    return int(hf.get("n_positions") or hf.get("max_position_embeddings") or 0) or None


def fitted_to_base(run: Resolved) -> Resolved:
    """A run from a scratchformer run (or a GPT folder) reads inputs up to its base's ``max_len`` unless the settings
    give a length of their own: the task's default length is cut to the base's (a GPT of 64 tokens classifies texts
    of 64), and an encoder-decoder without one takes its base's (its task cuts sentences to it)."""
    if run.source.get("max_len", "task default") != "task default":
        return run
    have, want = _base_max_len(run.train), run.settings.get("max_len")
    if have is None:
        return run
    max_len = have if want is None else min(want, have)
    if max_len == want:
        return run
    return dataclasses.replace(run, settings={**run.settings, "max_len": max_len},
                               source={**run.source, "max_len": "init_from"})


def _whole_model(cfg: TrainConfig, base_dir: Any, given: dict[str, Any], arch: str,
                 log: Callable[[str], None]) -> nn.Module:
    """A model to train further as it is: a scratchformer run's GPT or encoder-decoder, or a Hugging Face folder's
    GPT (in float32, for training). Its architecture is its own; ``max_len`` here is the length of the training
    windows or sentences (the model keeps its own)."""

    if base_dir is not None:
        base = load_checkpoint(base_dir)
        model, where = base.model.float(), f"{base_dir} (step {base.step} of a task={base.task} run)"
    elif not family(arch).hf_plans:
        raise ConfigError(f"init_from={cfg.init_from} is not a scratchformer run; task={cfg.task} trains further "
                          f"{family(arch).title} run (a task={cfg.task} run's directory)")
    else:
        model, where = _folder_gpt(cfg)
    have: ModelConfig = model.config  # type: ignore[assignment]
    if have.arch != arch:
        raise ConfigError(f"init_from={cfg.init_from} holds a {have.arch} model; task={cfg.task} trains a {arch} model "
                          "further")
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(given.items())
             if k not in ("arch", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={cfg.init_from} fixes the architecture; remove or match {', '.join(clash)}")
    if given.get("max_len", 0) > have.max_len:
        raise ConfigError(f"max_len={given['max_len']} is longer than the max_len={have.max_len} of "
                          f"init_from={cfg.init_from}")
    n = given.get("max_len", have.max_len)
    unit = {"text": f"windows of {n} tokens", "records": f"records (a prompt and its answer) of up to {n} tokens",
            "pairs": f"sentences of up to {n} tokens",
            "preferences": f"records (a prompt and two answers) of up to {n} tokens"}[spec(cfg.task).data.kind]
    log(f"initialised from {where}; trained further on {unit}")
    return model


def _from_bert(cfg: TrainConfig, given: dict[str, Any], task: Task, log: Callable[[str], None]) -> nn.Module:
    from scratchformer.interop import bert_from_pretrained
    from scratchformer.interop.pretrained import find_pretrained

    clash = sorted(set(given) - {"arch", "pooling", "max_len"})
    if clash:
        raise ConfigError(f"init_from={cfg.init_from} fixes the architecture; remove {', '.join(clash)}")
    folder = find_pretrained(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
    model = bert_from_pretrained(folder, n_classes=task.model_config.n_classes, pooling=task.model_config.pooling)
    log(f"initialised from {folder} (the classification head is new)")
    return model


def _classifier(base: nn.Module, where: str, given: dict[str, Any], task: Task,
                log: Callable[[str], None]) -> nn.Module:
    """A classifier with the body of ``base`` (a run's model, or a Hugging Face GPT folder's) under a new head: the
    family that classifies with that body (a GPT's: a GPT classifier, which reads the last real token; a classifier's
    or an encoder's: its own). What only the base has (a language model's ``lm_head``) is left behind; ``dropout``
    and ``pooling`` may be chosen anew (a pooling the family lacks is refused)."""
    have: ModelConfig = base.config  # type: ignore[assignment]
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(given.items())
             if k not in ("arch", "pooling", "dropout", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={where.split(' (')[0]} fixes the architecture; remove or match "
                          f"{', '.join(clash)}")
    target = family(have.arch).classifier or have.arch
    fields = {**have.to_dict(), "arch": target, "n_classes": task.model_config.n_classes,
              "pooling": given.get("pooling", have.pooling), "dropout": given.get("dropout", have.dropout)}
    model = build_model(ModelConfig(**fields))
    new = {name for name, p in model.named_parameters() if id(p) in {id(q) for q in parts(model).head_parameters()}}
    own = model.state_dict()
    body = {k: v for k, v in base.state_dict().items() if k in own and k not in new}
    missing, _ = model.load_state_dict(body, strict=False)
    assert set(missing) == new, (missing, new)
    log(f"initialised from {where}; {family(target).title}: the classification head"
        + (" and the pooler are" if parts(model).pooler is not None else " is") + " new")
    return model


def _inputs_up_to(model: nn.Module, max_len: int, init_from: str) -> nn.Module:
    """The same classifier for inputs of at most ``max_len`` tokens (its learned position table cut)."""
    have: ModelConfig = model.config  # type: ignore[assignment]
    if max_len > have.max_len:
        raise ConfigError(f"max_len={max_len} is longer than the max_len={have.max_len} of init_from={init_from}; "
                          f"set max_len={have.max_len} or less")
    if max_len == have.max_len:
        return model
    state = model.state_dict()
    key = "embed.position_embedding.weight"
    if key in state:
        state[key] = state[key][:max_len]
    shorter = build_model(dataclasses.replace(have, max_len=max_len))
    shorter.load_state_dict(state)
    return shorter
