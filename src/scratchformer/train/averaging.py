"""An exponential moving average of the weights (Polyak averaging), kept beside the trained weights.

After every optimizer step t = 1, 2, ..., for every floating-point tensor w of the model's state:

    m_t = d * m_{t-1} + (1 - d) * w_t,   m_0 = 0          (d = ema_decay)
    average_t = m_t / (1 - d^t)                          (bias correction, as Adam's moments)

so the average weighs the weights of step s by d^(t - s) from the first step on, normalised: it spans
about ``1 / (1 - d)`` steps (0.998: the last 500 or so) and never holds the random initial weights. The
averaged weights are the ones evaluated and saved (what ``evaluate`` and ``generate`` load); the trained
weights go on being trained, and a checkpoint keeps them and ``m`` in its trainer state so that
``--resume`` continues exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn


class WeightAverage:
    """``update()`` after each optimizer step; ``swapped_in(model)`` to evaluate or save the average."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        # the model's tensors (views that follow the optimizer's in-place updates), looked up once, not per step
        self.live = {k: v for k, v in model.state_dict().items() if v.is_floating_point()}
        self.moment = {k: torch.zeros_like(v) for k, v in self.live.items()}

    def state(self) -> dict[str, object]:
        return {"updates": self.updates, "moment": self.moment}

    def load_state(self, state: dict[str, object]) -> None:
        self.updates = int(state["updates"])  # type: ignore[call-overload]
        moment = state["moment"]  # saved on the CPU: back onto the model's device
        self.moment = {k: v.to(self.live[k].device, copy=True) for k, v in moment.items()}  # type: ignore[attr-defined]

    @torch.no_grad()
    def update(self) -> None:
        """One optimizer step of the model given at construction has been taken."""
        for name, m in self.moment.items():
            m.lerp_(self.live[name], 1 - self.decay)
        self.updates += 1

    @property
    def average(self) -> dict[str, torch.Tensor]:
        scale = 1 - self.decay ** max(self.updates, 1)
        return {k: m / scale for k, m in self.moment.items()}

    @contextlib.contextmanager
    def swapped_in(self, model: nn.Module) -> Iterator[dict[str, torch.Tensor]]:
        """Inside the block the model holds the averaged weights; yields a copy of the trained ones, which
        are put back afterwards."""
        trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if self.updates:
            model.load_state_dict({**trained, **self.average})
        try:
            yield trained
        finally:
            model.load_state_dict(trained)
