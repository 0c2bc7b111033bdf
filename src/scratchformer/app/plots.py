"""Pictures of a model and its training, as PNG files: attention maps (§3.2), the sinusoidal positional
encoding (§3.5), the learning-rate schedule (§5.3) and the curves of a training run.

Every function writes one PNG and returns its path. Figures are built with ``matplotlib.figure.Figure``
and rendered by the Agg (PNG) renderer, never through ``pyplot``: no display is needed, the caller's
pyplot backend is left as it is (a notebook keeps its inline one), and no figure outlives its call.

    maps = attention_maps(model, src=src, tgt=tgt)          # {"decoder.layers.0.cross_attn": (B, H, T, S), ...}
    plot_attention(maps, "cross.png", kind="decoder.cross_attn", query_tokens=tgt_tokens, key_tokens=src_tokens)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from torch import Tensor, nn

from scratchformer.nn.attention import record_attention
from scratchformer.nn.embedding import sinusoidal_table
from scratchformer.tokenizers import WORD_START
from scratchformer.train.config import TrainConfig
from scratchformer.train.logger import read_metrics
from scratchformer.train.optim import Schedule

DPI = 130
# Beyond these, a grid of heatmaps is too small to read: show evenly spaced layers and the first heads.
MAX_LAYERS = 6
MAX_HEADS = 8
# The attention grid is kept within about this many inches a side (at DPI: about 2,300 pixels).
MAX_FIGURE_INCHES = 18.0

ATTENTION_KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
_MAP_KEY = re.compile(r"^(?P<stack>.*?)\.?layers\.(?P<layer>\d+)\.(?P<attn>self_attn|cross_attn)$")

# Metrics that are fractions in [0, 1] (shown as %); BLEU and chrF are already on a 0-100 scale.
_FRACTION_METRICS = ("exact_match", "accuracy", "f1")
_SCORE_METRICS = ("exact_match", "bleu", "chrf", "accuracy", "f1")


# ======================================================================================== attention

@torch.no_grad()
def attention_maps(model: nn.Module, *args: Tensor, **inputs: Tensor) -> dict[str, Tensor]:
    """Run ``model(*args, **inputs)`` once (eval mode, no gradients) and return its attention weights.

    Keys are module names (``"encoder.layers.0.self_attn"``, ``"decoder.layers.1.cross_attn"``; GPT's are
    ``"decoder.layers.i.self_attn"``), values ``(B, H, T, S)`` tensors on the CPU. The model runs on the
    reference attention path meanwhile (see ``record_attention``) and is handed back in its mode.
    """
    was_training = model.training
    model.eval()  # attention dropout would blot out the maps
    try:
        with record_attention(model) as maps:
            model(*args, **inputs)
    finally:
        model.train(was_training)
    return {name: w.float().cpu() for name, w in maps.items()}


def _kind(name: str) -> str | None:
    """``"decoder.layers.3.cross_attn"`` -> ``"decoder.cross_attn"``."""
    m = _MAP_KEY.match(name)
    return None if m is None else f"{m['stack'] or 'model'}.{m['attn']}"


def _layer(name: str) -> int:
    m = _MAP_KEY.match(name)
    return -1 if m is None else int(m["layer"])


def _pick(n: int, chosen: Sequence[int] | None, cap: int, evenly: bool) -> list[int]:
    """Indices to draw out of ``n``: the caller's choice, or all of them up to ``cap``."""
    if chosen is not None:
        bad = [i for i in chosen if not -n <= i < n]
        if bad:
            raise ValueError(f"index {bad[0]} is out of range for {n}")
        return [i % n for i in chosen]
    if n <= cap:
        return list(range(n))
    if evenly:  # first, last and evenly spaced between: depth is what changes between layers
        return sorted({round(i * (n - 1) / max(cap - 1, 1)) for i in range(cap)})
    return list(range(cap))


def _label(token: str) -> str:
    """A token as a readable tick label: visible whitespace, no accidental mathtext."""
    token = token.replace("\n", "\\n").replace("\t", "\\t").replace("$", r"\$")
    if token == " ":
        return "␣"
    return token if len(token) <= 12 else token[:11] + "…"


def _tick_plan(tokens: Sequence[str], inches_per_token: float) -> tuple[list[int], list[str], float]:
    """Tick positions, labels and font size: every token if there is room (down to a 6-point font), else
    every k-th."""
    fontsize = float(np.clip(inches_per_token * 72 / 1.25, 6.0, 9.0))
    step = max(1, math.ceil(fontsize * 1.25 / 72 / inches_per_token))  # 1.25 x the font size between labels
    positions = list(range(0, len(tokens), step))
    return positions, [_label(tokens[i]) for i in positions], fontsize


def _text_inches(labels: Sequence[str], fontsize: float) -> float:
    """Roughly how long the longest label is, in inches (DejaVu Sans: ~0.6 em per character)."""
    return max((len(t) for t in labels), default=1) * fontsize * 0.62 / 72 + 0.08


def plot_attention(maps: dict[str, Tensor], path: str | os.PathLike, *, query_tokens: Sequence[str],
                   key_tokens: Sequence[str] | None = None, kind: str | None = None,
                   layers: Sequence[int] | None = None, heads: Sequence[int] | None = None,
                   title: str | None = None, batch_index: int = 0) -> Path:
    """Heatmaps of attention weights for one example: one row per layer, one column per head.

    ``maps``: ``{module name: (B, H, T, S)}`` as returned by ``attention_maps`` / ``record_attention``.
    ``kind``: which attention to draw, ``"encoder.self_attn"``, ``"decoder.self_attn"`` or
    ``"decoder.cross_attn"``; may be left out when ``maps`` holds only one kind (GPT, classifier).
    ``query_tokens`` label the rows (length T), ``key_tokens`` the columns (length S; default: the query
    tokens, right for self-attention). ``layers``/``heads``: indices to draw; by default all, but at most
    ``MAX_LAYERS`` evenly spaced layers and the first ``MAX_HEADS`` heads. ``batch_index``: which example.
    All panels share one colour scale so they can be compared: 0 to the largest weight shown, or to its
    99.5th percentile when a few weights dwarf the rest (the colour bar then says so with an arrow).
    """
    by_kind: dict[str, list[str]] = {}
    for name in maps:
        k = _kind(name)
        if k is not None:
            by_kind.setdefault(k, []).append(name)
    if not by_kind:
        raise ValueError("no attention maps to plot: run the model under record_attention / attention_maps")
    if kind is None:
        if len(by_kind) > 1:
            raise ValueError(f"maps hold several kinds of attention; choose one with kind= ({', '.join(by_kind)})")
        kind = next(iter(by_kind))
    if kind not in by_kind:
        raise ValueError(f"no {kind!r} maps; available: {', '.join(by_kind)}")
    names = sorted(by_kind[kind], key=_layer)

    first = maps[names[0]]
    if first.dim() != 4:
        raise ValueError(f"attention maps must be (B, H, T, S), got shape {tuple(first.shape)} for {names[0]}")
    B, H, T, S = first.shape
    if not -B <= batch_index < B:
        raise ValueError(f"batch_index={batch_index} is out of range for a batch of {B}")
    key_tokens = query_tokens if key_tokens is None else key_tokens
    if len(query_tokens) != T or len(key_tokens) != S:
        raise ValueError(f"{kind} maps are {T} queries x {S} keys, but got {len(query_tokens)} query tokens and "
                         f"{len(key_tokens)} key tokens")
    # Panel size follows the number of tokens (inches per token), within limits that keep labels legible
    # and the file small; by default, only as many panels as fit MAX_FIGURE_INCHES are drawn.
    cell = float(np.clip(2.8 / max(T, S), 0.05, 0.35))
    panel_w, panel_h = float(np.clip(S * cell, 1.5, 4.5)), float(np.clip(T * cell, 1.5, 4.5))
    gap = 0.12  # inches between panels: inner panels share the outer ones' tick labels
    layer_idx = _pick(len(names), layers, min(MAX_LAYERS, _fit(panel_h, gap)), evenly=True)
    head_idx = _pick(H, heads, min(MAX_HEADS, _fit(panel_w, gap)), evenly=False)
    n_rows, n_cols = len(layer_idx), len(head_idx)
    # a grid the caller chose larger than that is shrunk to fit instead
    shrink = min(1.0, MAX_FIGURE_INCHES / (n_cols * (panel_w + gap)), MAX_FIGURE_INCHES / (n_rows * (panel_h + gap)))
    panel_w, panel_h = panel_w * shrink, panel_h * shrink
    grids = [[maps[names[li]][batch_index, h].detach().float().cpu().numpy() for h in head_idx]
             for li in layer_idx]  # [row][col] -> (T, S)

    # One colour scale for all panels, 0 to the largest weight; but when a few weights tower over the
    # rest, 0 to the 99.5th percentile instead: in causal self-attention the first query puts weight 1
    # on itself, which would flatten the long rows where weights are ~1/T.
    values = np.concatenate([g.ravel() for row in grids for g in row])
    top = float(values.max())
    high = float(np.quantile(values, 0.995))
    vmax = high if 0 < 2 * high < top else max(top, 1e-6)

    # Fixed margins in inches, computed from the labels, instead of constrained layout: as tight, and
    # many times faster for a grid of dozens of panels.
    y_ticks, x_ticks = _tick_plan(query_tokens, panel_h / T), _tick_plan(key_tokens, panel_w / S)
    shown = ""
    if n_rows < len(names) or n_cols < H:
        shown = f"\nshowing layers {', '.join(str(_layer(names[i])) for i in layer_idx)} of {len(names)}"
        shown += f", heads {', '.join(map(str, head_idx))} of {H}" if n_cols < H else ""
    if any(t.startswith(WORD_START) and len(t) > 1 for t in (*query_tokens, *key_tokens)):
        shown += f"\n{WORD_START} marks a token that starts a word"
    left = 0.55 + _text_inches(y_ticks[1], y_ticks[2])
    bottom = 0.35 + _text_inches(x_ticks[1], x_ticks[2])
    top_margin = 0.6 + 0.22 * ((title or "").count("\n") + shown.count("\n"))
    right = 1.15
    grid_w, grid_h = n_cols * panel_w + (n_cols - 1) * gap, n_rows * panel_h + (n_rows - 1) * gap
    fig_w, fig_h = left + grid_w + right, bottom + grid_h + top_margin
    fig = Figure(figsize=(fig_w, fig_h), dpi=DPI)
    fig.subplots_adjust(left=left / fig_w, right=(left + grid_w) / fig_w, bottom=bottom / fig_h,
                        top=(bottom + grid_h) / fig_h, wspace=gap / panel_w, hspace=gap / panel_h)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True, sharey=True)
    image = None
    cross = kind.endswith("cross_attn")
    for r, li in enumerate(layer_idx):
        for c, h in enumerate(head_idx):
            ax = axes[r][c]
            image = ax.imshow(grids[r][c], cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto",
                              interpolation="nearest")
            ax.tick_params(length=2, pad=1)
            if r == 0:
                ax.set_title(f"head {h}", fontsize=10, pad=4)
            if c == 0:
                ax.set_ylabel(f"layer {_layer(names[li])}\n" + ("target (query)" if cross else "query"), fontsize=10)
                ax.set_yticks(y_ticks[0], y_ticks[1], fontsize=y_ticks[2])
            if r == n_rows - 1:
                ax.set_xlabel("source (key)" if cross else "key", fontsize=10)
                ax.set_xticks(x_ticks[0], x_ticks[1], fontsize=x_ticks[2], rotation=90)
    fig.suptitle((title or f"{kind} attention") + shown, fontsize=12, y=1 - 0.1 / fig_h, va="top")
    cax = fig.add_axes(((left + grid_w + 0.25) / fig_w, bottom / fig_h, 0.16 / fig_w, grid_h / fig_h))
    fig.colorbar(image, cax=cax, extend="max" if vmax < top else "neither", label="attention weight")
    return _save(fig, path)


def _fit(panel: float, gap: float) -> int:
    """How many panels of ``panel`` inches fit in MAX_FIGURE_INCHES."""
    return max(1, int((MAX_FIGURE_INCHES + gap) // (panel + gap)))


# ============================================================================= positional encoding

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

    fig = Figure(figsize=(12.5, 4.8), dpi=DPI, layout="constrained")
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
    return _save(fig, path)


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

    fig = Figure(figsize=(8, 4.2), dpi=DPI, layout="constrained")
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
    return _save(fig, path)


# =========================================================================================== curves

def plot_curves(run_dir: str | os.PathLike, path: str | os.PathLike, metrics: Iterable[str] = ("loss",)) -> Path:
    """Training curves from ``run_dir/metrics.jsonl``: ``metrics`` (default the loss) for the train
    and validation splits on one panel (test results as stars), and, when the run logged them, quality
    scores (exact match, BLEU, chrF, accuracy, F1) on a second panel.

    After ``--resume`` a step can appear twice; the later record wins.
    """
    metrics = list(metrics)
    records = read_metrics(run_dir)
    series: dict[tuple[str, str], dict[int, float]] = {}  # (split, metric) -> {step: value}
    for rec in records:
        for key, value in rec.items():
            if key in ("step", "split") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue  # non-finite values are logged as strings: leave them out
            if math.isfinite(value):
                series.setdefault((str(rec.get("split")), key), {})[int(rec["step"])] = float(value)
    if not any(key[1] in metrics for key in series):
        raise ValueError(f"{Path(run_dir) / 'metrics.jsonl'} has no {', '.join(metrics)} values to plot")
    scores = [m for m in _SCORE_METRICS if m not in metrics and any(key[1] == m for key in series)]

    fig = Figure(figsize=(8.5, 7.0 if scores else 4.4), dpi=DPI, layout="constrained")
    axes = fig.subplots(2 if scores else 1, 1, squeeze=False, sharex=True)[:, 0]
    styles = {"train": dict(lw=1.4, alpha=0.85), "val": dict(lw=1.8, marker="o", ms=4),
              "test": dict(ls="none", marker="*", ms=12)}
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
        for i, metric in enumerate(scores):
            draw(score_ax, metric, 100.0 if metric in _FRACTION_METRICS else 1.0, dashed=i > 0)
        score_ax.set_ylabel(", ".join(m + (" (%)" if m in _FRACTION_METRICS else "") for m in scores))
        score_ax.set_title("held-out quality")
        score_ax.set_ylim(0, 102)
        score_ax.legend(frameon=False, fontsize=9, loc="lower right")
        score_ax.grid(alpha=0.3)
    axes[-1].set_xlabel("optimizer step")
    axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
    return _save(fig, path)


# ========================================================================================== writing

def _save(fig: Figure, path: str | os.PathLike) -> Path:
    """Write the figure as PNG, atomically (temporary name, then rename)."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"{path}: these plots are written as PNG; use a .png file name")
    if not path.parent.is_dir():
        raise ValueError(f"cannot write {path}: directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = [
    "ATTENTION_KINDS", "attention_maps", "plot_attention", "plot_curves", "plot_lr_schedule",
    "plot_positional_encoding",
]
