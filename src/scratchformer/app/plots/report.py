"""The pictures of a run's report (``app/report.py``): its training in three panels (the loss, the learning rate,
the throughput) and its benchmark scores beside chance."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scratchformer.app.plots.common import integer_ticks, new_figure, save

__all__ = ["plot_benchmarks", "plot_training"]


def _points(records: list[dict[str, Any]], split: str, key: str) -> tuple[list[int], list[float]]:
    """The steps and values of ``key`` in the records of ``split`` (the later record of a step wins)."""
    found = {int(r["step"]): float(r[key]) for r in records
             if r.get("split") == split and isinstance(r.get(key), (int, float)) and not isinstance(r[key], bool)}
    steps = sorted(found)
    return steps, [found[s] for s in steps]


def plot_training(records: list[dict[str, Any]], path: str | os.PathLike, title: str,
                  loss_unit: str = "nats per token") -> Path:
    """Loss (train; validation as points; test as a star; ``loss_unit``: what it is an average over, the task's),
    learning rate and tokens per second against the step."""
    fig = new_figure(figsize=(8.5, 7.6), layout="constrained")
    loss, lr, speed = fig.subplots(3, 1, sharex=True, height_ratios=[2.2, 1, 1])
    steps, values = _points(records, "train", "loss")
    loss.plot(steps, values, lw=1.2, alpha=0.6, color="C0", label="train loss (logged steps)")
    for split, style in (("val", dict(marker="o", ms=4, lw=1.8, color="C1")),
                         ("test", dict(marker="*", ms=13, ls="none", color="C3"))):
        steps, values = _points(records, split, "loss")
        if steps:
            loss.plot(steps, values, label=f"{'validation' if split == 'val' else 'test'} loss", **style)
    loss.set_ylabel(f"loss ({loss_unit})")
    loss.set_title(title)
    loss.legend(frameon=False, fontsize=9)
    loss.grid(alpha=0.3)
    steps, values = _points(records, "train", "lr")
    lr.plot(steps, values, color="C2", lw=1.6)
    lr.set_ylabel("learning rate")
    lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    lr.grid(alpha=0.3)
    steps, values = _points(records, "train", "tokens_per_s")
    speed.plot(steps, values, color="C4", lw=1.2)
    speed.set_ylabel("tokens / s")
    speed.set_ylim(bottom=0)
    speed.grid(alpha=0.3)
    speed.set_xlabel("optimizer step")
    speed.xaxis.set_major_locator(integer_ticks())
    return save(fig, path)


def plot_benchmarks(rows: list[tuple[str, float, float | None, float | None]], path: str | os.PathLike,
                    title: str) -> Path:
    """One bar per benchmark score (``(label, score %, standard error %, chance %)``), chance as a tick over it."""
    fig = new_figure(figsize=(8.5, 0.9 + 0.42 * len(rows)), layout="constrained")
    ax = fig.subplots()
    y = list(range(len(rows)))[::-1]
    scores = [r[1] for r in rows]
    errors = [r[2] or 0.0 for r in rows]
    ax.barh(y, scores, xerr=errors, color="C0", alpha=0.8, height=0.6, error_kw=dict(lw=1, capsize=3))
    chance = [(yy, r[3]) for yy, r in zip(y, rows) if r[3] is not None]
    if chance:
        ax.plot([c for _, c in chance], [yy for yy, _ in chance], "|", color="C3", ms=16, mew=2.5,
                label="chance")
        ax.legend(frameon=False, fontsize=9, loc="lower right")
    for yy, s, e, r in zip(y, scores, errors, rows):  # the value on its bar's line, right of its bar and chance
        ax.text(min(max(s + e, r[3] or 0.0) + 1.5, 88), yy, f"{s:.1f} %", va="center", fontsize=8)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=9)
    ax.set_xlim(0, 100)
    ax.set_xlabel("score (%), ± standard error")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    return save(fig, path)
