"""Pictures of positions and training: the sinusoidal positional encoding (§3.5), the learning-rate schedule
(§5.3) and the curves of a training run."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scratchformer.app.plots.common import integer_ticks, new_figure, save
from scratchformer.nn.embedding import sinusoidal_table
from scratchformer.registry import METRICS
from scratchformer.settings.config import TrainConfig
from scratchformer.train.logger import read_metrics
from scratchformer.train.optim import Schedule


def plot_positional_encoding(max_len: int, d_model: int, path: str | os.PathLike, *,
                             dims: Sequence[int] | None = None) -> Path:
    """The paper's sinusoidal encoding (§3.5): the ``(max_len, d_model)`` matrix as an image, and beside
    it the value of a few dimensions against position (``dims``; default 4 spread over the pairs), which
    shows the wavelengths growing geometrically from 2 pi to 10000 * 2 pi.
    """
    if max_len < 1 or d_model < 2 or d_model % 2:
        raise ValueError(f"need max_len >= 1 and an even d_model >= 2, got max_len={max_len}, d_model={d_model}")
    table = sinusoidal_table(max_len, d_model).numpy()  # (max_len, C)
    if dims is None:
        pairs = d_model // 2  # sin dimensions 0, 2, 4, ...: the fastest to the slowest waves
        dims = sorted({2 * round(i * (pairs - 1) / 8) for i in (0, 1, 2, 4)})
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise ValueError(f"dimension {bad[0]} is out of range for d_model={d_model}")

    fig = new_figure(figsize=(12.5, 4.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.15, 1])
    image = left.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    left.set_xlabel("dimension i (even: sin, odd: cos)")
    left.set_ylabel("position")
    left.set_title(f"PE matrix ({max_len} positions x {d_model} dimensions)")
    fig.colorbar(image, ax=left, label="PE(pos, i)")

    pos = np.arange(max_len)
    for d in dims:
        wavelength = 2 * math.pi * 10000 ** ((d - d % 2) / d_model)
        right.plot(pos, table[:, d], lw=1.5, label=f"i = {d}  (wavelength {wavelength:,.0f})")
    right.set_xlabel("position")
    right.set_ylabel("PE(pos, i)")
    right.set_ylim(-1.15, 1.6)  # room for the legend above the curves
    right.set_xlim(0, max(max_len - 1, 1))
    right.set_title("selected dimensions")
    right.legend(loc="upper right", fontsize=8, ncols=2, frameon=False)
    right.grid(alpha=0.3)
    fig.suptitle("Sinusoidal positional encoding (§3.5): PE(pos, 2k) = sin(pos / 10000^(2k/d)), "
                 "PE(pos, 2k+1) = cos(...)", fontsize=11)
    return save(fig, path)


# ========================================================================================= schedule

def plot_lr_schedule(schedule: Schedule | TrainConfig, path: str | os.PathLike) -> Path:
    """Learning rate against optimizer step over the whole run, with the warm-up shaded. ``schedule``: a run's
    own (its trainer state has it, extensions included), or the one training settings give."""
    if isinstance(schedule, TrainConfig):
        if not schedule.max_steps:
            raise ValueError("this schedule's length comes from max_time when the run starts; set max_steps=N to "
                             "draw it")
        schedule = Schedule.of(schedule)
    n = schedule.total
    steps = np.arange(n) if n <= 20_000 else np.unique(np.linspace(0, n - 1, 20_000).round().astype(int))
    lrs = np.array([schedule(int(s)) for s in steps])

    fig = new_figure(figsize=(8, 4.2), layout="constrained")
    ax = fig.subplots()
    ax.plot(steps + 1, lrs, lw=1.8, color="C0")  # schedule(step) is the rate of the (step + 1)-th update
    warmup = schedule.warmup
    if warmup:
        ax.axvspan(0, min(warmup, n), color="C1", alpha=0.12, lw=0)
        ax.axvline(warmup, color="C1", ls="--", lw=1.2, label=f"end of warm-up (step {warmup:,})")
        ax.legend(loc="upper right", frameon=False)
    ax.set_xlim(0, n)
    ax.set_ylim(0, lrs.max() * 1.08)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.grid(alpha=0.3)
    detail = f", min {schedule.min_lr:g}" if schedule.kind == "cosine" else ""
    ax.set_title(f"{schedule.kind} schedule: peak {schedule.lr:.3g}{detail}, {n:,} steps, warm-up {warmup:,}")
    return save(fig, path)


# =========================================================================================== curves

def _series(records: Iterable[dict[str, Any]]) -> dict[tuple[str, str], dict[int, float]]:
    """``{(split, metric): {step: value}}`` of the finite numbers in ``metrics.jsonl``'s records."""
    series: dict[tuple[str, str], dict[int, float]] = {}
    for rec in records:
        for key, value in rec.items():
            if key in ("step", "split") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue  # non-finite values are logged as strings: leave them out
            if math.isfinite(value):
                series.setdefault((str(rec.get("split")), key), {})[int(rec["step"])] = float(value)
    return series


def plot_curves(run_dir: str | os.PathLike, path: str | os.PathLike, metrics: Iterable[str] = ("loss",)) -> Path:
    """Training curves from ``run_dir/metrics.jsonl``: ``metrics`` (default the loss) for the train
    and validation splits on one panel (test results as stars), and, when the run logged them, quality
    scores (the registry's fractions and percentages: exact match, BLEU, chrF, accuracy, F1, reward accuracy, ...) as
    percentages on a second panel.

    After ``--resume`` a step can appear twice; the later record wins.
    """
    metrics = list(metrics)
    series = _series(read_metrics(run_dir))
    if not any(key[1] in metrics for key in series):
        raise ValueError(f"{Path(run_dir) / 'metrics.jsonl'} has no {', '.join(metrics)} values to plot")
    logged = {key[1] for key in series}
    scores = [m for m, kind in METRICS.items() if kind.quality and m not in metrics and m in logged]

    fig = new_figure(figsize=(8.5, 7.0 if scores else 4.4), layout="constrained")
    axes = fig.subplots(2 if scores else 1, 1, squeeze=False, sharex=True)[:, 0]
    styles = {"train": dict(lw=1.4, alpha=0.85), "val": dict(lw=1.8, marker="o", ms=4),
              "val_averaged": dict(ls="none", marker="D", ms=7), "test": dict(ls="none", marker="*", ms=12)}
    colors: dict[str, str] = {}

    def draw(ax: Any, metric: str, scale: float = 1.0, dashed: bool = False) -> None:
        color = colors.setdefault(metric, f"C{len(colors)}")
        for split, style in styles.items():
            points = series.get((split, metric))
            if points:
                steps = sorted(points)
                if split == "train" and ("val", metric) in series:
                    style = {**style, "alpha": 0.5}  # the noisier curve behind the held-out one
                if dashed and split != "test":
                    style = {**style, "ls": "--"}  # visible even where it lies on top of another score
                ax.plot(steps, [points[s] * scale for s in steps], color=color, label=f"{split} {metric}", **style)

    loss_ax = axes[0]
    for metric in metrics:
        draw(loss_ax, metric)
    values = [v for (split, m), pts in series.items() if m in metrics for v in pts.values()]
    if values and min(values) > 0 and max(values) / min(values) > 30:
        loss_ax.set_yscale("log")  # a loss that falls over decades is unreadable on a linear axis
    loss_ax.set_ylabel(", ".join(metrics) + (" (log scale)" if loss_ax.get_yscale() == "log" else ""))
    loss_ax.set_title(f"{Path(run_dir).name}: training curves")
    loss_ax.legend(frameon=False, fontsize=9)
    loss_ax.grid(alpha=0.3, which="both")

    if scores:
        score_ax = axes[1]
        for i, name in enumerate(scores):
            draw(score_ax, name, 100.0 if METRICS[name].fraction else 1.0, dashed=i > 0)
        score_ax.set_ylabel(", ".join(m + (" (%)" if METRICS[m].fraction else "") for m in scores))
        score_ax.set_title("held-out quality")
        score_ax.set_ylim(0, 102)
        score_ax.legend(frameon=False, fontsize=9, loc="lower right")
        score_ax.grid(alpha=0.3)
    axes[-1].set_xlabel("optimizer step")
    axes[-1].xaxis.set_major_locator(integer_ticks())
    return save(fig, path)
