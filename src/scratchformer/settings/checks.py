"""The checks a ``TrainConfig`` makes of its settings when it is made: each refusal one line (``ConfigError``) that
names the setting and what it may be. ``check_settings`` runs them all; LoRA's and ``shard``'s are in
``combinations.py``."""

from __future__ import annotations

import re
from typing import Any

from scratchformer.errors import ConfigError
from scratchformer.registry import spec, task_only_settings
from scratchformer.settings.choices import TASK_CHOICES, TRAIN_CHOICES
from scratchformer.settings.combinations import check_lora, check_shard

TrainConfig = Any  # a settings.config.TrainConfig (which calls these from __post_init__: not imported here)

__all__ = ["check_settings", "parse_bool", "parse_duration", "trainable_blocks"]


def trainable_blocks(value: str) -> int | None:
    """``trainable``: ``"all"`` -> None (every weight), ``"head"`` -> 0 blocks, ``"last:N"`` -> N; else
    ``ConfigError``."""
    if value in ("all", "head"):
        return None if value == "all" else 0
    kind, _, n = str(value).partition(":")
    if kind == "last" and n.isdigit() and int(n) >= 1:
        return int(n)
    raise ConfigError(f"trainable={value!r} is not all, head or last:N (N >= 1: the last N blocks, the final norm "
                      "and the head)")


def check_settings(self: TrainConfig) -> None:
    for name, allowed in TRAIN_CHOICES.items():
        if getattr(self, name) not in allowed:
            raise ConfigError(f"{name}={getattr(self, name)!r} is not one of {', '.join(allowed)}")
    for name in ("batch_size", "grad_accum", "eval_every", "log_every", "bpe_vocab_size"):
        if getattr(self, name) < 1:
            raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
    for name in ("max_steps", "max_tokens", "warmup_steps", "save_every", "patience", "eval_decode", "num_threads",
                 "eval_batches", "train_limit", "eval_limit", "tokenizer_sample", "augment_shift"):
        if getattr(self, name) < 0:
            raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
    if self.max_time is not None:
        self.max_time_s  # noqa: B018 - parses, or raises ConfigError
    if self.max_steps == 0 and self.max_time is None:
        raise ConfigError("max_steps=0 needs max_time (the run's length is then its time budget)")
    if not 0 < self.val_fraction < 1:
        raise ConfigError(f"val_fraction={self.val_fraction} must be between 0 and 1")
    if self.warmup_fraction is not None and not 0 <= self.warmup_fraction < 1:
        raise ConfigError(f"warmup_fraction={self.warmup_fraction} must be in [0, 1)")
    if not 0 < self.decay_fraction <= 1:
        raise ConfigError(f"decay_fraction={self.decay_fraction} must be in (0, 1]")
    if self.decay_shape != "cosine" and self.schedule != "cosine":
        raise ConfigError(f"decay_shape={self.decay_shape} shapes the decay of schedule=cosine, not of "
                          f"schedule={self.schedule}")
    if not self.lr > 0:
        raise ConfigError(f"lr={self.lr} must be > 0")
    if not self.muon_lr > 0:
        raise ConfigError(f"muon_lr={self.muon_lr} must be > 0")
    if not 0 <= self.min_lr <= self.lr:
        raise ConfigError(f"min_lr={self.min_lr} must be between 0 and lr={self.lr}")
    if not 0 < self.mask_prob < 1:
        raise ConfigError(f"mask_prob={self.mask_prob} must be between 0 and 1")
    if not 0 <= self.word_dropout < 1:
        raise ConfigError(f"word_dropout={self.word_dropout} must be in [0, 1)")
    trainable_blocks(self.trainable)
    if self.template is not None and not str(self.template).strip():
        raise ConfigError("template= is empty: give alpaca, chat, auto or a .jinja file (or leave it out)")
    check_lora(self)
    for name, tasks in task_only_settings().items():
        if getattr(self, name) not in (None, 0) and self.task not in tasks:
            raise ConfigError(f"{name} works with task={' or task='.join(tasks)}, not task={self.task}")
    _check_task(self)
    if not 0 <= self.ema_decay < 1:
        raise ConfigError(f"ema_decay={self.ema_decay} must be in [0, 1)")
    if self.average_last < 0:
        raise ConfigError(f"average_last={self.average_last} must be >= 0")
    if self.average_last and self.ema_decay:
        raise ConfigError("ema_decay and average_last are two ways of averaging the weights: set one of them")
    if not 0 <= self.label_smoothing < 1:
        raise ConfigError(f"label_smoothing={self.label_smoothing} must be in [0, 1)")
    if self.batch_size % self.grad_accum:
        raise ConfigError(f"batch_size={self.batch_size} is not divisible by grad_accum={self.grad_accum}")
    check_shard(self)

def _check_task(self: TrainConfig) -> None:
    """What the task's entry asks of the settings: a base to tune, a metric it reports, DPO's own settings."""
    task = spec(self.task)
    if task.needs_base and not self.init_from:
        raise ConfigError(f"task={self.task} tunes a model that already answers: give init_from=RUN_OR_FOLDER (a "
                          f"{' or '.join(task.bases)} run, or a Hugging Face folder)")
    if self.beta is not None and (self.beta < 0 or (self.beta == 0 and not task.zero_beta)):
        raise ConfigError(f"beta={self.beta} must be > 0 (0.1 is usual: larger keeps the model nearer its start)"
                          if not task.zero_beta else f"beta={self.beta} must be >= 0 (0: no KL term)")
    _check_grpo(self)
    for name, allowed in TASK_CHOICES.items():
        if getattr(self, name) not in (None, *allowed):
            raise ConfigError(f"{name}={getattr(self, name)!r} is not one of {', '.join(allowed)}")
    if self.reference == "adapters" and not self.lora_rank:
        raise ConfigError("reference=adapters is the model with its LoRA adapters off, and this run has none: give "
                          "lora_rank=8, say, or reference=precomputed")
    if self.select_by not in task.validation_metrics:
        raise ConfigError(f"select_by={self.select_by!r} is not a validation metric of task={self.task} "
                          f"(choose from {', '.join(task.validation_metrics)})")
    if self.select_by in task.decoded and not self.eval_decode:
        raise ConfigError(f"select_by={self.select_by} needs eval_decode > 0 (sentences decoded per evaluation)")


def _check_grpo(self: TrainConfig) -> None:
    """The settings of learning from rewards (task=grpo), where given."""
    if self.group_size == 1 or self.group_size < 0:
        raise ConfigError(f"group_size={self.group_size} must be at least 2: an answer's advantage is its reward "
                          "against the others' to the same problem")
    for name in ("completion_tokens", "updates", "digits"):
        if getattr(self, name) < 0:
            raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
    for name in ("temperature", "epsilon", "epsilon_high"):
        if getattr(self, name) is not None and not getattr(self, name) > 0:
            raise ConfigError(f"{name}={getattr(self, name)} must be > 0")
    if self.operations is not None:
        from scratchformer.data.arithmetic import check_operations

        check_operations(self.operations)


def parse_bool(name: str, value: Any) -> bool:
    """``True``, ``"true"``, ``"1"``, ``"yes"`` (and their opposites) -> a bool; anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.lower() in ("true", "1", "yes")
    raise ConfigError(f"{name}={value!r} must be true or false")


def parse_duration(name: str, text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"``, ``"1h30m"`` -> seconds."""
    parts = re.fullmatch(r"\s*(?:(\d+(?:\.\d*)?)h)?\s*(?:(\d+(?:\.\d*)?)m)?\s*(?:(\d+(?:\.\d*)?)s?)?\s*", str(text))
    if not str(text).strip() or parts is None or not any(parts.groups()):
        raise ConfigError(f"{name}={text!r} is not a duration (e.g. 90s, 10m, 1.5h, 1h30m)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in parts.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise ConfigError(f"{name}={text!r} must be a positive duration")
    return total
