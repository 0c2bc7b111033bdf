"""A time budget (``max_time``) as a number of steps, so that the learning-rate schedule fits it.

A few steps and one evaluation are timed (then undone by the caller); the budget, less what has run
already and the final evaluation and test, divided by the time a step and its share of the evaluations
take, is the run's length. The first step is left out of the median (it pays one-off costs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scratchformer.train.averaging import WeightAverage
from scratchformer.train.distributed import broadcast_object
from scratchformer.train.optim import Schedule, make_optimizer
from scratchformer.train.precision import MixedPrecision
from scratchformer.train.steps import evaluate

if TYPE_CHECKING:
    from scratchformer.train.trainer import Trainer


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


def estimate_steps(trainer: Trainer) -> int:
    """How many steps fit in a trainer's ``max_time`` (``steps_within``). The timed steps are undone: the
    weights and the optimizer are put back as they were. Every rank takes rank 0's answer."""
    cfg, model = trainer.cfg, trainer.model
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer.schedule = Schedule.of(cfg, 10_000)  # any schedule: these steps are undone
    total, per_step, eval_s, timed = steps_within(cfg.max_time_s or 0.0, trainer.elapsed(), trainer.train_step,
                                                  lambda: evaluate(trainer.task, model, "val"), cfg.eval_every)
    model.load_state_dict(weights)
    trainer.optimizer = make_optimizer(model, cfg, trainer.device)
    trainer.amp = MixedPrecision(cfg.precision, trainer.device)  # fp16: the loss scale as it started
    if trainer.average is not None:
        trainer.average = WeightAverage(model, cfg.ema_decay)
    total = int(broadcast_object(total, trainer.info))
    trainer.log(f"max_time={cfg.max_time}: about {total:,} steps fit ({per_step:.3g} s a step, {eval_s:.2g} s an "
             f"evaluation, measured on {timed} steps that were then undone)")
    return total
