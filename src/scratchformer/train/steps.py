"""The pieces of one training step and one evaluation, used by the loop (``trainer.Trainer``)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch
from torch import nn

from scratchformer.registry import lower_is_better
from scratchformer.tasks.base import Batch, Task
from scratchformer.train.device import to_device
from scratchformer.train.precision import MixedPrecision


def seed_step(seed: int, step: int, rank: int) -> None:
    """Seed torch's generator from (seed, step, rank): a step's dropout masks are the same whenever it runs."""
    torch.manual_seed((seed * 1_000_003 + step) * 131 + rank)


def accumulate_gradients(task: Task, model: nn.Module, shards: list[Batch], count: int, label_smoothing: float,
                         device: torch.device, world_size: int = 1, amp: MixedPrecision | None = None) -> float:
    """Backward through this rank's micro-batches; returns their summed (not averaged) loss.

    Each micro-batch's summed loss is divided by ``count``, the number of loss terms in the *global*
    batch, so micro-batches of different sizes (or token counts) add up to exactly the full-batch
    gradient. Across processes (DDP, or FSDP2's shards), gradients are only averaged on the last micro-batch
    (``sync_paused``). ``amp``: the run's precision (autocast, and fp16's loss scaling; ``precision.py``); None =
    fp32.
    """
    amp = amp or MixedPrecision("fp32", device)
    total = 0.0
    for i, shard in enumerate(shards):
        if world_size == 1 and len(next(iter(shard.values()))) == 0:
            continue  # fewer rows than micro-batches: nothing to add
        shard = to_device(shard, device)
        last = i == len(shards) - 1
        with sync_paused(model) if world_size > 1 and not last else contextlib.nullcontext():
            with amp.autocast():
                loss_sum = task.loss_sum(model, shard, label_smoothing)
            # DDP (and FSDP2) average gradients over ranks, hence the factor world_size. A batch with no loss term
            # (every answer cut off by max_len) adds a zero gradient: the sum is 0, whatever it is divided by.
            amp.backward(loss_sum * (world_size / max(count, 1)))
        total += loss_sum.item()
    return total


@contextlib.contextmanager
def sync_paused(model: nn.Module) -> Iterator[None]:
    """Inside, backward passes accumulate gradients without averaging them across processes: DDP's ``no_sync``, or
    FSDP2's ``set_requires_gradient_sync(False)``."""
    if not hasattr(model, "set_requires_gradient_sync"):
        with model.no_sync():  # type: ignore[operator]
            yield
        return
    model.set_requires_gradient_sync(False)  # type: ignore[operator]
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)  # type: ignore[operator]


def as_float(value: torch.Tensor) -> float:
    """A scalar tensor's value; a sharded one (a ``DTensor``: the gradient norm of a sharded model) whole."""
    full = getattr(value, "full_tensor", None)
    return float(full() if full is not None else value)


def evaluate(task: Task, model: nn.Module, split: str) -> dict[str, float]:
    """The task's metrics on ``split``, the model in eval mode meanwhile."""
    from scratchformer.models import eval_mode

    with eval_mode(model):
        return task.evaluate(model, split)


def score(metrics: dict[str, float], select_by: str) -> float:
    """The validation metric ``select_by`` as a number where lower is better (accuracy 0.8 -> -0.8)."""
    return metrics[select_by] if lower_is_better(select_by) else -metrics[select_by]


class Window:
    """Losses and tokens since the last log line."""

    def __init__(self) -> None:
        self.loss, self.steps, self.tokens, self.start = 0.0, 0, 0, time.perf_counter()

    def add(self, loss: float, tokens: int) -> None:
        self.loss, self.steps, self.tokens = self.loss + loss, self.steps + 1, self.tokens + tokens

    def flush(self) -> tuple[float, float]:
        mean = self.loss / max(self.steps, 1)
        tps = self.tokens / max(time.perf_counter() - self.start, 1e-9)
        self.__init__()  # type: ignore[misc]
        return mean, tps
