"""Two ways to average weights: the paper's mean of the last checkpoints, and a moving average.

**The mean of the last N checkpoints** (``average_last = N``; the paper's §6.1: "a single model obtained
by averaging the last 5 checkpoints, which were written at 10-minute intervals", 20 for the big model).
Every time the run saves ``last/``, ``CheckpointHistory`` also keeps that step's weights in
``history/step-0000NNN.safetensors``, the last N of them; at the end their element-wise mean

    w_avg = (w_(s_1) + ... + w_(s_N)) / N

is written as the checkpoint ``averaged/``, the one measured on the test split and the one ``evaluate``
and ``generate`` load from the run directory.

**An exponential moving average** (``ema_decay = d``; Polyak averaging; not in the paper). After every
optimizer step t = 1, 2, ..., for every floating-point tensor w of the model's state:

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
import os
import re
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from scratchformer.atomic import follow_umask, writing


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


class CheckpointHistory:
    """The weights of the last ``keep`` saves of a run, one safetensors file per step, and their mean."""

    PATTERN = re.compile(r"step-(\d+)\.safetensors")

    def __init__(self, directory: Path, keep: int) -> None:
        self.directory, self.keep = Path(directory), keep

    def steps(self) -> list[int]:
        """The steps kept, oldest first."""
        if not self.directory.is_dir():
            return []
        found = (self.PATTERN.fullmatch(f.name) for f in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in found if m)

    def path(self, step: int) -> Path:
        return self.directory / f"step-{step:07d}.safetensors"

    def add(self, model: nn.Module, step: int) -> None:
        """Keep the model's weights at ``step`` (written atomically); forget all but the last ``keep``."""
        from safetensors.torch import save_model

        tmp = self.directory / f".step-{step:07d}.tmp-{os.getpid()}"
        needed = sum(t.numel() * t.element_size() for t in model.state_dict().values())
        with writing(f"the weights of step {step:,} in history/", self.directory, needed=needed, leftovers=(tmp,)):
            self.directory.mkdir(parents=True, exist_ok=True)
            save_model(model, str(tmp))
            follow_umask(tmp)
            os.replace(tmp, self.path(step))
        for old in self.steps()[:-self.keep]:
            self.path(old).unlink()

    def forget_after(self, step: int) -> None:
        """A run resumed from ``step``: weights saved later belong to a path it will not retrace."""
        for later in (s for s in self.steps() if s > step):
            self.path(later).unlink()

    def load_mean(self, model: nn.Module) -> list[int]:
        """Put the element-wise mean of the kept weights into ``model`` (tied weights are stored once and
        fill all their names); returns the steps averaged."""
        from safetensors.torch import load_file

        steps = self.steps()[-self.keep:]
        device = next(model.parameters()).device
        total: dict[str, torch.Tensor] = {}
        for step in steps:
            for name, w in load_file(str(self.path(step)), device=str(device)).items():
                w = w.double() if w.is_floating_point() else w  # a float64 sum: the mean is exact to float32
                total[name] = total[name] + w if name in total and w.is_floating_point() else w
        live = model.state_dict()
        model.load_state_dict({name: (w / len(steps)).to(live[name].dtype) if w.is_floating_point() else w
                               for name, w in total.items()}, strict=False)
        return steps
