"""Attention maps as a grid of heatmaps: one row per layer, one column per head (§3.2).

    maps = attention_maps(model, src=src, tgt=tgt)          # {"decoder.layers.0.cross_attn": (B, H, T, S), ...}
    plot_attention(maps, "cross.png", kind="decoder.cross_attn", query_tokens=tgt_tokens, key_tokens=src_tokens)

``plot_checkpoint_attention`` does both for a trained checkpoint and a text (``scratchformer plot attention``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from scratchformer.app.plots.common import new_figure, save
from scratchformer.checkpoints import Checkpoint
from scratchformer.families import family
from scratchformer.nn.recording import attention_maps
from scratchformer.tasks.inference import encode_checked, translate_texts
from scratchformer.tokenizers import BOS_ID, WORD_START

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["MAX_FIGURE_INCHES", "plot_attention", "plot_checkpoint_attention"]

# Beyond these, a grid of heatmaps is too small to read: show evenly spaced layers and the first heads.
MAX_LAYERS = 6
MAX_HEADS = 8
# The attention grid is kept within about this many inches a side (at DPI: about 2,300 pixels).
MAX_FIGURE_INCHES = 18.0

_MAP_KEY = re.compile(r"^(?P<stack>.*?)\.?layers\.(?P<layer>\d+)\.(?P<attn>self_attn|cross_attn)$")


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


def _maps_of_kind(maps: dict[str, Tensor], kind: str | None) -> tuple[str, list[str]]:
    """The kind to draw and its maps' names, by layer."""
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
    return kind, sorted(by_kind[kind], key=_layer)


@dataclass
class _Grid:
    """Which panels to draw (layer and head indices) and how big, in inches."""

    layers: list[int]
    heads: list[int]
    panel_w: float
    panel_h: float
    gap: float = 0.12  # inches between panels: inner panels share the outer ones' tick labels

    @classmethod
    def plan(cls, n_layers: int, n_heads: int, T: int, S: int, layers: Sequence[int] | None,
             heads: Sequence[int] | None) -> _Grid:
        """Panel size follows the number of tokens (inches per token), within limits that keep labels
        legible and the file small; by default, only as many panels as fit MAX_FIGURE_INCHES are drawn, and a
        grid the caller chose larger than that is shrunk to fit instead."""
        cell = float(np.clip(2.8 / max(T, S), 0.05, 0.35))
        panel_w, panel_h = float(np.clip(S * cell, 1.5, 4.5)), float(np.clip(T * cell, 1.5, 4.5))
        gap = cls.gap
        layer_idx = _pick(n_layers, layers, min(MAX_LAYERS, _fit(panel_h, gap)), evenly=True)
        head_idx = _pick(n_heads, heads, min(MAX_HEADS, _fit(panel_w, gap)), evenly=False)
        shrink = min(1.0, MAX_FIGURE_INCHES / (len(head_idx) * (panel_w + gap)),
                     MAX_FIGURE_INCHES / (len(layer_idx) * (panel_h + gap)))
        return cls(layer_idx, head_idx, panel_w * shrink, panel_h * shrink)

    @property
    def size(self) -> tuple[float, float]:
        rows, cols = len(self.layers), len(self.heads)
        return cols * self.panel_w + (cols - 1) * self.gap, rows * self.panel_h + (rows - 1) * self.gap


def _colour_limit(grids: list[list[np.ndarray]]) -> tuple[float, float]:
    """``(vmax, top)``: one colour scale for all panels, 0 to the largest weight; but when a few weights tower
    over the rest, 0 to the 99.5th percentile instead: in causal self-attention the first query puts weight 1
    on itself, which would flatten the long rows where weights are ~1/T."""
    values = np.concatenate([g.ravel() for row in grids for g in row])
    top = float(values.max())
    high = float(np.quantile(values, 0.995))
    return (high if 0 < 2 * high < top else max(top, 1e-6)), top


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
    kind, names = _maps_of_kind(maps, kind)
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
    grid = _Grid.plan(len(names), H, T, S, layers, heads)
    panels = [[maps[names[li]][batch_index, h].detach().float().cpu().numpy() for h in grid.heads]
              for li in grid.layers]  # [row][col] -> (T, S)
    shown = ""
    if len(grid.layers) < len(names) or len(grid.heads) < H:
        parts = [_subset("layer", [_layer(names[i]) for i in grid.layers], len(names))]
        parts += [_subset("head", grid.heads, H)] if len(grid.heads) < H else []
        shown = "\nshowing " + ", ".join(parts)
    if any(t.startswith(WORD_START) and len(t) > 1 for t in (*query_tokens, *key_tokens)):
        shown += f"\n{WORD_START} marks a token that starts a word"
    fig = _draw(panels, grid, [_layer(names[i]) for i in grid.layers], query_tokens, key_tokens,
                kind.endswith("cross_attn"), (title or f"{kind} attention") + shown)
    return save(fig, path)


def _subset(what: str, chosen: Sequence[int], n: int) -> str:
    """``"layers 0, 3, 5 of 6"`` or ``"layer 1 of 2"``."""
    return f"{what}{'s' if len(chosen) > 1 else ''} {', '.join(map(str, chosen))} of {n}"


def _draw(panels: list[list[np.ndarray]], grid: _Grid, layer_numbers: list[int], query_tokens: Sequence[str],
          key_tokens: Sequence[str], cross: bool, title: str) -> Figure:
    """The figure: the panels, their tick labels and one colour bar. Fixed margins in inches, computed from
    the labels, instead of constrained layout: as tight, and many times faster for a grid of many panels."""
    (T, S), (vmax, top) = panels[0][0].shape, _colour_limit(panels)
    n_rows, n_cols = len(grid.layers), len(grid.heads)
    y_ticks, x_ticks = _tick_plan(query_tokens, grid.panel_h / T), _tick_plan(key_tokens, grid.panel_w / S)
    left = 0.55 + _text_inches(y_ticks[1], y_ticks[2])
    bottom = 0.35 + _text_inches(x_ticks[1], x_ticks[2])
    top_margin, right = 0.6 + 0.22 * title.count("\n"), 1.15
    grid_w, grid_h = grid.size
    title_w = max(len(line) for line in title.split("\n")) * 12 * 0.58 / 72 + 0.3  # inches, at 12 points
    fig_w, fig_h = max(left + grid_w + right, title_w), bottom + grid_h + top_margin
    fig = new_figure(figsize=(fig_w, fig_h))
    fig.subplots_adjust(left=left / fig_w, right=(left + grid_w) / fig_w, bottom=bottom / fig_h,
                        top=(bottom + grid_h) / fig_h, wspace=grid.gap / grid.panel_w, hspace=grid.gap / grid.panel_h)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True, sharey=True)
    image = None
    for r, layer in enumerate(layer_numbers):
        for c, h in enumerate(grid.heads):
            ax = axes[r][c]
            image = ax.imshow(panels[r][c], cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto",
                              interpolation="nearest")
            ax.tick_params(length=2, pad=1)
            if r == 0:
                ax.set_title(f"head {h}", fontsize=10, pad=4)
            if c == 0:
                ax.set_ylabel(f"layer {layer}\n" + ("target (query)" if cross else "query"), fontsize=10)
                ax.set_yticks(y_ticks[0], y_ticks[1], fontsize=y_ticks[2])
            if r == n_rows - 1:
                ax.set_xlabel("source (key)" if cross else "key", fontsize=10)
                ax.set_xticks(x_ticks[0], x_ticks[1], fontsize=x_ticks[2], rotation=90)
    fig.suptitle(title, fontsize=12, y=1 - 0.1 / fig_h, va="top")
    cax = fig.add_axes(((left + grid_w + 0.25) / fig_w, bottom / fig_h, 0.16 / fig_w, grid_h / fig_h))
    fig.colorbar(image, cax=cax, extend="max" if vmax < top else "neither", label="attention weight")
    return fig


def _fit(panel: float, gap: float) -> int:
    """How many panels of ``panel`` inches fit in MAX_FIGURE_INCHES."""
    return max(1, int((MAX_FIGURE_INCHES + gap) // (panel + gap)))


def plot_checkpoint_attention(ckpt: Checkpoint, text: str, path: str | os.PathLike, *, target: str | None = None,
                              kind: str | None = None) -> Path:
    """A trained checkpoint's attention for ``text`` (``scratchformer plot attention``). For an encoder-decoder
    the target is ``target`` or the model's own greedy translation, and ``kind`` defaults to the decoder's
    cross-attention; for a GPT, its self-attention; for a classifier, its encoder's."""
    tok, model, entry = ckpt.tokenizer, ckpt.model, family(ckpt.model_config.arch)
    if entry.two_stacks:
        src = encode_checked(tok, text, add_eos=True)
        target = target if target is not None else translate_texts(ckpt, [text], beam=1)[0]
        tgt = [BOS_ID] + encode_checked(tok, target)
        maps = attention_maps(model, src=torch.tensor([src]), tgt=torch.tensor([tgt]))
        kind = kind or "decoder.cross_attn"
        source_side = kind.endswith("cross_attn") or kind.startswith("encoder")
        keys = [tok.token_label(i) for i in (src if source_side else tgt)]
        queries = keys if kind.startswith("encoder") else [tok.token_label(i) for i in tgt]
    else:
        ids = encode_checked(tok, text) or [BOS_ID]
        maps = attention_maps(model, input_ids=torch.tensor([ids]))
        kind = kind or f"{entry.stacks[0]}.self_attn"
        queries = keys = [tok.token_label(i) for i in ids]
        target = None
    title = f"{kind}: {_shorten(text)}" + (f"\n-> {_shorten(target)}" if target is not None else "")
    return plot_attention(maps, path, query_tokens=queries, key_tokens=keys, kind=kind, title=title)


def _shorten(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
