"""The numbers a run computes with: ``precision=fp32`` (the default), or mixed precision, ``bf16`` or ``fp16``.

Mixed precision (Micikevicius et al. 2018, "Mixed Precision Training") keeps the weights, the optimizer
state and the loss in fp32 and runs the forward pass's matrix products in a 16-bit type, chosen op by op by
``torch.autocast`` (the backward pass follows the forward's types). Half the bytes per number: on a GPU
with 16-bit tensor cores, matmuls several times faster and activations half the memory.

- ``bf16`` keeps fp32's 8 exponent bits (and 7 of its 23 mantissa bits): its range is fp32's, so gradients
  neither underflow nor overflow more than in fp32. Autocast alone.
- ``fp16`` has 10 mantissa bits but only 5 exponent bits: gradients below about 6e-8 become 0. The loss is
  multiplied by a scale (2^16 to start) before the backward pass and the gradients divided by it before
  clipping and the AdamW step (``torch.amp.GradScaler``). A step whose gradients overflowed (inf or NaN) is
  skipped and the scale halved; after 2,000 good steps in a row it doubles. The scale and that count are
  part of the run's state (``trainer_state.pt``), so ``--resume`` continues exactly.

Both run on the CPU as well (torch 2.13 autocasts to bf16 and fp16 there, and its GradScaler works there);
the tests train with each on the CPU. On a CPU without 16-bit matrix units they are not faster: they are
there so that the code path a GPU takes is tested where the tests run. A torch that cannot autocast to the
type on the device (it would quietly compute in fp32) is refused in one line when the run starts.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import torch
from torch import Tensor

from scratchformer.errors import ConfigError

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class MixedPrecision:
    """Autocast and, for fp16, loss scaling for one run on one device. With ``fp32`` every method is a no-op
    (``backward`` is ``loss.backward()``, ``step`` is ``optimizer.step()``)."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.precision, self.device = precision, device
        self.dtype = DTYPES.get(precision)
        if self.dtype is not None:
            self._check_autocast()
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def _check_autocast(self) -> None:
        """Refuse a precision this torch cannot autocast to on this device (autocast would warn and run fp32)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with self.autocast():
                    got = (torch.ones(2, 2, device=self.device) @ torch.ones(2, 2, device=self.device)).dtype
            except RuntimeError as err:
                got, why = None, str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            else:
                why = f"its matmuls stay {got}"
        if got != self.dtype:
            raise ConfigError(f"precision={self.precision} does not work on {self.device.type} with torch "
                              f"{torch.__version__} ({why}); use precision=fp32")

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """The forward pass (and loss) of a step runs inside this."""
        return torch.autocast(self.device.type, dtype=self.dtype) if self.dtype else contextlib.nullcontext()

    def backward(self, loss: Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the gradients by the loss scale (before clipping reads their norm)."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """The optimizer step; returns False when fp16 gradients overflowed and the step was skipped."""
        if self.scaler is None:
            optimizer.step()
            return True
        scale = self.scaler.get_scale()
        self.scaler.step(optimizer)  # skipped if the unscaled gradients hold an inf or a NaN
        self.scaler.update()  # halves the scale after a skip; doubles it after growth_interval good steps
        return self.scaler.get_scale() >= scale

    @property
    def tolerates_overflow(self) -> bool:
        """Whether an infinite gradient norm is an expected event (fp16: that step is skipped) rather than
        the sign of a run gone wrong."""
        return self.scaler is not None

    @property
    def loss_scale(self) -> float | None:
        return self.scaler.get_scale() if self.scaler is not None else None

    def state_dict(self) -> dict[str, Any]:
        return {"grad_scaler": self.scaler.state_dict()} if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the scale from a trainer state (a run saved without one keeps the fresh scaler's)."""
        if self.scaler is not None and "grad_scaler" in state:
            self.scaler.load_state_dict(state["grad_scaler"])
