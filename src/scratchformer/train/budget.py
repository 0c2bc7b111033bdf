"""A time budget (``max_time``) as a number of steps, so that the learning-rate schedule fits it.

Before the first step, a few steps and one evaluation are timed (then undone by the caller,
``Trainer.estimate_steps``); the budget, less what has run already and the final evaluation and test,
divided by the time a step and its share of the evaluations take, is the run's length. The first step is
left out of the median (it pays one-off costs).

A few steps say little on a busy machine, and the first steps of a run are often slower than the rest, so the
length is fitted again on a clock of its own (``TimeBudget``): about every ``FIT_EVERY`` of the budget, the
first time after that share of it or ``FIRST_FIT`` steps, whichever comes first, whether or not an evaluation
falls there, from the speed of the training steps since the fit before the last (two intervals, so that a fit
that comes a step after the last one still rests on several; the evaluations' time taken out, and put back as
each step's share of the evaluations to come). It is fitted until the end: ``constant`` and ``inverse_sqrt`` rates
never depend on the length; a ``cosine`` decay that has not begun simply gets the new length (a fit comes at the step
before it begins), and one under way goes on from the current rate to ``min_lr`` at the new last step
(``Schedule.extended``), so that a run whose machine slows down late (a shared machine) still ends its decay on its
floor within the budget, instead of being cut off half-way down. The warm-up stays as it was fixed at the start; a
change under 1 % is left alone. The run's ``config.json`` keeps the first estimate; its checkpoints hold the length
as fitted.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from scratchformer.distributed import DistInfo, broadcast_object
from scratchformer.settings.config import TrainConfig
from scratchformer.train.optim import Schedule

SMALLEST_CHANGE = 0.01  # a refit that moves the length less than this is not made
FIT_EVERY = 0.02  # the share of the budget between two fits of the length
FIRST_FIT = 30  # the most steps before the first fit (the first estimate times only a few)


def steps_within(budget_s: float, spent_s: float, train_step: Callable[[int], object], evaluate: Callable[[], object],
                 eval_every: int, evals_after: int = 2) -> tuple[int, float, float, int]:
    """``(steps, seconds a step, seconds an evaluation, steps timed)``: how many steps fit in the budget, with
    ``evals_after`` evaluations' time kept for after the last step (the final evaluation, and the test)."""
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
    spendable = budget_s - spent_s - sum(times) - eval_s - evals_after * eval_s
    return max(1, int(spendable / (per_step + eval_s / eval_every))), per_step, eval_s, len(times)


@dataclasses.dataclass
class TimeBudget:
    """The budget of a fresh run whose length was estimated: when and how ``refit`` fits it again."""

    budget_s: float
    total: int  # the steps the first estimate fits
    per_step_s: float  # the seconds a step took then
    after_s: float  # kept for after the last step: the final evaluation and the test, as timed
    eval_s: float  # the time of an evaluation (the last one timed)
    eval_every: int
    info: DistInfo
    log: Callable[[str], None]
    next_fit: int = 0  # the step after which the length is fitted next (``due``)
    # (the run's training seconds, the steps done, the evaluations' seconds so far) where its own steps began
    # and at each fit since: the speed is measured from the one before the last
    marks: list[tuple[float, int, float]] = dataclasses.field(default_factory=list)
    evals_s: float = 0.0  # seconds of the evaluations so far

    def start(self, cfg: TrainConfig, elapsed_s: float) -> int:
        """The run's own steps begin now (``elapsed_s``): the first fit comes after ``FIT_EVERY`` of the budget or
        ``FIRST_FIT`` steps, whichever is sooner (and before a decay begins). Returns the steps estimated."""
        self.marks = [(elapsed_s, 0, 0.0)]
        first = min(FIRST_FIT, self._steps_between_fits(self.per_step_s))
        self.next_fit = self._next_fit(Schedule.of(cfg, self.total), 0, first)
        return self.total

    def evaluated(self, seconds: float) -> None:
        """An evaluation took ``seconds`` (its time is not a step's)."""
        self.eval_s, self.evals_s = seconds, self.evals_s + seconds

    def due(self, done: int) -> bool:
        return done >= self.next_fit

    def refit(self, schedule: Schedule, done: int, elapsed_s: float) -> Schedule:
        """``schedule``, or a new one if the rest of the budget at the speed of the training steps since the fit
        before the last (and their share of the evaluations) gives another length (said in one line); every rank
        takes rank 0's answer. Sets when the next fit comes."""
        since_s, since_step, evals_before = self.marks[-2] if len(self.marks) > 1 else self.marks[-1]
        steps = max(1, done - since_step)
        per_step = (elapsed_s - since_s - (self.evals_s - evals_before)) / steps + self.eval_s / self.eval_every
        self.marks = [self.marks[-1], (elapsed_s, done, self.evals_s)]
        new = fitted(schedule, done, per_step, self.budget_s - elapsed_s - self.after_s)
        upcoming = self._next_fit(new or schedule, done, self._steps_between_fits(per_step))
        new, self.next_fit = broadcast_object((new, upcoming), self.info)
        if new is None:
            return schedule
        self.log(f"max_time: {new.total:,} steps fit at the speed of the last {steps:,} steps, not {schedule.total:,}")
        return new

    @staticmethod
    def _next_fit(schedule: Schedule, done: int, steps: int) -> int:
        """The step of the fit ``steps`` after ``done``; before a cosine decay begins, at the latest the step before
        it (the last one whose new length changes only where the decay starts)."""
        last = schedule.decay_start - 1
        if schedule.kind == "cosine" and schedule.resumed_at is None and done < last:
            return min(done + steps, last)
        return done + steps

    def _steps_between_fits(self, per_step_s: float) -> int:
        return max(1, round(FIT_EVERY * self.budget_s / max(per_step_s, 1e-9)))


def fitted(schedule: Schedule, done: int, per_step_s: float, left_s: float) -> Schedule | None:
    """``schedule`` with the length that fits ``left_s`` more seconds at ``per_step_s`` a step; None when it
    stays (a change under 1 %). A cosine decay under way goes on from the current rate to ``min_lr`` at the new last
    step; a run slower than its estimate whose decay would have begun already starts its decay at the next step."""
    total = done + max(1, int(0.995 * left_s / max(per_step_s, 1e-9)) - 1)  # a step and 0.5 % spare: steps vary
    if schedule.kind == "cosine":
        if schedule.decay_start <= done or schedule.resumed_at is not None:  # the decay has begun: its rates so far
            if abs(total - schedule.total) < SMALLEST_CHANGE * schedule.total:  # are kept, the rest fits the length
                return None
            return schedule.extended(done, total)
        if dataclasses.replace(schedule, total=total).decay_start <= done:  # then decay_fraction < 1
            total = max(total, int(done / (1 - schedule.decay_fraction)) - 1)
            while dataclasses.replace(schedule, total=total).decay_start <= done:
                total += 1  # the fewest steps that keep the rates already taken
    if abs(total - schedule.total) < SMALLEST_CHANGE * schedule.total:
        return None
    return dataclasses.replace(schedule, total=total)


def estimate_steps(cfg: TrainConfig, spent_s: float, train_step: Callable[[int], object],
                   evaluate: Callable[[], object], info: DistInfo, log: Callable[[str], None],
                   tested: bool = True) -> TimeBudget:
    """How many steps fit in ``cfg.max_time`` (``steps_within``), said in one line; every rank takes rank 0's
    answer. ``tested``: a test evaluation follows the last step. The caller undoes the timed steps, then starts
    the budget's clock (``TimeBudget.start``)."""
    budget_s, evals_after = cfg.max_time_s or 0.0, 1 + tested
    total, per_step, eval_s, timed = steps_within(budget_s, spent_s, train_step, evaluate, cfg.eval_every, evals_after)
    total, per_step = broadcast_object((total, per_step), info)
    log(f"max_time={cfg.max_time}: about {total:,} steps fit ({per_step:.3g} s a step, {eval_s:.2g} s an "
        f"evaluation, measured on {timed} steps that were then undone; fitted again as the run goes)")
    return TimeBudget(budget_s, int(total), per_step, evals_after * eval_s, eval_s, cfg.eval_every, info, log)
