"""LoRA on a fine-tuning run (``lora_rank > 0``): the ``init_from`` model frozen, adapters added to the projections
``lora_targets`` names (``nn/lora.py``), a classifier's head left to train, and the base named and fingerprinted
on the model, so that its checkpoints hold the adapters alone (``checkpoints/adapters.py``).

The optimizer then holds only the adapters (and the head): ``optim.param_groups`` takes what trains.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from scratchformer.checkpoints import ModelSource
from scratchformer.checkpoints.adapters import BaseRecord, LoRARecord, fingerprint, header_digest
from scratchformer.errors import ConfigError
from scratchformer.families import family, parts
from scratchformer.nn.lora import add_lora, lora_targets
from scratchformer.settings.config import TrainConfig

__all__ = ["apply_lora"]


def apply_lora(model: nn.Module, cfg: TrainConfig, base: ModelSource, log: Callable[[str], None]) -> nn.Module:
    """Freeze ``model``, add the adapters, leave a classifier's head (and pooler) trainable; returns ``model``."""
    targets = lora_targets(cfg.lora_targets)
    head = {id(p) for p in parts(model).head_parameters()} if family(model.config.arch).classifies else set()
    trained = [n for n, p in model.named_parameters() if id(p) in head]  # a new head (and pooler) for the classes
    model.requires_grad_(False)
    try:
        count = add_lora(model, cfg.lora_rank, cfg.lora_alpha, targets, cfg.lora_dropout)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for name, p in model.named_parameters():
        if name in trained:
            p.requires_grad_(True)
    folder = base.path.resolve()  # hashed in full here, once: later loads check its headers (adapters.check_base)
    model.lora = LoRARecord(cfg.lora_rank, cfg.lora_alpha, cfg.lora_dropout, tuple(targets), tuple(trained),
                            BaseRecord(str(cfg.init_from), str(folder), fingerprint(folder), header_digest(folder)))
    train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    log(f"LoRA rank {cfg.lora_rank} on {', '.join(targets)}: {count} adapters; {train:,} of {total:,} weights train "
        f"({100 * train / total:.2f} %)" + (" with the head" if trained else "") + f", the base {folder} stays frozen")
    return model
