"""The two pictures at the top of the walkthrough (``docs/make_figures.py`` registers and runs them).

- ``model_map``: the whole model of ``paper.py`` on one page, in its own names: the encoder and decoder stacks,
  which mask each attention uses and where cross-attention reads the encoder's output, the shape on every arrow.
- ``training_step``: the data path of one training step of ``paper_train.py``: two strings, the padded batch that
  ``make_batch`` makes of them (its real ids), the model, the loss, the gradients and Adam's update.
"""

from __future__ import annotations

import sys
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src" / "scratchformer"))  # paper.py, paper_train.py
import paper_train  # noqa: E402

ATTN, NORM, FFN, EMB, OUT, DATA = "#fbe3b6", "#f4f1a6", "#c8e6f5", "#f9d0d0", "#d9d2ef", "#e4f2e1"
CODE, SHAPE, MASK, RESIDUAL = "#1f4e79", "#555555", "#9c2a2a", "#2e7d32"


class _Canvas:
    """Boxes, arrows and labels on an axis in data units (x to the right, y up)."""

    def __init__(self, ax) -> None:
        self.ax = ax

    def box(self, x: float, y: float, w: float, h: float, text: str, color: str, fontsize: float = 9.0) -> None:
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                         fc=color, ec="#333333", lw=1.0))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)

    def arrow(self, start: tuple[float, float], end: tuple[float, float], label: str = "", *, side: str = "right",
              color: str = "#333333", rad: float = 0.0) -> None:
        self.ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=11, lw=1.2, color=color,
                                          connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0))
        if label:
            mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
            dx = 0.12 if side == "right" else -0.12
            self.ax.text(mx + dx, my, label, ha="left" if side == "right" else "right", va="center", fontsize=8,
                         family="monospace", color=SHAPE)

    def note(self, x: float, y: float, text: str, color: str = CODE, ha: str = "left", size: float = 7.8) -> None:
        self.ax.text(x, y, text, ha=ha, va="center", fontsize=size, family="monospace", color=color)


def _stack(c: _Canvas, x: float, boxes: list[tuple[float, str, str]], shape: str, side: int, w: float = 3.0) -> None:
    """Sub-layer boxes at heights ``y`` joined by arrows that carry ``shape``; around each (sub-layer, AddAndNorm)
    pair, the residual connection on ``side`` (-1 left, +1 right): the sub-layer's input goes to its AddAndNorm."""
    for y, text, color in boxes:
        c.box(x, y, w, 0.5, text, color)
    for (y0, _, _), (y1, _, _) in zip(boxes, boxes[1:]):
        c.arrow((x, y0 + 0.25), (x, y1 - 0.25), shape)
    edge = x + side * (w / 2 + 0.25)
    for (y_sub, _, _), (y_norm, _, _) in zip(boxes[0::2], boxes[1::2]):
        below = y_sub - 0.33  # just under the sub-layer, above the shape label
        c.ax.plot([x, edge, edge], [below, below, y_norm], color=RESIDUAL, lw=1.3)
        c.arrow((edge, y_norm), (x + side * w / 2, y_norm), color=RESIDUAL)


def model_map(path: Path) -> None:
    """paper.py's Transformer: what runs, in which order, with which mask, and the shape between the steps."""
    fig = Figure(figsize=(12.5, 9.6))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 16.3)
    ax.set_ylim(-0.3, 12.2)
    ax.axis("off")
    c = _Canvas(ax)
    ex, dx = 3.6, 10.4  # the encoder's and the decoder's column

    for x, L, ids in [(ex, "S", "source ids  src (B, S)"), (dx, "T", "target ids, shifted right  tgt (B, T)\n"
                                                                   "<bos> y1 .. y(T-1)")]:
        ax.text(x, 0.0, ids, ha="center", va="center", fontsize=9)
        c.arrow((x, 0.3), (x, 0.85), f"(B, {L}) ids")
        c.box(x, 1.1, 3.0, 0.5, "Embeddings: table[ids] x sqrt(C)", EMB)
        c.arrow((x, 1.35), (x, 1.85), f"(B, {L}, C)")
        c.box(x, 2.1, 3.0, 0.5, "PositionalEncoding: + PE, dropout", EMB)
    c.note(ex - 1.55, 1.1, "one (V, C) table:\nsource, target, output", ha="right")

    # the encoder: N layers, self-attention under the padding mask
    ax.add_patch(Rectangle((ex - 2.0, 2.55), 4.0, 4.3, fc="#f3f3f3", ec="#888888", ls="--", lw=1.0, zorder=0))
    ax.text(ex - 2.15, 4.8, "N x", ha="right", va="center", fontsize=12, fontweight="bold")
    c.note(ex - 1.9, 6.65, "EncoderLayer")
    c.arrow((ex, 2.35), (ex, 3.15), "(B, S, C)")
    _stack(c, ex, [(3.4, "self-attention  self_attn(x, x, x)", ATTN), (4.35, "AddAndNorm", NORM),
                   (5.3, "FeedForward  C -> d_ff -> C", FFN), (6.25, "AddAndNorm", NORM)], "(B, S, C)", side=-1)
    c.note(ex + 2.1, 3.4, "mask: padding_mask(src)\n(B, 1, 1, S)\nscores (B, H, S, S)", color=MASK)

    # the memory goes to every decoder layer's cross-attention
    c.arrow((ex, 6.5), (ex, 8.0), "memory (B, S, C)")
    ax.plot([ex, ex, 6.9, 6.9], [8.0, 8.3, 8.3, 5.3], color=CODE, lw=1.4)
    c.arrow((6.9, 5.3), (dx - 1.5, 5.3), color=CODE)
    c.note(ex + 0.1, 8.6, "the same memory: the keys and values\nof every decoder layer's cross-attention")
    c.note(ex, 9.5, "Transformer.encode: src -> memory", ha="center", size=9.5)

    # the decoder: N layers, masked self-attention, cross-attention, feed-forward
    ax.add_patch(Rectangle((dx - 2.0, 2.55), 4.0, 6.2, fc="#f3f3f3", ec="#888888", ls="--", lw=1.0, zorder=0))
    ax.text(dx - 2.15, 8.55, "N x", ha="right", va="center", fontsize=12, fontweight="bold")
    c.note(dx - 1.9, 8.55, "DecoderLayer")
    c.arrow((dx, 2.35), (dx, 3.15), "(B, T, C)")
    _stack(c, dx, [(3.4, "masked self-attention\nself_attn(x, x, x)", ATTN), (4.35, "AddAndNorm", NORM),
                   (5.3, "cross-attention\ncross_attn(x, memory, memory)", ATTN), (6.25, "AddAndNorm", NORM),
                   (7.2, "FeedForward  C -> d_ff -> C", FFN), (8.15, "AddAndNorm", NORM)], "(B, T, C)", side=1)
    c.note(dx + 2.1, 3.4, "mask: padding_mask(tgt)\n& causal_mask(T)\n(B, 1, T, T)\nscores (B, H, T, T)", color=MASK)
    c.note(dx + 2.1, 5.3, "queries (B, T, C): from below\nkeys, values (B, S, C): memory\n"
           "mask: padding_mask(src)\n(B, 1, 1, S)\nscores (B, H, T, S)", color=MASK)
    c.note(dx + 2.1, 6.6, "every AddAndNorm:\nLayerNorm(x + sublayer(x));\nin green the residual x", color=RESIDUAL)

    c.arrow((dx, 8.4), (dx, 9.45), "(B, T, C)")
    c.box(dx, 9.7, 3.0, 0.5, "x @ table.T  (the embedding table)", OUT)
    c.arrow((dx, 9.95), (dx, 10.7), "logits (B, T, V)")
    ax.text(dx, 10.95, "position t (from 0) has read <bos> y1 .. yt: scores for y(t+1)", ha="center", va="center", fontsize=9)
    c.note(dx, 11.55, "Transformer.decode: tgt, memory -> logits", ha="center", size=9.5)
    ax.text(ex, 11.1, "paper.py's Transformer, make_model(V)\nB batch, S source length, T target length,\n"
            "C = d_model, H heads, V vocabulary;\nN = 6, C = 512, d_ff = 2048, H = 8 in the base model",
            ha="center", va="center", fontsize=9.5)
    fig.savefig(path, dpi=100, metadata={"Software": None})


def _table(c: _Canvas, x: float, y: float, rows: list[list[int]], title: str, note: str = "") -> None:
    """A small batch of ids drawn as cells with their tokens, padding shaded; (x, y) is the top left corner."""
    names = {paper_train.PAD: "pad", paper_train.BOS: "bos", paper_train.EOS: "eos"}
    cell = 0.55
    c.ax.text(x, y + 0.3, title, ha="left", va="center", fontsize=8.5, family="monospace")
    for r, row in enumerate(rows):
        for t, i in enumerate(row):
            color = "#dddddd" if i == paper_train.PAD else "white"
            c.ax.add_patch(Rectangle((x + t * cell, y - (r + 1) * cell), cell, cell, fc=color, ec="#777777", lw=0.8))
            token = names.get(i, paper_train.LETTERS[i - 3] if i >= 3 else "?")
            c.ax.text(x + (t + 0.5) * cell, y - (r + 0.5) * cell, token, ha="center", va="center", fontsize=7.5)
    if note:
        c.ax.text(x, y - len(rows) * cell - 0.25, note, ha="left", va="center", fontsize=7.5, color=SHAPE)


def training_step(path: Path) -> None:
    """One step of paper_train.py's loop, from strings to updated weights, with the real ids of a batch."""
    fig = Figure(figsize=(12.5, 5.5))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 20)
    ax.set_ylim(1.3, 10)
    ax.axis("off")
    c = _Canvas(ax)
    strings = ["bead", "hijde"]  # MIN_LEN = 4 to MAX_LEN = 12 letters, as the run draws them
    src, tgt_in, tgt_out = (t.tolist() for t in paper_train.make_batch(strings))

    ax.text(0.3, 9.5, "One training step of paper_train.py (the same loop for any batch)", fontsize=11, va="center")
    c.box(1.6, 7.6, 2.4, 1.0, 'strings\n"bead", "hijde"', DATA)
    c.arrow((2.8, 7.6), (3.9, 7.6))
    c.box(4.9, 7.6, 2.0, 0.7, "make_batch", DATA)
    c.arrow((5.9, 7.6), (6.7, 7.6))
    _table(c, 6.9, 8.9, src, "src (B, S) = y <eos>")
    _table(c, 6.9, 7.2, tgt_in, "tgt_in (B, T) = <bos> y")
    _table(c, 6.9, 5.5, tgt_out, "tgt_out (B, T) = y <eos>", "pad: masked in attention, left out of the loss")
    c.arrow((10.4, 8.35), (11.6, 7.8), "")
    c.arrow((10.4, 6.65), (11.6, 7.4), "")
    c.box(13.0, 7.6, 2.8, 1.0, "model(src, tgt_in)\nteacher forcing:\nevery position at once", ATTN, fontsize=8.5)
    c.arrow((14.4, 7.6), (16.0, 7.6), "")
    c.note(14.55, 7.9, "(B, T, V)", color=SHAPE)
    c.box(17.6, 7.6, 3.0, 1.0, "logits\none distribution per\ntarget position", OUT, fontsize=8.5)

    c.arrow((17.6, 7.1), (17.6, 5.0), "")
    c.box(17.6, 4.4, 3.6, 1.2, "loss_fn(logits, tgt_out)\ncross-entropy against the\nlabel-smoothed target "
          "(0.1),\npad positions ignored", NORM, fontsize=8.5)
    ax.plot([10.4, 15.4, 15.4], [4.95, 4.95, 4.6], color="#333333", lw=1.2)
    c.arrow((15.4, 4.6), (15.8, 4.6), "")
    c.arrow((15.8, 4.2), (13.9, 2.6), "")
    c.note(15.0, 3.4, "loss: one number", color=SHAPE)
    c.box(12.6, 2.2, 3.0, 0.9, "loss.backward()\nd loss / d every weight", FFN, fontsize=8.5)
    c.arrow((11.1, 2.2), (9.6, 2.2), "")
    c.box(7.7, 2.2, 3.8, 0.9, "lr = learning_rate(step)\nequation 3: warm-up, 1/sqrt(step)", EMB, fontsize=8.5)
    c.arrow((5.8, 2.2), (4.4, 2.2), "")
    c.box(2.6, 2.2, 3.6, 1.1, "optimizer.step()\nAdam, betas (0.9, 0.98),\neps 1e-9: every weight moves", ATTN,
          fontsize=8.5)
    ax.plot([2.6, 2.6, 12.4, 12.4], [2.75, 3.6, 3.6, 5.0], color=CODE, lw=1.0, ls="--")
    ax.add_patch(FancyArrowPatch((12.4, 5.0), (12.4, 7.1), arrowstyle="-|>", mutation_scale=11, lw=1.0, color=CODE,
                                 ls="--", shrinkA=0, shrinkB=0))
    c.note(2.8, 3.85, "the updated weights: the next step's model", color=CODE)
    fig.savefig(path, dpi=100, metadata={"Software": None})
