"""A time budget (``max_time``) as a number of steps, so that the learning-rate schedule fits it.

A few steps and one evaluation are timed (then undone by the caller, ``Trainer.estimate_steps``); the
budget, less what has run already and the final evaluation and test, divided by the time a step and its
share of the evaluations take, is the run's length. The first step is left out of the median (it pays one-off costs).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scratchformer.distributed import DistInfo, broadcast_object
from scratchformer.settings.config import TrainConfig


def steps_within(budget_s: float, spent_s: float, train_step: Callable[[int], object], evaluate: Callable[[], object],
                 eval_every: int) -> tuple[int, float, float, int]:
    """``(steps, seconds a step, seconds an evaluation, steps timed)``: how many steps fit in the budget."""
    times, step = [], 0
    while step < 3 or (sum(times) < min(2.0, 0.02 * budget_s) and step < 50):
        t = time.perf_counter()
        train_step(step)
        times.append(time.perf_counter() - t)
        step += 1
    t = time.perf_counter()
    evaluate()
    eval_s = time.perf_counter() - t
    per_step = sorted(times[1:])[len(times[1:]) // 2]
    spendable = budget_s - spent_s - sum(times) - eval_s - 2 * eval_s  # the final evaluation and the test
    return max(1, int(spendable / (per_step + eval_s / eval_every))), per_step, eval_s, len(times)


def estimate_steps(cfg: TrainConfig, spent_s: float, train_step: Callable[[int], object],
                   evaluate: Callable[[], object], info: DistInfo, log: Callable[[str], None]) -> int:
    """How many steps fit in ``cfg.max_time`` (``steps_within``), said in one line; every rank takes rank 0's
    answer. The caller undoes the timed steps."""
    total, per_step, eval_s, timed = steps_within(cfg.max_time_s or 0.0, spent_s, train_step, evaluate,
                                                  cfg.eval_every)
    total = int(broadcast_object(total, info))
    log(f"max_time={cfg.max_time}: about {total:,} steps fit ({per_step:.3g} s a step, {eval_s:.2g} s an "
        f"evaluation, measured on {timed} steps that were then undone)")
    return total
