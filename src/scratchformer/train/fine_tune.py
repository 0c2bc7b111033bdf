"""Starting from a pretrained model (``init_from``): a classifier from a pretrained encoder (real BERT weights, or a
scratchformer run) or from a GPT run (it reads the last real token: ``models/gpt_classifier.py``), a language model
trained further from a Llama, Qwen3 or GPT-2 folder (or a GPT run), or an encoder-decoder trained further from a
translation run. The registry says which task starts from which family (``TaskSpec.bases``).

``init_from`` is worked out once, before the run reads any data (``starting_point``: ``checkpoints.find_source``,
then what the task and the settings must agree with); every later step reads that value (``ModelSource``).

The classifier takes the base's architecture and weights and a new head for the task's classes; ``dropout`` (and
an encoder's ``pooling``) may be chosen anew, and ``max_len`` (the longest input) up to the base's own: its learned
position table is then cut to that many rows, the rows it uses, so the model's config says the length its inputs
are cut to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from scratchformer.checkpoints import ModelSource, find_source
from scratchformer.errors import ConfigError
from scratchformer.families import family, parts
from scratchformer.models import build_model, cut_positions
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import check_base, spec
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.base import Task

__all__ = ["fine_tuned", "fitted_to_base", "start_config", "starting_point"]

# The settings a base brings with it, which a run from it may not set for itself
_BROUGHT = ("tokenizer", "bpe_vocab_size", "lowercase", "tokenizer_sample")


def starting_point(run: Resolved) -> ModelSource:
    """What ``init_from`` names, found once (``find_source``), and checked before anything is read: a family the
    task starts from (the registry's pairs), a tokenizer where the task reads text, and no setting of its own for
    what the base brings (its tokenizer), each refused in one line."""
    cfg = run.train
    base = find_source(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
    task = spec(cfg.task)
    check_base(task, base.family, cfg.init_from)  # type: ignore[arg-type]
    own = [f"{k}={run.settings[k]}" for k in _BROUGHT
           if run.source.get(k, "task default") not in ("task default", "the run")]
    if own:
        raise ConfigError(f"{own[0]} does not apply: init_from={cfg.init_from} brings its own tokenizer; remove it")
    if task.prompted:  # its window must hold the template; a character model gains the template's characters
        from scratchformer.train.prompt_room import prompt_ready

        base = prompt_ready(run, base)
    return base


def fine_tuned(run: Resolved, task: Task, base: ModelSource, log: Callable[[str], None]) -> nn.Module:
    """The model ``init_from`` starts: a classifier with a base's body (a run's encoder or GPT, a GPT folder's, a
    pretrained BERT's), or the whole model of a GPT or encoder-decoder run (or a GPT folder) to train further. The
    model settings the run gives (``Resolved.model_settings``) must leave its architecture as it is."""
    given = run.model_settings()
    if not task.spec.labels:
        return _whole_model(run, task, base, given, log).train()
    if base.kind == "folder" and family(base.family).classifies:  # a pretrained encoder: its head is new
        model = _from_encoder_folder(base, given, task, log)
    else:
        model = _classifier(base.load(torch.float32), base.described, given, task, log)
    return _inputs_up_to(model, task.max_len, base).train()


def fitted_to_base(run: Resolved, base: ModelSource) -> Resolved:
    """A run from a base reads inputs up to the base's ``max_len`` unless the settings give a length of their own: the
    task's default length is cut to the base's (a GPT of 64 tokens classifies texts of 64), and an encoder-decoder
    without one takes its base's (its task cuts sentences to it)."""
    if run.source.get("max_len", "task default") != "task default":
        return run
    have, want = base.config.max_len, run.settings.get("max_len")
    max_len = have if want is None else min(want, have)
    if max_len == want:
        return run
    return Resolved({**run.settings, "max_len": max_len}, {**run.source, "max_len": "init_from"}, run.data)


def _whole_model(run: Resolved, task: Task, base: ModelSource, given: dict[str, Any],
                 log: Callable[[str], None]) -> nn.Module:
    """A model to train further as it is: a scratchformer run's GPT or encoder-decoder, or a Hugging Face folder's
    GPT (in float32, for training). Its architecture is its own; ``max_len`` here is the length of the training
    windows or sentences (the model keeps its own)."""
    have = base.config
    _whole_model_checks(run, have, given)
    n = given.get("max_len", have.max_len)
    unit = {"text": f"windows of {n} tokens", "records": f"records (a prompt and its answer) of up to {n} tokens",
            "pairs": f"sentences of up to {n} tokens",
            "preferences": f"records (a prompt and two answers) of up to {n} tokens",
            "problems": f"problems (a prompt of up to {n} tokens and sampled answers)"}[task.spec.data.kind]
    model = base.load(torch.float32)
    log(f"initialised from {base.described}; trained further on {unit}")
    if base.added_chars:
        from scratchformer.errors import listed

        log(f"its vocabulary gains {listed(list(base.added_chars), most=100)}: the prompt template writes them and the "
            "model never saw them (each a new embedding row, started at the mean of the others)")
    return model


def _whole_model_checks(run: Resolved, have: ModelConfig, given: dict[str, Any]) -> None:
    """A model trained further keeps its architecture; its windows are no longer than its ``max_len``."""
    init_from = run.train.init_from
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(given.items())
             if k not in ("arch", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={init_from} fixes the architecture; remove or match {', '.join(clash)}")
    if given.get("max_len", 0) > have.max_len:
        raise ConfigError(f"max_len={given['max_len']} is longer than the max_len={have.max_len} of "
                          f"init_from={init_from}")


def _from_encoder_folder(base: ModelSource, given: dict[str, Any], task: Task,
                         log: Callable[[str], None]) -> nn.Module:
    """A pretrained encoder's folder (BERT's weights) under a new head for the task's classes."""
    clash = sorted(set(given) - {"arch", "pooling", "max_len"})
    if clash:
        raise ConfigError(f"init_from={base.given} fixes the architecture; remove {', '.join(clash)}")
    model = base.load(torch.float32, classes=(task.model_config.n_classes, task.model_config.pooling))
    log(f"initialised from {base.path} (the classification head is new)")
    return model


def _classifier(base: nn.Module, where: str, given: dict[str, Any], task: Task,
                log: Callable[[str], None]) -> nn.Module:
    """A classifier with the body of ``base`` (a run's model, or a Hugging Face GPT folder's) under a new head: the
    family that classifies with that body (a GPT's: a GPT classifier, which reads the last real token; a classifier's
    or an encoder's: its own). What only the base has (a language model's ``lm_head``) is left behind; ``dropout``
    and ``pooling`` may be chosen anew (a pooling the family lacks is refused)."""
    config = _classifier_config(base.config, where, given, task)  # type: ignore[arg-type]
    model = build_model(config)
    target = model.config.arch
    new = {name for name, p in model.named_parameters() if id(p) in {id(q) for q in parts(model).head_parameters()}}
    own = model.state_dict()
    body = {k: v for k, v in base.state_dict().items() if k in own and k not in new}
    missing, _ = model.load_state_dict(body, strict=False)
    assert set(missing) == new, (missing, new)
    log(f"initialised from {where}; {family(target).title}: the classification head"
        + (" and the pooler are" if parts(model).pooler is not None else " is") + " new")
    return model


def _classifier_config(have: ModelConfig, where: str, given: dict[str, Any], task: Task) -> ModelConfig:
    """The config of a classifier with the body of a model of config ``have`` (``_classifier``)."""
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(given.items())
             if k not in ("arch", "pooling", "dropout", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={where.split(' (')[0]} fixes the architecture; remove or match "
                          f"{', '.join(clash)}")
    target = family(have.arch).classifier or have.arch
    return ModelConfig(**{**have.to_dict(), "arch": target, "n_classes": task.model_config.n_classes,
                          "pooling": given.get("pooling", have.pooling), "dropout": given.get("dropout", have.dropout)})


def start_config(run: Resolved, task: Task, base: ModelSource) -> ModelConfig | None:
    """The config of the model ``fine_tuned`` starts, with its checks, without building it: for a sharded run that
    builds it on the meta device (``fsdp_init.py``). None for a pretrained encoder's folder (BERT: read whole)."""
    given = run.model_settings()
    if not task.spec.labels:
        _whole_model_checks(run, base.config, given)
        return base.start_config
    if base.kind == "folder" and family(base.family).classifies:
        return None
    config = _classifier_config(base.config, base.described, given, task)
    if task.max_len > config.max_len:
        raise ConfigError(f"max_len={task.max_len} is longer than the max_len={config.max_len} of "
                          f"init_from={base.given}; set max_len={config.max_len} or less")
    return dataclasses.replace(config, max_len=task.max_len)


def _inputs_up_to(model: nn.Module, max_len: int, base: ModelSource) -> nn.Module:
    """The same classifier for inputs of at most ``max_len`` tokens (its learned position table cut)."""
    have: ModelConfig = model.config  # type: ignore[assignment]
    if max_len > have.max_len:
        raise ConfigError(f"max_len={max_len} is longer than the max_len={have.max_len} of init_from={base.given}; "
                          f"set max_len={have.max_len} or less")
    if max_len == have.max_len:
        return model
    shorter = build_model(dataclasses.replace(have, max_len=max_len))
    shorter.load_state_dict(cut_positions(model.state_dict(), max_len))
    return shorter
