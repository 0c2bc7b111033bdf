"""Optimizer and learning-rate schedules (§5.3).

AdamW with weight decay on the weight matrices only: biases, LayerNorm parameters, embeddings and
position tables are not decayed (decaying them pulls normalisation gains and token vectors towards 0).

The learning rate is a pure function of the step (``Schedule``, a few numbers saved with the run):

- ``inverse_sqrt`` (the paper, eq. 3): linear warm-up, then decay with the inverse square root of the
  step. The paper's ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` peaks at step = warmup; here
  the peak is ``lr`` itself: ``lr * min(step / warmup, sqrt(warmup / step))``.
- ``cosine``: linear warm-up, then ``lr`` until the last ``decay_fraction`` of the run, then a half cosine
  down to ``min_lr`` at ``max_steps`` (``decay_fraction = 1``: the decay starts right after the warm-up).
  ``decay_shape`` changes the decay's shape; with p the share of the decay done (0 to 1), the rate is
  ``min_lr + (lr - min_lr) * f(p)`` with f(p) = (1 + cos(pi p)) / 2 (``cosine``), 1 - p (``linear``) or
  1 - sqrt(p) (``1-sqrt``: it falls fastest at the start of the cool-down and lingers near the end; Hägele et
  al. 2024 found it the best shape for a constant rate's cool-down).
- ``constant``: linear warm-up, then ``lr``.

The warm-up is ``warmup_steps``, or ``warmup_fraction`` of ``max_steps`` (rounded), fixed when the run
starts.

**Extending a run** (``--resume max_steps=N`` with N above the step reached): the steps already taken
keep their rates. ``inverse_sqrt`` and ``constant`` do not depend on the run's length and go on as before.
A cosine schedule whose decay had not begun is recomputed for the new length (the warm-up stays). One
whose decay was under way continues from the rate of the last step taken down to ``min_lr`` at step N along
a half cosine, so the rate never jumps back up. One that had finished (its rate is ``min_lr``, often 0)
starts a new cycle, a warm restart (SGDR, Loshchilov & Hutter 2017): the warm-up again, from 0 to ``lr``,
then a half cosine to ``min_lr`` at step N.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import nn

from scratchformer.errors import ConfigError
from scratchformer.settings.config import TrainConfig
from scratchformer.train.device import has_fused_adamw


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: matrices of Linear layers (decayed) and everything else (not decayed): biases, norms,
    embeddings, and LoRA's adapter matrices A and B (``nn/lora.py``: they live in ``ParameterDict``s, not as a
    Linear's weight). The adapters are left undecayed by choice: they are the update itself, which starts at zero
    and is bounded by its rank, and the decay a run sets is meant for weights trained whole (the LoRA results in
    RESULTS.md are with undecayed adapters; a test holds the choice)."""
    decay, no_decay = [], []
    seen: set[int] = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            (decay if isinstance(module, nn.Linear) and name == "weight" else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device | None = None) -> torch.optim.Optimizer:
    """AdamW (``optimizer=adamw``), fused where torch has a fused AdamW for ``device`` (``train/device.py``); or
    Muon for the layers' weight matrices and AdamW for the rest (``muon``)."""
    if cfg.optimizer == "muon":
        from scratchformer.train.muon import MuonAdamW, muon_groups

        groups = muon_groups(model, lr=cfg.lr, muon_lr=cfg.muon_lr, weight_decay=cfg.weight_decay,
                             betas=(cfg.beta1, cfg.beta2), eps=cfg.adam_eps)
        return MuonAdamW(groups, lr=cfg.lr)
    fused = has_fused_adamw(device) if device is not None else False
    return torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2),
                             eps=cfg.adam_eps, **({"fused": True} if fused else {}))


@dataclass(frozen=True)
class Schedule:
    """The learning rate of every step of a run. ``schedule(step)`` for 0-based optimizer steps."""

    kind: str  # inverse_sqrt | cosine | constant
    lr: float
    min_lr: float
    warmup: int  # steps
    total: int  # max_steps
    decay_fraction: float = 1.0
    # an extended cosine run: from step ``resumed_at`` the rate falls from ``resumed_lr`` to min_lr at total
    # (or, ``restarted``, warms up again and then falls); the steps before follow ``previous``, the schedule
    # the run had then
    resumed_at: int | None = None
    resumed_lr: float | None = None
    restarted: bool = False
    previous: dict[str, Any] | None = None
    shape: str = "cosine"  # the decay's shape: cosine | linear | 1-sqrt (runs saved before this field: cosine)

    @classmethod
    def of(cls, cfg: TrainConfig, total: int | None = None) -> Schedule:
        total = cfg.max_steps if total is None else total
        warmup = cfg.warmup_steps if cfg.warmup_fraction is None else round(cfg.warmup_fraction * total)
        return cls(cfg.schedule, cfg.lr, cfg.min_lr, warmup, total, cfg.decay_fraction, shape=cfg.decay_shape)

    @property
    def decay_start(self) -> int:
        """The first step of the cosine decay (steps before it run at ``lr`` or warm up)."""
        return max(self.warmup, self.total - round(self.decay_fraction * self.total))

    def __call__(self, step: int) -> float:
        s = step + 1  # the (step + 1)-th update
        if self.warmup and s <= self.warmup:
            return self.lr * s / self.warmup  # linear warm-up
        if self.kind == "constant":
            return self.lr
        if self.kind == "inverse_sqrt":
            return self.lr * math.sqrt(max(self.warmup, 1) / s)  # equation 3, peaking at lr
        if self.resumed_at is not None:
            return self._extension(step)
        return self._decay(s, self.decay_start, self.lr)

    def _decay(self, s: int, start: int, peak: float) -> float:
        """``peak`` until update ``start``, then down to ``min_lr`` at the last update along the decay's shape
        (half a cosine by default)."""
        if s <= start:
            return peak
        p = min((s - start) / max(1, self.total - start), 1.0)  # the share of the decay done
        falls = {"cosine": 0.5 * (1 + math.cos(math.pi * p)), "linear": 1 - p, "1-sqrt": 1 - math.sqrt(p)}
        return self.min_lr + (peak - self.min_lr) * falls[self.shape]

    def _extension(self, step: int) -> float:
        start = self.resumed_at or 0
        if step < start and self.previous is not None:
            return Schedule.from_dict(self.previous)(step)  # the steps taken before the run was extended
        if self.restarted:  # a warm restart: the warm-up again, then the decay to the new end
            if self.warmup and step - start + 1 <= self.warmup:
                return self.lr * (step - start + 1) / self.warmup
            return self._decay(step + 1, start + self.warmup, self.lr)
        return self._decay(step + 1, start, self.lr if self.resumed_lr is None else self.resumed_lr)

    def extended(self, done: int, total: int) -> Schedule:
        """This schedule for a run that has taken ``done`` steps and now goes on to ``total`` (module docstring)."""
        if self.kind != "cosine" or total == self.total:
            return replace(self, total=total)
        began = self.resumed_at is not None or done > self.decay_start
        if not began:
            return replace(self, total=total)
        return replace(self, total=total, resumed_at=done, resumed_lr=self(done - 1), restarted=done >= self.total,
                       previous=self.to_dict())

    def resumed(self, done: int, total: int) -> tuple[Schedule, str]:
        """This schedule for a run resumed at step ``done`` to go on to ``total`` (its own, or a new max_steps),
        with a line saying how it changed (empty when it did not). A ``total`` not above ``done`` is refused."""
        if total <= done:
            if total == self.total:
                raise ConfigError(f"the run already finished at step {done:,} (max_steps={self.total:,}); to "
                                  f"train longer: --resume max_steps=N with N above {done:,}")
            raise ConfigError(f"max_steps={total:,} must be above the step the run reached ({done:,}) to extend it")
        if total == self.total:
            return self, ""
        new = self.extended(done, total)
        how = "the schedule is recomputed for the new length"
        if new.restarted:
            how = f"a warm restart: the warm-up again, then the decay to min_lr at step {total:,}"
        elif new.resumed_at is not None:
            how = f"the decay continues from the current rate ({new.resumed_lr:.3g}) to min_lr at step {total:,}"
        return new, f"extending the run from {self.total:,} to {total:,} steps: {how}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schedule:
        return cls(**data)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based) of a run with settings ``cfg``."""
    return Schedule.of(cfg)(step)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every group at ``lr``, times the group's ``lr_scale`` where it has one (Muon's groups: muon_lr / lr)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
