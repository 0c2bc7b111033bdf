"""The training loop, readable top to bottom as steps; no framework.

    the optimizer, the precision, the weight averages, DDP        Trainer.__init__  (optim.py, precision.py)
    when resuming: the checkpoint's weights and state             Trainer.run, load_state (resume.py)
    the schedule (and the steps a time budget buys)               Trainer.plan      (optim.py, budget.py)
    the run's configuration written, the logs opened              Trainer.begin     (run_info.py, logger.py)
    for step in range(start, total):                              Trainer.loop
        seed (seed, step, rank), lr = schedule(step),             Trainer.train_step (steps.py)
        batch = task.global_batch(step), backward through this
        rank's micro-batches, clip, optimizer step
        every log_every steps: a train row in metrics.jsonl, progress on the terminal
        every eval_every steps: evaluate, keep best/, early stop  Trainer.evaluate_and_select
        save last/ at every evaluation (or every save_every)      Trainer.save
        stop cleanly on an interrupt (SIGINT/SIGTERM), the time budget, early stopping or a NaN loss
    average_last = N: the mean of the last N saves, averaged/     Trainer.write_average (averaging.py)
    the kept checkpoint measured on the test split; samples       Trainer.finish

The task and the model come ready (``start.trainer_for``). Every step's batch, dropout masks and learning rate
are pure functions of ``(seed, step)``, so a run killed at any point and resumed from its last checkpoint
continues exactly as if it had not stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from scratchformer.atomic import atomic_write_text
from scratchformer.checkpoints import AVERAGED, BEST, LAST, read_meta
from scratchformer.distributed import broadcast_object, reduce_flags
from scratchformer.errors import Interrupted, TrainingError
from scratchformer.registry import format_metric
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.base import Task, split_rows
from scratchformer.train.averaging import CheckpointHistory, WeightAverage
from scratchformer.train.budget import TimeBudget, estimate_steps
from scratchformer.train.device import training_module
from scratchformer.train.fsdp import gathered
from scratchformer.train.interrupt import stop_on_signals
from scratchformer.train.logger import MetricsLogger, prune
from scratchformer.train.optim import Schedule, make_optimizer, set_lr
from scratchformer.train.precision import MixedPrecision
from scratchformer.train.result import TrainResult
from scratchformer.train.resume import load_kept, restore_weights
from scratchformer.train.run_info import run_json, summary
from scratchformer.train.run_state import load_run_state, save_run
from scratchformer.train.session import Session
from scratchformer.train.steps import Window, accumulate_gradients, as_float, evaluate, score, seed_step

__all__ = ["Trainer"]


class Trainer:
    """One run. ``run()`` goes through the stages of the module docstring in order."""

    def __init__(self, task: Task, model: nn.Module, run: Resolved, session: Session,
                 fill: Callable[[nn.Module], None] | None = None) -> None:
        """``fill``: what gives a model built on the meta device its weights once it is sharded (``fsdp_init.py``)."""
        self.task, self.run_settings, self.session = task, run, session
        self.cfg, self.out, self.device, self.info = run.train, session.out, session.device, session.dist
        self.progress, self.log = session.progress, session.progress.say
        self.model, self.model_cfg = model if fill else model.to(self.device), model.config
        self.started, self.step = time.perf_counter(), 0  # step: optimizer steps taken
        self.best_score, self.bad_evals = math.inf, 0  # best_score: lower is better (see score)
        self.spent_before = 0.0  # training seconds of earlier sessions (a resumed run's time budget)
        self.val: dict[str, float] = {}
        self.best_val: dict[str, float] = {}  # stays empty after a resume until validation improves again
        self.stop_reason, self.interrupt = "", False
        self.budget: TimeBudget | None = None  # a fresh run's length fitted to max_time (budget.py)
        self.sharded = session.sharded  # shard=fsdp under torchrun: every process holds a piece (fsdp.py)
        self.root = self.task.training_module(self.model)  # what the steps call (sharded first: the optimizer's)
        self.train_model = training_module(self.root, self.info, self.device, self.cfg.compile,
                                           (self.model, self.cfg.precision) if self.sharded else None)
        if fill is not None:  # each process allocates its rows, then reads them from the base
            fill(self.model.to_empty(device=self.device))
        self.fresh_optimizer()
        self.history = CheckpointHistory(self.out / "history", self.cfg.average_last) if self.cfg.average_last else None

    def fresh_optimizer(self) -> None:
        """The optimizer, the precision's loss scale and the moving average, as at the start of a run."""
        self.optimizer = make_optimizer(self.model, self.cfg, self.device)
        self.amp = MixedPrecision("fp32" if self.sharded else self.cfg.precision, self.device)  # FSDP2's own bf16
        self.average = WeightAverage(self.model, self.cfg.ema_decay) if self.cfg.ema_decay else None

    def run(self) -> TrainResult:
        ckpt = self.session.checkpoint
        self.plan(restore_weights(ckpt, self.model, self.device, self.optimizer) if ckpt is not None else None)
        self.begin()
        with stop_on_signals(self.request_stop, self.log):
            try:
                self.loop()
            finally:
                self.progress.close()
                self.metrics.close(failing=sys.exc_info()[0] is not None)
        if self.interrupt and self.step < self.schedule.total:
            raise Interrupted(self.step, self.out)
        return self.finish()

    def plan(self, state: dict[str, Any] | None) -> None:
        """The schedule: a fresh run's (its length estimated from a time budget when only max_time bounds it),
        or a resumed run's own, extended when max_steps asks for more steps."""
        if state is None:
            self.schedule = Schedule.of(self.cfg, self.cfg.max_steps or self.estimate_steps())
            return
        self.load_state(state)
        saved = Schedule.from_dict(state["schedule"])
        self.schedule, note = saved.resumed(self.step, self.cfg.max_steps or saved.total)
        if note:
            self.log(note)

    def begin(self) -> None:
        """Write the run's configuration, say what it uses, and open the logs."""
        out = self.out
        self.resolved_cfg = dataclasses.replace(self.cfg, max_steps=self.schedule.total,
                                                warmup_steps=self.schedule.warmup, warmup_fraction=None)
        lines = summary(self.run_settings, self.task, self.model, self.schedule, self.info, self.device, self.sharded)
        for line in [f"resuming {out} at step {self.step:,}"] if self.session.resume else lines:
            self.log(line)
        if self.info.is_main:
            out.mkdir(parents=True, exist_ok=True)
            prune(out, self.step)
            if self.history is not None:
                self.history.forget_after(self.step)
            atomic_write_text(out / "config.json", run_json(self.run_settings, self.resolved_cfg, self.task, self.model,
                                                            lines, self.device, str(out)), "the run's config.json")
        self.metrics = MetricsLogger(out, enabled=self.info.is_main, say=self.log,
                                     purge_step=self.step + 1 if self.session.resume else None)
        self.progress.start(self.schedule.total, self.step, self.cfg.task, self.cfg.log_every)

    def loop(self) -> None:
        cfg, total = self.cfg, self.schedule.total
        self.model.train()
        window = Window()
        while (step := self.step) < self.schedule.total and not self.stop_requested():
            loss, grad_norm, lr, tokens = self.train_step(step)
            self.step = done = step + 1
            window.add(loss, tokens)
            self.progress.step(done, loss, lr)
            if done % cfg.log_every == 0 or done == total:
                mean, tps = window.flush()
                scale = {} if self.amp.loss_scale is None else {"loss_scale": self.amp.loss_scale}  # fp16
                self.metrics.log(done, "train", loss=mean, lr=lr, grad_norm=grad_norm, tokens_per_s=tps,
                                 time_s=self.elapsed(), **scale, **self.task.train_metrics())
                self.progress.log_line(done, mean, lr, tps)
            out_of_time = self.out_of_time()
            is_eval = done % cfg.eval_every == 0 or done == total or out_of_time
            early = self.evaluate_and_select(done) if is_eval else False
            if self.budget is not None and self.budget.due(done) and not (early or out_of_time):  # max_time
                self.schedule = self.budget.refit(self.schedule, done, self.elapsed())
                self.progress.total = total = self.schedule.total
            saving = (is_eval and not cfg.save_every) or (cfg.save_every and done % cfg.save_every == 0)
            if self.history is not None and self.info.is_main and (saving or done == total):
                self.history.add(self.model, done)  # before last/: a run resumed from an older last/ forgets it
            if saving or early or out_of_time or done == total:
                self.save(LAST, done)
            if early or (out_of_time and done < total):
                self.stop_reason = "early stopping" if early else "time budget"
                self.log(f"early stopping at step {done:,}: no better validation {cfg.select_by} in {cfg.patience} "
                         "evaluations" if early else f"stopped at step {done:,} of {total:,}: the time budget "
                         f"max_time={cfg.max_time} is spent (continue with --resume max_time=LONGER)")
                break
        if self.interrupt and self.step < self.schedule.total:
            self.save(LAST, self.step)

    def finish(self) -> TrainResult:
        """The kept checkpoint (best/, else the last weights) measured on the test split; samples."""
        model, out = self.model, self.out
        result = TrainResult(out, model, self.task, self.model_cfg, self.step, val=self.best_val or self.val,
                             last_val=self.val, stopped_early=self.stop_reason == "early stopping",
                             stop_reason=self.stop_reason, is_main=self.info.is_main)
        if self.average is not None and self.average.updates:  # the model returned is the average (best/'s, if any)
            model.load_state_dict({**model.state_dict(), **self.average.average})
        if self.info.is_main or self.sharded:  # sharded: every process takes part
            kept_step = result.step  # the step of the checkpoint the test metrics are measured on
            if (out / BEST / "config.json").is_file():
                load_kept(out / BEST, model, self.device)
                kept_step = read_meta(out / BEST)["step"]
            if self.history is not None and self.history.steps():
                result.before_averaging = result.val
                result.averaged_steps, result.val = self.write_average()
                kept_step = result.step
            if self.cfg.test_at_end and self.task.has_split("test"):
                result.test = self.evaluate("test")
                MetricsLogger(out, tensorboard=False, enabled=self.info.is_main).log(kept_step, "test", **result.test)
            model.eval()
            with gathered(self.root):
                result.samples = self.task.samples(model)
        result.seconds = time.perf_counter() - self.started
        return result

    def train_step(self, step: int) -> tuple[float, float, float, int]:
        """One optimizer step; returns (mean loss, gradient norm, learning rate, input tokens)."""
        cfg, info = self.cfg, self.info
        seed_step(cfg.seed, step, info.rank)
        set_lr(self.optimizer, lr := self.schedule(step))
        batch = self.task.global_batch(step)
        count = self.task.count(batch)
        shards = split_rows(batch, info.world_size * cfg.grad_accum)[info.rank * cfg.grad_accum:
                                                                     (info.rank + 1) * cfg.grad_accum]
        loss = accumulate_gradients(self.task, self.train_model, shards, count, cfg.label_smoothing, self.device,
                                    info.world_size, self.amp)
        self.amp.unscale(self.optimizer)  # fp16: the gradients' true size, for clipping
        grad_norm = as_float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip or math.inf))
        if info.enabled:
            t = torch.tensor([loss], device=self.device)
            dist.all_reduce(t)
            loss = t.item()
        loss /= count
        # an overflowing fp16 gradient is expected now and then: the scaler skips that step (precision.py)
        if not (math.isfinite(loss) and (math.isfinite(grad_norm) or self.amp.tolerates_overflow)):
            raise TrainingError(f"the loss became {loss} at step {step + 1}; stopped. The last good "
                                f"checkpoint is in {self.out / LAST} (try a lower lr or more warmup_steps)")
        self.amp.step(self.optimizer)
        self.optimizer.zero_grad(set_to_none=True)
        if self.average is not None:
            self.average.update()
        return loss, grad_norm, lr, self.task.n_tokens(batch)

    def evaluate_and_select(self, done: int) -> bool:
        """Evaluate on the validation split, keep best/; returns whether early stopping says stop."""
        stop, started = False, time.perf_counter()
        if self.info.is_main or self.sharded:  # sharded: every process takes part, rank 0 alone writes
            with self.averaged():
                self.val = self.evaluate("val")
            if self.budget is not None:
                self.budget.evaluated(time.perf_counter() - started)  # max_time: its time is not a step's
            self.metrics.log(done, "val", **self.val, time_s=self.elapsed())
            self.progress.write(f"step {done:,}: validation " + ", ".join(f"{k} {format_metric(k, v)}"
                                                                          for k, v in self.val.items()))
            now = score(self.val, self.cfg.select_by)
            if now < self.best_score:
                self.best_score, self.bad_evals, self.best_val = now, 0, self.val
                self.save(BEST, done)
            else:
                self.bad_evals += 1
                stop = bool(self.cfg.patience) and self.bad_evals >= self.cfg.patience
        return broadcast_object(stop, self.info)

    def averaged(self) -> contextlib.AbstractContextManager[dict[str, torch.Tensor] | None]:
        """The model holds the averaged weights inside (when ema_decay is on); yields the trained ones."""
        return self.average.swapped_in(self.model) if self.average is not None else contextlib.nullcontext(None)

    def save(self, name: str, step: int, **extra: Any) -> None:
        """Save the checkpoint ``name`` (last/, best/: with the trainer's state; averaged/: ``extra``, no state)."""
        save_run(self, name, step, extra)

    def load_state(self, state: dict[str, Any]) -> None:
        load_run_state(self, state)

    def write_average(self) -> tuple[list[int], dict[str, float]]:
        """``average_last``: the mean of the kept saves, measured on validation and saved as ``averaged/``."""
        steps = self.history.load_mean(self.model)  # type: ignore[union-attr]
        val = self.evaluate("val")
        MetricsLogger(self.out, tensorboard=False).log(self.step, "val_averaged", **val, steps=steps)
        self.save(AVERAGED, self.step, averaged_steps=steps)
        self.log(f"averaged/: the mean of the weights of steps {', '.join(f'{s:,}' for s in steps)}")
        return steps, val

    def estimate_steps(self) -> int:
        """How many steps fit in ``max_time`` (``budget.py``); the timed steps are then undone."""
        weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.schedule = Schedule.of(self.cfg, 10_000)  # any schedule: these steps are undone
        self.budget = estimate_steps(self.cfg, self.elapsed(), self.train_step,
                                     lambda: self.evaluate("val"), self.info, self.log,
                                     tested=self.cfg.test_at_end and self.task.has_split("test"))
        self.model.load_state_dict(weights)
        self.fresh_optimizer()
        return self.budget.start(self.cfg, self.elapsed())  # the run's own steps begin

    def evaluate(self, split: str) -> dict[str, float]:
        """The task's metrics on ``split`` (a sharded model's root gathered meanwhile: ``fsdp.gathered``)."""
        with gathered(self.root):
            return evaluate(self.task, self.model, split)

    def elapsed(self) -> float:
        """Training seconds of this run, earlier sessions of a resumed run included."""
        return self.spent_before + time.perf_counter() - self.started

    def out_of_time(self) -> bool:
        late = self.cfg.max_time_s is not None and self.elapsed() >= self.cfg.max_time_s
        return bool(reduce_flags([late], self.info)[0]) if self.info.enabled else late

    def request_stop(self) -> bool:
        """A signal asks the run to stop; returns whether it had been asked already."""
        asked, self.interrupt = self.interrupt, True
        return asked

    def stop_requested(self) -> bool:
        if self.info.enabled:
            self.interrupt = bool(reduce_flags([self.interrupt], self.info)[0])
        return self.interrupt
