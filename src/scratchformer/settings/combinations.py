"""Settings that must agree with each other, checked when a ``TrainConfig`` is made: LoRA's, and what
``shard=fsdp`` cannot go with. Each refusal is one line (``ConfigError``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from scratchformer.errors import ConfigError
from scratchformer.registry import spec

TrainConfig = Any  # a settings.config.TrainConfig (which calls these from its checks: not imported here)

__all__ = ["check_lora", "check_shard"]


def check_lora(cfg: TrainConfig) -> None:
    """LoRA's settings: a rank with what it adapts, targets that exist, no second way of choosing what trains."""
    from scratchformer.nn.lora import lora_targets

    given = [f"{f.name}={getattr(cfg, f.name)}" for f in fields(cfg)  # a LoRA setting, not its default
             if f.name in ("lora_alpha", "lora_dropout", "lora_targets") and getattr(cfg, f.name) != f.default]
    if cfg.lora_rank < 0 or (cfg.lora_rank == 0 and given):
        raise ConfigError(f"lora_rank={cfg.lora_rank} turns LoRA off" + (f", so {', '.join(given)} has nothing "
                          "to set" if given else "") + ": give lora_rank=8, say (0 = no LoRA)")
    try:
        if cfg.lora_rank:  # (lora_targets given without a rank is refused above)
            lora_targets(cfg.lora_targets)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if not cfg.lora_alpha > 0 or not 0 <= cfg.lora_dropout < 1:
        raise ConfigError(f"lora_alpha={cfg.lora_alpha} must be > 0 and lora_dropout={cfg.lora_dropout} in "
                          "[0, 1)")
    if cfg.lora_rank and not cfg.init_from:
        raise ConfigError(f"lora_rank={cfg.lora_rank} adapts a pretrained model, and this run has none: give "
                          "init_from=RUN_OR_FOLDER (the model whose weights stay frozen)")
    if cfg.lora_rank and cfg.trainable != "all":
        raise ConfigError(f"lora_rank and trainable={cfg.trainable} both choose what trains: set one of them")


def check_shard(cfg: TrainConfig) -> None:
    """What ``shard=fsdp`` cannot go with, refused in one line (train/fsdp.py says why each)."""
    if not cfg.sharded:
        return
    if "reference" in spec(cfg.task).own_settings:  # (DPO: its reference model)
        raise ConfigError(f"task={cfg.task} computes its reference on the whole model, which shard=fsdp splits: "
                          "train it without shard (DDP), with LoRA if the model is large")
    if cfg.optimizer == "muon":
        raise ConfigError("optimizer=muon orthogonalises whole weight matrices and shard=fsdp splits each across "
                          "the processes: use optimizer=adamw with shard=fsdp, or Muon without shard (DDP)")
    if cfg.precision == "fp16":
        raise ConfigError("precision=fp16 needs a gradient scaler across the shards, which shard=fsdp does not "
                          "have: use precision=bf16 (FSDP2's own mixed precision) or fp32")
    averaging = "ema_decay" if cfg.ema_decay else "average_last" if cfg.average_last else ""
    if averaging:
        raise ConfigError(f"{averaging} keeps a whole copy of the weights, which shard=fsdp splits: leave "
                          f"{averaging} out with shard=fsdp")
