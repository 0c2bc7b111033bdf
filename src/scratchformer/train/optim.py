"""Optimizer and learning-rate schedules (§5.3).

AdamW with weight decay on the weight matrices only: biases, LayerNorm parameters, embeddings and
position tables are not decayed (decaying them pulls normalisation gains and token vectors towards 0).

The learning rate is a pure function of the step (no scheduler object to save or restore):

- ``inverse_sqrt`` (the paper, eq. 3): linear warm-up, then decay with the inverse square root of the
  step. The paper's ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` peaks at step = warmup; here
  the peak is ``lr`` itself: ``lr * min(step / warmup, sqrt(warmup / step))``.
- ``cosine``: linear warm-up, then a half cosine from ``lr`` down to ``min_lr`` at ``max_steps``.
- ``constant``: linear warm-up, then ``lr``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..config import TrainConfig


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: matrices of Linear layers (decayed) and everything else (not decayed)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            (decay if isinstance(module, nn.Linear) and name == "weight" else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                             eps=cfg.adam_eps)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based)."""
    s = step + 1
    if cfg.warmup_steps and s <= cfg.warmup_steps:
        return cfg.lr * s / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "inverse_sqrt":
        return cfg.lr * math.sqrt(max(cfg.warmup_steps, 1) / s)
    # cosine from lr (end of warm-up) to min_lr (max_steps)
    progress = (s - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(progress, 1.0)))


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
