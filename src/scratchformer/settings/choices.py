"""The choices of the training settings: each choice field's allowed values, written once, as its ``Literal`` type
(``TRAIN_CHOICES``: those every run has; ``TASK_CHOICES``: those of one task's settings, None until given). The
task names are the task registry's."""

from __future__ import annotations

from typing import Literal, get_args

from scratchformer.registry import TASKS

__all__ = ["TASK_CHOICES", "TRAIN_CHOICES"]

TokenizerKind = Literal["char", "bpe"]
ScheduleKind = Literal["inverse_sqrt", "cosine", "constant"]
DecayShape = Literal["cosine", "linear", "1-sqrt"]
Truncate = Literal["warn", "error"]
OptimizerKind = Literal["adamw", "muon"]
Device = Literal["auto", "cpu", "cuda", "mps"]
Precision = Literal["fp32", "bf16", "fp16"]
ReferenceKind = Literal["precomputed", "adapters"]
Shard = Literal["none", "fsdp"]
LossType = Literal["grpo", "dr_grpo", "dapo"]
ScaleRewards = Literal["group", "batch", "none"]

TRAIN_CHOICES: dict[str, tuple[str, ...]] = {"task": tuple(TASKS), "tokenizer": get_args(TokenizerKind),
                                             "schedule": get_args(ScheduleKind),
                                             "decay_shape": get_args(DecayShape), "truncate": get_args(Truncate),
                                             "device": get_args(Device), "precision": get_args(Precision),
                                             "optimizer": get_args(OptimizerKind),
                                             "shard": get_args(Shard)}
# choices of one task's settings (None until given, or the task's default)
TASK_CHOICES: dict[str, tuple[str, ...]] = {"reference": get_args(ReferenceKind), "loss_type": get_args(LossType),
                                            "scale_rewards": get_args(ScaleRewards)}
