"""Draw every figure of the walkthrough into docs/figures/: ``python docs/make_figures.py [NAME ...]``.

All pictures come from the project's own code: ``scratchformer.viz``, the real modules and training loop
(a small copy-task model is trained here, about a minute on 2 CPU cores, for the attention and loss
pictures). Deterministic, except the timings of ``why_self_attention``: the same figures on every run (up
to library versions). Name figures (``python docs/make_figures.py lr_schedules label_smoothing``) to
redraw only those; ``--list`` prints the names.

The pictures of trained models (``qkv_by_numbers``, ``self_attention_sentence``, ``translation_steps``,
``translation_attentions``) are drawn by ``figures_learner.py``, whose docstring says which models they read;
the translation pictures train their model first (about 15 CPU-minutes) when ``runs/figures-multi30k`` is
missing, which needs the Multi30k data (``SCRATCHFORMER_DATA``).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.ticker import NullFormatter
from PIL import Image as PILImage

from scratchformer import ModelConfig, build_model, paper
from scratchformer.app import plots as viz
from scratchformer.nn import MultiHeadAttention, attention_reference, sinusoidal_table
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.resolve import resolve
from scratchformer.tokenizers import BOS_ID
from scratchformer.train import train
from scratchformer.train.optim import lr_at

sys.path.insert(0, str(Path(__file__).resolve().parent))
import figures_first_read as first_read  # noqa: E402  (the two pictures at the top of the walkthrough)
import figures_learner as learner  # noqa: E402  (the pictures drawn from trained models, in their own file)

OUT = Path(__file__).resolve().parent / "figures"
DPI = 100  # figures are read on a screen; a higher resolution only makes the repository heavier


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=DPI, metadata={"Software": None})


def _shrink(path: Path) -> None:
    """Re-encode a PNG with a 256-colour palette: a third of the size, no visible change for these plots."""
    image = PILImage.open(path).convert("RGB")
    palette = image.quantize(colors=256, method=PILImage.Quantize.MEDIANCUT, dither=PILImage.Dither.NONE)
    palette.save(path, optimize=True)


# ============================================================================ the paper's figures 1 and 2


class _Diagram:
    """Boxes and arrows on an axis in data units (x to the right, y up), for the block diagrams."""

    def __init__(self, ax) -> None:
        self.ax = ax

    def box(self, x: float, y: float, w: float, h: float, text: str, color: str, *, note: str = "",
            fontsize: float = 9.5) -> tuple[float, float, float, float]:
        self.ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                         fc=color, ec="#333333", lw=1.0))
        self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize)
        if note:  # the scratchformer name of the box, beside it
            self.ax.text(x + w / 2 + 0.12, y, note, ha="left", va="center", fontsize=7.5, family="monospace",
                         color="#1f4e79")
        return x, y, w, h

    def arrow(self, start: tuple[float, float], end: tuple[float, float], *, rad: float = 0.0,
              color: str = "#333333", style: str = "-|>") -> None:
        self.ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10, lw=1.1, color=color,
                                          connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0))

    def path(self, points: list[tuple[float, float]], color: str = "#333333") -> None:
        """A residual connection: a line through ``points`` ending in an arrow."""
        xs, ys = zip(*points[:-1])
        self.ax.plot(xs, ys, color=color, lw=1.1)
        self.arrow(points[-2], points[-1], color=color)


ATTN, NORM, FFN, EMB, OUTC = "#fbe3b6", "#f4f1a6", "#c8e6f5", "#f9d0d0", "#d9d2ef"
CODE = "#1f4e79"  # the colour of scratchformer's names on the diagrams


def _stack(d: _Diagram, x: float, ys: list[float], boxes: list[tuple[str, str, str]], side: int, *,
           bw: float = 2.6, bh: float = 0.5) -> None:
    """One layer of Figure 1: boxes at ``ys`` joined by arrows, a residual connection around each
    (sub-layer, Add & Norm) pair on ``side`` (-1 left, +1 right), code names on the right."""
    for y, (text, color, note) in zip(ys, boxes):
        d.box(x, y, bw, bh, text, color, fontsize=8.8)
        if note:
            offset = 0.12 if side < 0 else 0.55
            d.ax.text(x + bw / 2 + offset, y, note, ha="left", va="center", fontsize=7.5, family="monospace",
                      color=CODE)
    for lower, upper in zip(ys, ys[1:]):
        d.arrow((x, lower + bh / 2), (x, upper - bh / 2))
    edge = x + side * (bw / 2 + 0.25)
    for i in range(0, len(ys), 2):  # around sub-layer i into the Add & Norm i + 1
        below = ys[i] - bh / 2 - 0.2
        d.path([(x, below), (edge, below), (edge, ys[i + 1]), (x + side * bw / 2, ys[i + 1])])


def paper_figure_1(path: Path) -> None:
    """The Transformer (the paper's Figure 1), each part labelled with the code of ``paper.py`` that is it."""
    fig = Figure(figsize=(9.4, 8.6))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-0.4, 12.4)
    ax.set_ylim(-0.1, 12.0)
    ax.axis("off")
    d = _Diagram(ax)
    ex, dx, bw, bh = 2.9, 8.3, 2.6, 0.5

    for x, label, shift, who in [(ex, "Inputs: source ids (B, S)", -1, "Input Embedding"),
                                 (dx, "Outputs, shifted right: <bos> y1 .. (B, T)", 1, "Output Embedding")]:
        ax.text(x, 0.15, label, ha="center", fontsize=9)
        d.arrow((x, 0.4), (x, 0.95))
        d.box(x, 1.2, bw, bh, who, EMB, fontsize=8.8)
        ax.text(x, 2.05, "⊕", ha="center", va="center", fontsize=17)
        ax.text(x + shift * 2.2, 2.05, "Positional\nEncoding", ha="center", va="center", fontsize=8.5)
        d.arrow((x + shift * 1.55, 2.05), (x + shift * 0.22, 2.05))
        d.arrow((x, 1.45), (x, 1.83))
    ax.text(ex + bw / 2 + 0.12, 1.2, "embed: table x sqrt(C)", fontsize=7.5, family="monospace", color=CODE,
            va="center")
    ax.text(dx + bw / 2 + 0.12, 1.2, "the same embed", fontsize=7.5, family="monospace", color=CODE,
            va="center")

    enc_ys = [3.3, 4.15, 5.0, 5.85]
    ax.add_patch(Rectangle((ex - 1.75, 2.7), 3.5, 3.6, fc="#f3f3f3", ec="#888888", lw=1.0, ls="--", zorder=0))
    ax.text(ex - 1.95, 4.5, "N×", ha="right", va="center", fontsize=12, fontweight="bold")
    ax.text(ex + 0.1, 2.5, "EncoderLayer (x N = Encoder)", ha="left", fontsize=7.5, family="monospace",
            color=CODE)
    d.arrow((ex, 2.27), (ex, enc_ys[0] - bh / 2))
    _stack(d, ex, enc_ys, [("Multi-Head Attention", ATTN, "self_attn"), ("Add & Norm", NORM, "add_norm_1"),
                           ("Feed Forward", FFN, "ffn"), ("Add & Norm", NORM, "add_norm_2")], side=-1)

    dec_ys = [3.3, 4.15, 5.0, 5.85, 6.7, 7.55]
    ax.add_patch(Rectangle((dx - 1.75, 2.7), 3.5, 5.3, fc="#f3f3f3", ec="#888888", lw=1.0, ls="--", zorder=0))
    ax.text(dx - 1.95, 7.6, "N×", ha="right", va="center", fontsize=12, fontweight="bold")
    ax.text(dx + 0.1, 2.5, "DecoderLayer (x N = Decoder)", ha="left", fontsize=7.5, family="monospace",
            color=CODE)
    d.arrow((dx, 2.27), (dx, dec_ys[0] - bh / 2))
    _stack(d, dx, dec_ys, [("Masked Multi-Head\nAttention", ATTN, "self_attn,\ncausal_mask"),
                           ("Add & Norm", NORM, "add_norm_1"), ("Multi-Head Attention", ATTN, "cross_attn"),
                           ("Add & Norm", NORM, "add_norm_2"), ("Feed Forward", FFN, "ffn"),
                           ("Add & Norm", NORM, "add_norm_3")], side=1)
    # the encoder output (memory) gives the cross-attention its keys and values
    top = enc_ys[-1] + bh / 2
    d.path([(ex, top), (ex, 6.9), (5.6, 6.9), (5.6, dec_ys[2]), (dx - bw / 2, dec_ys[2])], color=CODE)
    ax.text(ex + 0.1, 7.0, "memory (B, S, C): the keys and values of cross-attention", fontsize=8, color=CODE,
            ha="left")

    d.arrow((dx, dec_ys[-1] + bh / 2), (dx, 8.95))
    d.box(dx, 9.2, bw, bh, "Linear", OUTC, fontsize=8.8)
    d.box(dx, 10.05, bw, bh, "Softmax", OUTC, fontsize=8.8)
    d.arrow((dx, 9.45), (dx, 9.8))
    d.arrow((dx, 10.3), (dx, 10.8))
    ax.text(dx, 11.0, "Output probabilities (B, T, V)", ha="center", fontsize=9)
    ax.text(dx + bw / 2 + 0.12, 9.2, "x @ embed.table.weight.T", fontsize=7.5, family="monospace", color=CODE,
            va="center")
    ax.text(dx + bw / 2 + 0.12, 10.05, "in the loss and\nthe decoding loop", fontsize=7.5, family="monospace",
            color=CODE, va="center")
    ax.text(ex, 10.4, "The Transformer (Figure 1 of the paper),\nredrawn; in blue the code of paper.py\n"
            "that is each part (Transformer, make_model)", ha="center", va="center", fontsize=10)
    _save(fig, path)


def paper_figure_2(path: Path) -> None:
    """Scaled dot-product attention and multi-head attention (the paper's Figure 2), with paper.py's code."""
    fig = Figure(figsize=(11.5, 6.0))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 15.4)
    ax.set_ylim(-0.3, 8.3)
    ax.axis("off")
    d = _Diagram(ax)
    bw, bh = 2.0, 0.48

    # left: scaled dot-product attention (paper.attention; the library's attention_reference is the same)
    x = 2.3
    ax.text(x, 7.85, "Scaled Dot-Product Attention", ha="center", fontsize=11, fontweight="bold")
    steps = [(1.6, "MatMul", "#d9d2ef", "q @ k.transpose(-2, -1)"), (2.7, "Scale", NORM, "/ math.sqrt(d_k)"),
             (3.8, "Mask (opt.)", "#f9d0d0", "masked_fill(~mask, -inf)"), (4.9, "SoftMax", "#c9e8c9",
                                                                             "softmax(dim=-1)"),
             (6.5, "MatMul", "#d9d2ef", "weights @ v")]
    for y, text, color, note in steps:
        d.box(x, y, bw, bh, text, color)
        ax.text(x + 1.75, y, note, fontsize=7.5, family="monospace", color=CODE, va="center")
    for (y0, *_), (y1, *_) in zip(steps, steps[1:]):
        d.arrow((x, y0 + bh / 2), (x, y1 - bh / 2))
    d.arrow((x, 6.5 + bh / 2), (x, 7.2))
    for label, qx in (("Q", x - 0.5), ("K", x + 0.5)):
        ax.text(qx, 0.35, label, ha="center", fontsize=11)
        d.arrow((qx, 0.6), (qx, 1.6 - bh / 2))
    ax.text(x + 1.4, 0.35, "V", ha="center", fontsize=11)
    d.path([(x + 1.4, 0.6), (x + 1.4, 6.0), (x + 0.5, 6.0), (x + 0.5, 6.5 - bh / 2)])
    ax.text(x, 7.45, "paper.attention (page 4)", fontsize=8, family="monospace", color=CODE, ha="center")

    # right: multi-head attention (paper.MultiHeadAttention)
    x = 9.6
    ax.text(x, 7.85, "Multi-Head Attention", ha="center", fontsize=11, fontweight="bold")
    for i, (label, lx) in enumerate((("V", x - 1.6), ("K", x), ("Q", x + 1.6))):
        ax.text(lx, 0.35, label, ha="center", fontsize=11)
        d.arrow((lx, 0.6), (lx, 1.4 - bh / 2))
        for k in (2, 1, 0):  # h copies, one per head, drawn as a stack
            d.box(lx + 0.08 * k, 1.4 + 0.08 * k, 1.3, bh, "Linear" if k == 0 else "", "#e5e5e5" if k else "#d5e8d4")
        d.arrow((lx, 1.4 + bh / 2), (x + (i - 1) * 0.6, 3.0 - bh / 2 - 0.1))
    for k in (2, 1, 0):
        d.box(x + 0.1 * k, 3.1 + 0.1 * k, 3.6, 0.7, "Scaled Dot-Product\nAttention" if k == 0 else "",
              "#ead7f2" if k == 0 else "#eeeeee")
    ax.text(x + 2.15, 3.45, "h", fontsize=12, fontweight="bold")
    d.box(x, 4.75, bw, bh, "Concat", NORM)
    d.box(x, 5.9, bw, bh, "Linear", "#d5e8d4")
    d.arrow((x, 3.45), (x, 4.75 - bh / 2))
    d.arrow((x, 4.75 + bh / 2), (x, 5.9 - bh / 2))
    d.arrow((x, 5.9 + bh / 2), (x, 7.2))
    notes = [(1.4, "w_v, w_k, w_q: each one (C, C)\nmatrix, all heads side by side", x + 2.5),
             (3.1, "attention(q, k, v, mask): heads\nare a batch axis, (B, H, T, D)", x + 2.45),
             (4.75, "transpose(1, 2).reshape(B, T, C)", x + 1.15), (5.9, "w_o: W^O", x + 1.15)]
    for y, note, nx in notes:
        ax.text(nx, y, note, fontsize=7.5, family="monospace", color=CODE, va="center")
    ax.text(x, 7.45, "paper.MultiHeadAttention (page 5)", fontsize=8, family="monospace", color=CODE, ha="center")
    _save(fig, path)


# ======================================================================== embeddings and positions


def embedding_scale(path: Path) -> None:
    """Page 2: one table, two jobs, on ``paper.py``'s model. At the input, a row times sqrt(C) is on the scale of
    the positional encoding; at the output, the small rows give logits of unit size. Sizes are root mean squares,
    as exercise 2.1 measures them."""
    C = 512
    torch.manual_seed(0)
    model = paper.make_model(1000, n_layers=2, d_model=C, d_ff=2048, n_heads=8, dropout=0.0).eval()
    E = model.embed.table.weight.detach()  # (V, C), entries N(0, 1/C)
    rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
    row, pe = E[123], paper.sinusoidal_positions(64, C)[10]
    fig = Figure(figsize=(11.5, 3.9), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.5, 1])
    dims = np.arange(64)
    left.plot(dims, pe[:64], color="0.6", lw=1.5, label=f"PE(pos = 10), rms {rms(pe):.3f}")
    scaled = row * math.sqrt(C)
    left.plot(dims, scaled[:64], color="C0", lw=1.3, label=f"√C · E[w], rms {rms(scaled):.2f}")
    left.plot(dims, row[:64], color="C3", lw=1.8, label=f"E[w] as initialised, rms {rms(row):.3f} ≈ C^-1/2")
    left.set_xlabel("dimension (the first 64 of C = 512)")
    left.set_title("Input side: what Embeddings and PositionalEncoding add together", fontsize=10)
    left.legend(frameon=False, fontsize=8, loc="lower left", ncols=3)
    left.set_ylim(-3.3, 2.6)
    left.grid(alpha=0.3)

    with torch.no_grad():
        src, tgt = torch.randint(3, 1000, (4, 20)), torch.randint(3, 1000, (4, 20))
        small = model(src, tgt)  # (B, T, V) = h @ E^T, h the decoder's output (after a LayerNorm)
        unit = small * math.sqrt(C)  # the same h against a table with unit entries
    bins = np.linspace(-80, 80, 81)
    right.hist(small.flatten().numpy(), bins=bins, color="C0", alpha=0.8, density=True,
               label=f"h Eᵀ, E entries C^-1/2: logit rms {rms(small):.2f}")
    right.hist(unit.flatten().numpy(), bins=bins, color="C3", alpha=0.6, density=True,
               label=f"if E had unit entries: rms {rms(unit):.1f}")
    right.set_yscale("log")
    right.set_xlabel("initial logit")
    right.set_title("Output side: logits = h Eᵀ, h from a LayerNorm", fontsize=10)
    right.legend(frameon=False, fontsize=8, loc="upper left")
    right.grid(alpha=0.3)
    fig.suptitle(f"One (V, C) table, two jobs (paper.py's make_model, C = {C}, as init_weights draws it)",
                 fontsize=11)
    _save(fig, path)


def positional_encoding(path: Path) -> None:
    """Page 3's picture, in page 3's notation: pair i holds dimensions 2i (sin) and 2i + 1 (cos)."""
    max_len, C = 100, 128
    table = sinusoidal_table(max_len, C).numpy()
    fig = Figure(figsize=(11.5, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.1, 1])
    image = left.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    left.set_xlabel("dimension 2i (sin) and 2i + 1 (cos), pair i = 0 .. 63")
    left.set_ylabel("position pos")
    left.set_title(f"PE: {max_len} positions x C = {C}", fontsize=10)
    fig.colorbar(image, ax=left, shrink=0.85)
    pos = np.arange(max_len)
    for i in (0, 4, 16, 48):
        wavelength = 2 * math.pi * 10000 ** (2 * i / C)
        right.plot(pos, table[:, 2 * i], lw=1.5, label=f"pair i = {i}: sin, wavelength {wavelength:,.0f}")
    right.set_xlabel("position pos")
    right.set_ylabel("PE(pos, 2i)")
    right.set_ylim(-1.15, 1.75)
    right.legend(loc="upper right", fontsize=8, ncols=2, frameon=False)
    right.set_title("dimension 2i of a few pairs: wavelengths 2π · 10000^(2i/C)", fontsize=10)
    right.grid(alpha=0.3)
    _save(fig, path)


# ================================================================= one attention computation, with numbers

# Three tokens, two heads of d_k = 4 (C = 8): head 1 uses columns 0-3 of Q, K and V, head 2 columns 4-7.
# The same numbers are on page 4, whose example recomputes them with attention_reference.
TOKENS = ["the", "cat", "sat"]
Q = torch.tensor([[1., 0, 1, 0, 0, 1, 0, 1], [0, 2, 0, 0, 1, 0, 1, 0], [1, 1, 0, 1, 0, 0, 2, 0]])
K = torch.tensor([[1., 0, 1, 0, 2, 0, 0, 0], [0, 1, 0, 1, 0, 0, 2, 0], [1, 1, 1, 1, 0, 2, 0, 2]])
V = torch.tensor([[1., 0, 0, 0, 2, 0, 1, 0], [0, 1, 0, 0, 0, 2, 0, 1], [0, 0, 1, 1, 1, 1, 1, 1]])


def _matrix(ax, m: np.ndarray, title: str, *, fmt: str = "{:g}", cmap: str = "Blues", rows: list[str] | None = None,
            vmax: float | None = None) -> None:
    """A small matrix drawn as a table of its numbers, shaded by value."""
    top = float(np.abs(m).max()) if vmax is None else vmax
    ax.imshow(m, cmap=cmap, vmin=-0.15 * top, vmax=1.6 * top if top else 1.0, aspect="equal")
    for (i, j), value in np.ndenumerate(m):
        ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8.5)
    ax.set_xticks([])
    ax.set_yticks(range(len(m)), rows if rows else [""] * len(m), fontsize=8.5)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9)


def attention_by_numbers(path: Path) -> None:
    """Equation 1 on 3 tokens, per head (d_k = 4), then the concatenation of the two heads."""
    D = 4
    fig = Figure(figsize=(15.5, 4.6))
    grid = fig.add_gridspec(2, 9, width_ratios=[4, 4, 4, 3, 3, 3, 4, 0.3, 8], left=0.04, right=0.99, top=0.8,
                            bottom=0.04, wspace=0.35, hspace=0.55)
    outputs = []
    for h in range(2):
        cols = slice(h * D, (h + 1) * D)
        q, k, v = Q[:, cols], K[:, cols], V[:, cols]  # (3, 4) each: this head's slice
        out, w = attention_reference(q[None, None], k[None, None], v[None, None])
        scores = q @ k.T
        outputs.append(out[0, 0])
        name = f"head {h + 1}"
        panels = [(q, f"{name}: Q[:, {h * D}:{h * D + D}]", "{:g}", "Blues"),
                  (k, f"K[:, {h * D}:{h * D + D}]", "{:g}", "Blues"),
                  (v, f"V[:, {h * D}:{h * D + D}]", "{:g}", "Greens"),
                  (scores, "scores Q Kᵀ", "{:g}", "Oranges"),
                  (scores / math.sqrt(D), "÷ √d_k = 2", "{:g}", "Oranges"),
                  (w[0, 0], "softmax (rows)", "{:.2f}", "Purples"),
                  (out[0, 0], "weights @ V", "{:.2f}", "Greens")]
        for c, (m, title, fmt, cmap) in enumerate(panels):
            _matrix(fig.add_subplot(grid[h, c]), m.numpy(), title, fmt=fmt, cmap=cmap,
                    rows=TOKENS if c in (0, 3) else None)
    concat = torch.cat(outputs, dim=-1)  # (3, 8)
    ax = fig.add_subplot(grid[:, 8])
    _matrix(ax, concat.numpy(), "Concat(head 1, head 2): (3, 8)\nthen × W^O (8 x 8)", fmt="{:.2f}", cmap="Greens",
            rows=TOKENS)
    ax.axvline(3.5, color="black", lw=2)
    ax.text(1.5, 2.85, "head 1", ha="center", va="top", fontsize=9)
    ax.text(5.5, 2.85, "head 2", ha="center", va="top", fontsize=9)
    fig.suptitle("softmax(Q Kᵀ / √d_k) V for three tokens, one row per token (query): "
                 "two heads of d_k = 4, each on its own columns, then concatenated", fontsize=11)
    _save(fig, path)


# ====================================================================== multi-head attention: the layout


def qkv_layout(path: Path) -> None:
    """Where each number of ``in_proj(x)`` goes: the (B, T, 3, H, D) view and the permute, and the
    tutorial bug of reshaping without moving the axes."""
    T, H, D = 3, 2, 3
    C = H * D
    hues = {0: ("#c6dbef", "#6baed6"), 1: ("#fdd0a2", "#fd8d3c"), 2: ("#c7e9c0", "#74c476")}  # q, k, v x head
    names = "QKV"
    # each number of the (T, 3C) output of in_proj for one sequence: (its position t, q/k/v, head)
    cells = [[(t, col // C, (col % C) // D) for col in range(3 * C)] for t in range(T)]
    flat = [c for row in cells for c in row]

    fig = Figure(figsize=(11.1, 3.9))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(-0.9, 26.0)
    ax.set_ylim(-6.6, 2.4)
    ax.set_aspect("equal")
    ax.axis("off")

    def block(x0: float, y0: float, rows: list[list[tuple[int, int, int]]], size: float = 0.5) -> None:
        for i, row in enumerate(rows):
            for j, (t, s, h) in enumerate(row):
                ax.add_patch(Rectangle((x0 + j * size, y0 - (i + 1) * size), size, size, fc=hues[s][h], ec="white",
                                       lw=0.8))
                ax.text(x0 + (j + 0.5) * size, y0 - (i + 0.5) * size, str(t), ha="center", va="center", fontsize=7)

    # 1. the projection: one row per position, [Q | K | V], each H heads of D numbers
    block(0, 0, cells)
    for s in range(3):
        for h in range(H):
            ax.text((s * C + h * D + D / 2) * 0.5, 0.15, f"{names[s]} h{h}", ha="center", va="bottom", fontsize=8)
    ax.text(0, 1.2, "in_proj(x): (B, T, 3C), one sequence shown: a row per position t\n"
            "(the number in a cell: the position it was computed from)", fontsize=9, va="bottom")
    for t in range(T):
        ax.text(-0.15, -(t + 0.5) * 0.5, f"t={t}", ha="right", va="center", fontsize=8)

    # 2. view(B, T, 3, H, D) names the layout; permute(2, 0, 3, 1, 4) -> (3, B, H, T, D)
    x0 = 10.8
    ax.text(x0, 1.2, "view(B, T, 3, H, D).permute(2, 0, 3, 1, 4): (3, B, H, T, D)\n"
            "each head gets a (T, D) matrix, one row per position", fontsize=9, va="bottom")
    for s in range(3):
        for h in range(H):
            rows = [[cells[t][s * C + h * D + d] for d in range(D)] for t in range(T)]
            bx, by = x0 + h * 2.2, -s * 2.1
            block(bx, by, rows)
            ax.text(bx + D * 0.25, by + 0.15, f"{names[s].lower()}, head {h}", ha="center", va="bottom", fontsize=8)

    # 3. the bug: the same numbers read as (B, 3, H, T, D) without moving any axis
    x0 = 20.6
    ax.text(x0, 0.85, "the bug: view(B, 3, H, T, D),\nno permute: a \"head\" mixes\npositions, heads, even Q and K",
            fontsize=9, va="bottom", color="#a50f15")
    for s in range(3):
        for h in range(H):
            start = (s * H + h) * T * D
            rows = [flat[start + t * D:start + (t + 1) * D] for t in range(T)]
            bx, by = x0 + h * 2.2, -s * 2.1
            block(bx, by, rows)
            ax.text(bx + D * 0.25, by + 0.15, f"\"{names[s].lower()}, head {h}\"", ha="center", va="bottom",
                    fontsize=8, color="#a50f15")
    ax.text(0, -2.6, f"T = {T} positions, H = {H} heads of D = {D}, C = H D = {C}.\nColours: Q blue, K orange, "
            "V green;\nlight head 0, dark head 1.\n\nOn the way out, the heads' outputs\n(B, H, T, D) are "
            "concatenated per\nposition by transpose(1, 2) then\nreshape(B, T, C); without the\n"
            "transpose, the same mixing.", fontsize=9, va="top")
    _save(fig, path)


# ====================================================================== masks, activations, layers


def masks(path: Path) -> None:
    """paper.py's padding mask, causal mask and their combination for a sentence of 3 tokens and 3 <pad>,
    True = may attend."""
    ids = torch.tensor([[5, 6, 7, 0, 0, 0]])  # 3 tokens + 3 padding
    pad = paper.padding_mask(ids, 0)[0, 0].expand(6, 6)  # (B, 1, 1, S) -> the (T, S) every query sees
    causal = paper.causal_mask(6)
    both = pad & causal
    fig = Figure(figsize=(9, 3.4), dpi=110, layout="constrained")
    for ax, (title, m) in zip(fig.subplots(1, 3), [("padding: 3 tokens, then 3 <pad>", pad),
                                                    ("causal (decoder)", causal), ("padding AND causal", both)]):
        ax.imshow(m.numpy(), cmap="Greens", vmin=0, vmax=1.4)
        for (i, j), v in np.ndenumerate(m.numpy()):
            ax.text(j, i, "1" if v else "0", ha="center", va="center", fontsize=8)  # not T/F: T is a length
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
    fig.suptitle("mask[i, j] = 1 (True): query i may attend to key j (0, False: score set to -inf before softmax)")
    _save(fig, path)


def activations(path: Path) -> None:
    """ReLU (paper), GELU and SwiGLU's gate as used by FeedForward."""
    x = torch.linspace(-4, 4, 400)
    fig = Figure(figsize=(6, 3.6), dpi=110, layout="constrained")
    ax = fig.subplots()
    ax.plot(x, torch.relu(x), label="ReLU (paper, §3.3)")
    ax.plot(x, torch.nn.functional.gelu(x), label="GELU (BERT, GPT-2)")
    ax.plot(x, torch.nn.functional.silu(x), label="SiLU = the gate of SwiGLU (LLaMA)")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title("FFN(x) = act(x W1 + b1) W2 + b2: the activation")
    _save(fig, path)


def _gpt_layer_gradients(norm: str, stream_scale: float = 1.0) -> list[float]:
    """Norm of the gradient of all parameters of each layer of a fresh 12-layer GPT (Hugging Face's GPT-2 init)."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="gpt", vocab_size=100, d_model=64, n_heads=4, n_layers=12, d_ff=256,
                                    max_len=64, norm=norm, dropout=0.0))
    if stream_scale != 1.0:  # multiply what the embeddings hand to the first layer
        model.embed.register_forward_hook(lambda module, args, out: out * stream_scale)
    ids = torch.randint(4, 100, (8, 64))
    F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item() for layer in model.decoder.layers]


def _ffn_w2_gradients(norm: str, seeds: int = 4) -> tuple[list[float], list[float]]:
    """Xiong et al.'s measure on the paper's family: the norm of the gradient of each layer's second
    feed-forward matrix W_2, averaged over a few initialisations and random batches: (encoder, decoder)."""
    enc, dec = np.zeros(6), np.zeros(6)
    for seed in range(seeds):
        torch.manual_seed(seed)
        model = build_model(ModelConfig(arch="seq2seq", vocab_size=1000, d_model=128, n_heads=4, n_layers=6, d_ff=512,
                                        max_len=64, norm=norm, dropout=0.0))
        src, tgt = torch.randint(4, 1000, (16, 32)), torch.randint(4, 1000, (16, 33))
        F.cross_entropy(model(src, tgt[:, :-1]).flatten(0, 1), tgt[:, 1:].flatten()).backward()
        enc += [layer.ffn.linear2.weight.grad.norm().item() for layer in model.encoder.layers]
        dec += [layer.ffn.linear2.weight.grad.norm().item() for layer in model.decoder.layers]
    return list(enc / seeds), list(dec / seeds)


def norm_gradients(path: Path) -> None:
    """Gradients at initialisation, post-LN vs pre-LN: Xiong et al.'s measure on the paper's model (left),
    and why a GPT-2-initialised pre-LN model gets larger gradients everywhere (right)."""
    fig = Figure(figsize=(11.5, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for i, norm in enumerate(("post", "pre")):
        enc, dec = _ffn_w2_gradients(norm)
        left.plot(range(1, 7), dec, marker="o", color=f"C{i}", label=f"{norm}-LN, decoder layers")
        left.plot(range(1, 7), enc, marker="s", ls="--", alpha=0.6, color=f"C{i}", label=f"{norm}-LN, encoder layers")
    left.set_xlabel("layer (1 = next to the embeddings, 6 = next to the output)")
    left.set_ylabel("‖∂L/∂W₂‖ of the layer's feed-forward")
    left.set_title("The paper's model (6 + 6 layers, C = 128, Xavier init):\nXiong et al.'s measure, mean of 4 inits",
                   fontsize=10)
    left.set_ylim(0, None)
    left.legend(frameon=False, fontsize=8)
    left.grid(alpha=0.3)

    for i, (label, norm, scale) in enumerate([("post-LN", "post", 1.0), ("pre-LN", "pre", 1.0),
                                              ("pre-LN, stream x 36 (σ ≈ 1)", "pre", 1 / 0.028)]):
        right.plot(range(1, 13), _gpt_layer_gradients(norm, scale), marker="o", color=f"C{i}",
                   ls=":" if scale != 1.0 else "-", label=label)
    right.set_yscale("log")
    right.set_yticks([0.01, 0.02, 0.05, 0.1, 0.2, 0.5], ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5"])
    right.yaxis.set_minor_formatter(NullFormatter())
    right.set_xlabel("layer (1 = next to the embeddings)")
    right.set_ylabel("gradient norm of all the layer's weights")
    right.set_title("GPT (12 layers, C = 64, Hugging Face's GPT-2 init: token and\nposition tables std 0.02, "
                    "so the residual stream starts at σ ≈ 0.028)", fontsize=10)
    right.legend(frameon=False, fontsize=8)
    right.grid(alpha=0.3, which="both")
    _save(fig, path)


def copy_task(out: Path) -> None:
    """Train the copy task briefly; draw the cross-attention before and after, and the loss curve."""
    settings = resolve(overrides=dict(task="copy", d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0,
                                      max_steps=600, batch_size=64, lr=3e-3, warmup_steps=60, eval_every=100,
                                      n_test=100, eval_decode=100, log_every=20, seed=0))
    cfg = settings.train
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "copy-task"  # the curves' title names the run folder
        result = train(settings, run, echo=lambda s: None)
        viz.plot_curves(run, out / "copy_curves.png", metrics=("loss",))
        model, tok = result.model.eval(), result.task.tokenizer
        text = "cabbagehij"  # the copy task's alphabet is a..j
        src = torch.tensor([tok.encode(text, add_eos=True)])  # sources end with <eos>, as in training
        tgt = torch.tensor([[BOS_ID] + tok.encode(text)])
        labels = list(text)
        keys = labels + ["<eos>"]
        maps = viz.attention_maps(model, src, tgt)
        viz.plot_attention(maps, out / "copy_cross_attention_trained.png", query_tokens=["<bos>"] + labels,
                           key_tokens=keys, kind="decoder.cross_attn",
                           title=f"trained copy model ({cfg.max_steps} steps): cross-attention on {text!r}")
        viz.plot_attention(maps, out / "copy_encoder_self_attention.png", query_tokens=keys, kind="encoder.self_attn",
                           title=f"the same model: encoder self-attention on {text!r}")
        viz.plot_attention(maps, out / "copy_decoder_self_attention.png", query_tokens=["<bos>"] + labels,
                           kind="decoder.self_attn",
                           title=f"the same model: decoder (masked) self-attention on {text!r}")
        torch.manual_seed(0)
        fresh = build_model(result.model_config)
        maps = viz.attention_maps(fresh, src, tgt)
        viz.plot_attention(maps, out / "copy_cross_attention_untrained.png", query_tokens=["<bos>"] + labels,
                           key_tokens=keys, kind="decoder.cross_attn",
                           title="the same model before training: cross-attention is close to uniform")


# ============================================================================ §4: why self-attention


def _saved_for_backward(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, params: set[int]) -> int:
    """Bytes of the activations a training step keeps for the backward pass (weights not counted)."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(x)
    return sum(storages.values())


def _seconds(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, repeats: int = 5) -> float:
    """Forward + backward of one layer, best of ``repeats`` (the machine is shared: the best is the least
    disturbed)."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x).sum().backward()
        best = min(best, time.perf_counter() - start)
    return best


def why_self_attention(path: Path) -> None:
    """§4, measured: one layer of each kind, d = 256, one sequence of n tokens, on the CPU with one thread:
    forward + backward time, and the activation memory kept for the backward pass."""
    torch.set_num_threads(1)
    d, lengths = 256, [64, 128, 256, 512, 1024, 2048, 4096]
    reference, fused = MultiHeadAttention(d, 4), MultiHeadAttention(d, 4)
    reference.impl, fused.impl = "reference", "sdpa"
    rnn, conv = torch.nn.RNN(d, d, batch_first=True), torch.nn.Conv1d(d, d, kernel_size=3, padding=1)
    layers = {
        "self-attention, reference path (stores the n x n weights)": lambda x: reference(x),
        "self-attention, fused F.scaled_dot_product_attention": lambda x: fused(x),
        "recurrent (nn.RNN, tanh): n sequential steps": lambda x: rnn(x)[0],
        "convolution (nn.Conv1d, kernel 3)": lambda x: conv(x.transpose(1, 2)).transpose(1, 2),
    }
    params = {p.untyped_storage().data_ptr() for m in (reference, fused, rnn, conv) for p in m.parameters()}
    times: dict[str, list[float]] = {name: [] for name in layers}
    memory: dict[str, list[float]] = {name: [] for name in layers}
    for n in lengths:
        torch.manual_seed(0)
        x = torch.randn(1, n, d, requires_grad=True)
        for name, fn in layers.items():
            times[name].append(_seconds(fn, x) * 1e3)
            memory[name].append(_saved_for_backward(fn, x, params) / 2 ** 20)
    print(f"{'n':>6} " + " | ".join(f"{k.split(',')[0].split(' (')[0][:14]:>14} ms  MiB" for k in layers))
    for i, n in enumerate(lengths):
        print(f"{n:>6} " + " | ".join(f"{times[k][i]:>14.1f} {memory[k][i]:>6.1f}" for k in layers))

    fig = Figure(figsize=(11.5, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    styles = ["-o", "--o", "-s", "-^"]
    for style, name in zip(styles, layers):
        left.plot(lengths, times[name], style, label=name, ms=4)
        right.plot(lengths, memory[name], style, label=name, ms=4)
    for ax, values in ((left, times), (right, memory)):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (d = 256, batch 1)")
        ax.grid(alpha=0.3, which="both")
        ax.set_xticks(lengths, [str(n) for n in lengths])
        # slope guides: n^2 through the reference attention's last point, n through the recurrent layer's
        quadratic, linear = values[next(iter(layers))][-1], values[list(layers)[2]][-1]
        ax.plot(lengths, [quadratic * (n / lengths[-1]) ** 2 for n in lengths], color="0.7", lw=1, ls=":")
        ax.plot(lengths, [linear * n / lengths[-1] for n in lengths], color="0.7", lw=1, ls="-.")
    left.set_ylabel("forward + backward, ms (best of 5)")
    left.set_title("time of one layer (CPU, one thread; grey: slopes of n² and n)", fontsize=10)
    right.set_ylabel("activations kept for backward, MiB")
    right.set_title("memory of one layer", fontsize=10)
    left.legend(frameon=False, fontsize=7.5, loc="upper left")
    _save(fig, path)


# ============================================================================================ training


def label_smoothing(path: Path) -> None:
    """Page 10: the smoothed target of one position, and the loss it gives against the probability the
    model puts on the correct token, computed with F.cross_entropy as the training loss does."""
    V, eps, y = 10, 0.1, 3
    fig = Figure(figsize=(11.5, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    target = torch.full((V,), eps / V)
    target[y] = 1 - eps + eps / V
    left.bar(np.arange(V) - 0.2, F.one_hot(torch.tensor(y), V).float().numpy(), width=0.4, color="0.7",
             label="one-hot (ε = 0)")
    left.bar(np.arange(V) + 0.2, target.numpy(), width=0.4, color="C0", label=f"smoothed, ε = {eps}")
    left.text(y + 0.45, target[y].item(), f"1 − ε + ε/V = {target[y]:.2f}", va="center", fontsize=9)
    left.text(6.2, 0.08, f"ε/V = {eps / V:.2f} each", fontsize=9, color="C0")
    left.set_xticks(range(V), [f"{k}" + ("\n(y)" if k == y else "") for k in range(V)])
    left.set_xlabel(f"token k (V = {V}), correct token y = {y}")
    left.set_ylabel("target probability q(k)")
    left.set_title("The target of one position (§5.4)", fontsize=10)
    left.legend(frameon=False, fontsize=8, loc="upper right")

    p = torch.linspace(0.3, 0.9999, 400)  # probability the model gives the correct token, the rest spread evenly
    probs = ((1 - p)[:, None] / (V - 1)).repeat(1, V)
    probs[:, y] = p
    logits, labels = probs.log(), torch.full((len(p),), y)
    for s, color in ((0.0, "0.5"), (eps, "C0")):
        loss = F.cross_entropy(logits, labels, label_smoothing=s, reduction="none")
        right.plot(p.numpy(), loss.numpy(), color=color, label=f"label_smoothing = {s}")
        best = int(loss.argmin())
        if s:
            right.plot(p[best], loss[best], "o", color=color)
            right.annotate(f"lowest at p = {p[best]:.2f}", (p[best].item(), loss[best].item()), xytext=(-110, 25),
                           textcoords="offset points", fontsize=9, arrowprops=dict(arrowstyle="->", color=color))
    right.set_xlabel("probability the model gives the correct token (the rest spread evenly)")
    right.set_ylabel("loss of the position")
    right.set_ylim(0, 1.3)
    right.set_title("The loss no longer rewards certainty", fontsize=10)
    right.legend(frameon=False, fontsize=8)
    right.grid(alpha=0.3)
    _save(fig, path)


def lr_schedules(path: Path) -> None:
    """Page 10: equation 3 for several (d_model, warm-up) pairs, computed by ``lr_at``."""
    steps = np.arange(0, 20_000, 10)
    fig = Figure(figsize=(8.5, 4.0), layout="constrained")
    ax = fig.subplots()
    for d, warmup in ((512, 4000), (512, 8000), (256, 4000), (1024, 4000)):
        cfg = TrainConfig(schedule="inverse_sqrt", lr=d ** -0.5 * warmup ** -0.5, warmup_steps=warmup,
                          max_steps=20_000)
        lrs = [lr_at(int(s), cfg) for s in steps]
        ax.plot(steps + 1, lrs, lw=1.8, label=f"d_model = {d}, warm-up = {warmup:,}: peak {max(lrs):.1e}")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.set_xlim(0, 20_000)
    ax.set_ylim(0, None)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.set_title("lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)  (§5.3, equation 3)", fontsize=10)
    ax.legend(frameon=False, fontsize=9)
    ax.grid(alpha=0.3)
    _save(fig, path)


# ============================================================================ page 14: the Vision Transformer


def digit_patches(path: Path) -> None:
    """Page 14: an 8 x 8 digit cut into 16 patches of 2 x 2 (``patchify``), laid out as the sequence the
    encoder reads, the class token first, and the flattened patches that ``PatchEmbedding`` maps to C."""
    from scratchformer.data.images import as_input, load_digits
    from scratchformer.nn.patches import patchify

    pixels, digit = load_digits()["test"][0]
    image = as_input(pixels)  # (1, 8, 8)
    patches = patchify(image[None], 2)[0]  # (16, 4)
    fig = Figure(figsize=(12, 3.2), dpi=DPI, layout="constrained")
    left, middle, right = fig.subfigures(1, 3, width_ratios=[1, 2.6, 1.1])
    ax = left.subplots()
    ax.imshow(image[0], cmap="gray_r", vmin=0, vmax=1)
    for edge in (1.5, 3.5, 5.5):
        ax.axhline(edge, color="tab:red", lw=1.5)
        ax.axvline(edge, color="tab:red", lw=1.5)
    for k in range(16):
        ax.text(2 * (k % 4) - 0.35, 2 * (k // 4) - 0.3, str(k + 1), color="tab:red", fontsize=7, ha="left",
                va="top", bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.5))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(f"a digit ({digit}), 8 x 8 pixels:\n16 patches of 2 x 2", fontsize=10)
    ax = middle.subplots()
    for k in range(17):  # one tile per position, 1.25 units apart
        tile = np.full((2, 2), 0.35) if k == 0 else patches[k - 1].view(2, 2).numpy()
        ax.imshow(tile, cmap="Blues" if k == 0 else "gray_r", vmin=0, vmax=1, extent=(1.25 * k, 1.25 * k + 1, 0, 1))
        ax.add_patch(Rectangle((1.25 * k, 0), 1, 1, fill=False, lw=0.8))
        ax.text(1.25 * k + 0.5, -0.3, str(k), ha="center", va="center", fontsize=9)
    ax.text(0.5, 0.5, "cls", ha="center", va="center", fontsize=9)
    ax.set_xlim(-0.2, 1.25 * 16 + 1.2)
    ax.set_ylim(-0.6, 1.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("the sequence the encoder reads: the class token, then the patches\nin reading order "
                 "(positions 0, 1, ..., 16)", fontsize=10)
    ax = right.subplots()
    ax.imshow(patches, cmap="gray_r", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(4))
    ax.set_yticks([0, 15], ["1", "16"])
    ax.set_xlabel("pixel of the patch")
    ax.set_ylabel("patch")
    ax.set_title("patchify: (16, 4)\n@ E (4, C) + b -> (16, C)", fontsize=10)
    _save(fig, path)


# ============================================================================ page 17: today's open models

QWEN3_06B = dict(arch="gpt", vocab_size=151936, d_model=1024, n_heads=16, n_kv_heads=8, head_size=128, n_layers=28,
                 d_ff=3072, max_len=40960, positional="rotary", norm_type="rmsnorm", activation="swiglu",
                 qk_norm=True, bias=False)


def _cache_mib(kv_heads: int, tokens: int) -> float:
    """The KV cache of Qwen3-0.6B's shape with ``kv_heads`` heads of keys and values, for ``tokens`` tokens in
    bfloat16: made by the model's own ``new_cache`` on the meta device (sizes without memory)."""
    with torch.device("meta"):
        model = build_model(ModelConfig(**{**QWEN3_06B, "n_kv_heads": kv_heads})).to(torch.bfloat16)
        cache = model.new_cache(1, tokens)
    return sum(c.keys.numel() * c.keys.element_size() * 2 for c in cache.self_attn) / 2**20


def open_models(path: Path) -> None:
    """Page 17: grouped-query attention (which query heads share which keys and values), the KV cache it saves
    at Qwen3-0.6B's shape, and Llama 3's rotary scaling of each dimension pair's frequency."""
    from scratchformer.nn.embedding import rotary_frequencies

    fig = Figure(figsize=(13, 3.6), dpi=DPI, layout="constrained")
    heads, groups, bars = fig.subplots(1, 3, width_ratios=[1.25, 1, 1.1])
    H, colours = 8, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                     "tab:olive"]
    for row, (name, kv) in enumerate([("multi-head (the paper)", 8), ("grouped-query", 2), ("multi-query", 1)]):
        y = 1.5 * (2 - row)
        for h in range(H):
            g = h // (H // kv)
            heads.add_patch(Rectangle((h, y + 0.45), 0.8, 0.35, color=colours[g], alpha=0.85))
            heads.plot([h + 0.4, g * (H / kv) + (H / kv) / 2 - 0.1], [y + 0.45, y + 0.15], color="0.5", lw=0.8)
        for g in range(kv):
            width = H / kv - 0.2
            heads.add_patch(Rectangle((g * H / kv, y - 0.2), width, 0.35, color=colours[g], alpha=0.45))
        heads.text(-0.3, y + 0.25, f"{name}\nH_kv = {kv}", ha="right", va="center", fontsize=9)
    heads.set_xlim(-3.4, 8)
    heads.set_ylim(-0.4, 3.9)
    heads.axis("off")
    heads.set_title("8 query heads (top of each row) read\nH_kv heads of keys and values (below)", fontsize=10)
    tokens = 32768
    sizes = [(f"{kv}", _cache_mib(kv, tokens)) for kv in (16, 8, 4, 1)]
    groups.bar([n for n, _ in sizes], [m / 1024 for _, m in sizes], color=["0.6", "tab:blue", "0.75", "0.75"])
    for i, (_, m) in enumerate(sizes):
        groups.text(i, m / 1024, f"{m / 1024:.2f} GiB", ha="center", va="bottom", fontsize=8)
    groups.set_xlabel("H_kv (Qwen3-0.6B: 16 query heads, H_kv = 8)")
    groups.set_ylabel("GiB")
    groups.set_title(f"KV cache for {tokens:,} tokens, bfloat16:\n2 x 28 layers x H_kv x 128 x 2 bytes a token",
                     fontsize=10)
    D, base = 128, 500000.0
    inv = rotary_frequencies(D, base)
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}
    wavelength = (2 * math.pi / inv).numpy()
    bars.loglog(wavelength, inv.numpy(), label="Llama 3 (rope_theta 500,000)", color="0.5")
    bars.loglog(wavelength, rotary_frequencies(D, base, scaling).numpy(), label="Llama 3.1: llama3 scaling",
                color="tab:blue")
    for edge, text in ((8192 / 4.0, "8192 / high_freq_factor"), (8192 / 1.0, "8192 / low_freq_factor")):
        bars.axvline(edge, color="tab:red", lw=0.8, ls="--")
        bars.text(edge * 0.9, 1e-6, text, rotation=90, fontsize=7, ha="right", va="bottom", color="tab:red")
    bars.set_xlabel("wavelength of the dimension pair (positions)")
    bars.set_ylabel("frequency (radians per position)")
    bars.legend(fontsize=8, loc="upper right")
    bars.set_title("rotary frequencies of D = 128: slow pairs\ndivided by factor 8, fast ones kept", fontsize=10)
    _save(fig, path)


def lora(path: Path) -> None:
    """Page 18: test accuracy on SST-2 against the weights that train (the head alone, LoRA rank 8, every weight),
    with seconds a step and the checkpoint's size: the rows of RESULTS.md's LoRA table (bench/speed/lora_sst2.py)."""
    text = (OUT.parents[1] / "RESULTS.md").read_text(encoding="utf-8")
    section = text[text.index("<!-- lora table -->"):text.index("<!-- /lora table -->")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| configuration")]
    number = lambda cell: float(cell.split()[0].replace(",", ""))  # noqa: E731
    fig = Figure(figsize=(10, 3.6), dpi=DPI, layout="constrained")
    accuracy, cost = fig.subplots(1, 2, width_ratios=[1.3, 1])
    colours = {"full": "0.4", "lora": "tab:blue", "lora-all": "lightsteelblue", "head": "tab:orange"}
    for name, trained, acc, _, _, size in (r[:6] for r in rows):
        point = (number(trained), number(acc))
        accuracy.scatter(*point, s=60, color=colours.get(name.split()[0], "0.6"), zorder=3)
        accuracy.annotate(f"{name.split(' (')[0]}: {point[1]:.2f} %\n{size} checkpoint", point,
                          textcoords="offset points", xytext=(8, -4), fontsize=8)
    accuracy.set_xscale("log")
    accuracy.set_xlim(3e2, 2e8)
    accs = [number(r[2]) for r in rows]
    accuracy.set_ylim(min(accs) - 1, max(accs) + 1.5)
    accuracy.set_xlabel("weights that train (log scale)")
    accuracy.set_ylabel("test accuracy (%)")
    accuracy.grid(alpha=0.3)
    accuracy.set_title("SST-2 from all-MiniLM-L6-v2, the same steps: what trains", fontsize=10)
    names = [r[0].split(" (")[0] for r in rows]
    cost.bar(names, [number(r[3]) for r in rows], color=[colours.get(n, "0.6") for n in names])
    for i, r in enumerate(rows):
        cost.text(i, number(r[3]), f"{number(r[3]):.3f} s", ha="center", va="bottom", fontsize=8)
    cost.set_ylabel("seconds a training step (2 CPU threads)")
    cost.set_title("a step: the frozen weights need no gradient\nand no optimizer state", fontsize=10)
    _save(fig, path)


def _table(text: str, name: str) -> list[list[str]]:
    """The body rows of the Markdown table between ``<!-- NAME -->`` and ``<!-- /NAME -->`` in ``text``."""
    section = text[text.index(f"<!-- {name} -->"):text.index(f"<!-- /{name} -->")]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def instructions(path: Path) -> None:
    """Page 19: the validation loss of instruction tuning from a pretrained GPT and from random weights (with the
    unigram floor), and SST-2's test accuracy of the GPT classifier from each (with the bag of words): RESULTS.md's
    tables of the section "A GPT pretrained here, then fine-tuned"."""
    text = (OUT.parents[1] / "RESULTS.md").read_text(encoding="utf-8")
    number = lambda cell: float(cell.replace("*", "").split()[0].replace(",", ""))  # noqa: E731
    curves, runs, classifiers = (_table(text, n) for n in ("instruct curves", "instruct table", "gpt classifier table"))
    fig = Figure(figsize=(10, 3.6), dpi=DPI, layout="constrained")
    loss, acc = fig.subplots(1, 2, width_ratios=[1.3, 1])
    steps = [number(r[0]) for r in curves]
    for column, label, colour in ((1, "from the GPT pretrained on Tiny Shakespeare", "tab:blue"),
                                  (2, "from random weights (same model, tokenizer, settings)", "tab:orange")):
        loss.plot(steps, [number(r[column]) for r in curves], marker="o", ms=3, color=colour, label=label)
    unigram = next(number(r[1]) for r in runs if r[0].startswith("unigram"))
    loss.axhline(unigram, color="0.5", ls="--", lw=1, label=f"unigram of the answers' tokens ({unigram:.2f})")
    loss.set_ylim(top=unigram + 0.3)
    loss.set_xlabel("fine-tuning step (8 records each)")
    loss.set_ylabel("validation loss per answer token")
    loss.set_title("instruction tuning (dataset=instructions): the loss on the answers", fontsize=10)
    loss.legend(fontsize=8, loc="center right")
    loss.grid(alpha=0.3)
    names = ["GPT, pretrained", "GPT, random start", "bag of words"][:len(classifiers)]  # the table's rows, in order
    values = [number(r[2]) for r in classifiers]
    acc.bar(names, values, color=["tab:blue", "tab:orange", "0.6"][:len(names)])
    for i, v in enumerate(values):
        acc.text(i, v, f"{v:.2f} %", ha="center", va="bottom", fontsize=8)
    acc.set_ylim(min(values) - 10, max(values) + 3)
    acc.set_ylabel("SST-2 test accuracy (%)")
    acc.set_title("a GPT classifier (its last real token)", fontsize=10)
    acc.tick_params(axis="x", labelsize=8)
    _save(fig, path)


def benchmarks(path: Path) -> None:
    """Page 20: the scores of the models trained here on ARC, HellaSwag and MMLU (``acc`` and ``acc_norm``, each with
    its standard error) beside the chance level: RESULTS.md's table of the section "Benchmarks"."""
    text = (OUT.parents[1] / "RESULTS.md").read_text(encoding="utf-8")
    rows = _table(text, "benchmarks table")
    models = list(dict.fromkeys(r[0].strip("`") for r in rows))
    fig = Figure(figsize=(10, 3.4), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, model in zip(axes, models):
        mine = [r for r in rows if r[0].strip("`") == model]
        x = np.arange(len(mine))
        for shift, column, label, colour in ((-0.2, 4, "acc", "tab:blue"), (0.2, 5, "acc_norm", "tab:orange")):
            cells = [r[column].split("±") for r in mine]
            have = [i for i, c in enumerate(cells) if c[0].strip() not in ("-", "")]
            ax.bar(x[have] + shift, [float(cells[i][0]) for i in have], 0.38, color=colour, label=label,
                   yerr=[float(cells[i][1]) if len(cells[i]) > 1 else 0 for i in have], capsize=3)
        ax.scatter(x, [float(r[6]) for r in mine], marker="_", s=900, color="black", zorder=3, label="chance")
        ax.set_xticks(x, [f"{r[1]}\n({int(r[3].replace(',', '')):,} q.)" for r in mine], fontsize=8)
        ax.set_ylim(0, 50)
        ax.set_ylabel("score (%)")
        ax.set_title(f"{model} (RESULTS.md: the questions taken)", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(axis="y", alpha=0.3)
def preferences(path: Path) -> None:
    """Page 22: DPO's reward margin and reward accuracy over training, the training batches' (means of 10 steps) and
    the validation split's: RESULTS.md's table "dpo curves" (the section "Preference tuning (DPO) of the
    assistant")."""
    text = (OUT.parents[1] / "RESULTS.md").read_text(encoding="utf-8")
    number = lambda cell: float(cell.replace("*", "").replace("%", "").split()[0])  # noqa: E731
    rows = _table(text, "dpo curves")
    train = [(number(r[0].split("-")[-1]), number(r[2]), number(r[3])) for r in rows if r[2] != "-"]
    val = [(number(r[0].split("-")[-1]), number(r[4]), number(r[5])) for r in rows if r[4] != "-"]
    fig = Figure(figsize=(10, 3.4), dpi=DPI, layout="constrained")
    margin, accuracy = fig.subplots(1, 2)
    for ax, column, label in ((margin, 1, "reward margin r(chosen) - r(rejected)"),
                              (accuracy, 2, "reward accuracy (%)")):
        ax.plot([t[0] for t in train], [t[column] for t in train], marker="o", ms=3, color="tab:blue",
                label="training batches (mean of 10 steps)")
        ax.plot([v[0] for v in val], [v[column] for v in val], marker="s", ms=5, color="tab:orange",
                label="validation split (55 pairs)")
        ax.set_xlabel("DPO step (8 pairs each)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    margin.set_title("the margin grows from 0: the policy starts as its reference", fontsize=10)
    accuracy.set_ylim(0, 100)
    accuracy.set_title("the share of pairs whose chosen answer has the higher reward", fontsize=10)
    _save(fig, path)


FIGURES: dict[str, Callable[[], None]] = {
    "model_map": lambda: first_read.model_map(OUT / "model_map.png"),
    "training_step": lambda: first_read.training_step(OUT / "training_step.png"),
    "paper_figure_1": lambda: paper_figure_1(OUT / "paper_figure_1.png"),
    "paper_figure_2": lambda: paper_figure_2(OUT / "paper_figure_2.png"),
    "attention_by_numbers": lambda: attention_by_numbers(OUT / "attention_by_numbers.png"),
    "qkv_layout": lambda: qkv_layout(OUT / "qkv_layout.png"),
    "embedding_scale": lambda: embedding_scale(OUT / "embedding_scale.png"),
    "positional_encoding": lambda: positional_encoding(OUT / "positional_encoding.png"),
    "masks": lambda: masks(OUT / "masks.png"),
    "activations": lambda: activations(OUT / "activations.png"),
    "norm_gradients": lambda: norm_gradients(OUT / "norm_gradients.png"),
    "why_self_attention": lambda: why_self_attention(OUT / "why_self_attention.png"),
    "label_smoothing": lambda: label_smoothing(OUT / "label_smoothing.png"),
    "lr_schedules": lambda: lr_schedules(OUT / "lr_schedules.png"),
    "copy_task": lambda: copy_task(OUT),
    "digit_patches": lambda: digit_patches(OUT / "digit_patches.png"),
    "open_models": lambda: open_models(OUT / "open_models.png"),
    "lora": lambda: lora(OUT / "lora.png"),
    "instructions": lambda: instructions(OUT / "instructions.png"),
    "benchmarks": lambda: benchmarks(OUT / "benchmarks.png"),
    "preferences": lambda: preferences(OUT / "preferences.png"),
    # from trained models (figures_learner.py): a pretrained English encoder, and a translation model trained here
    "qkv_by_numbers": lambda: learner.qkv_by_numbers(OUT / "qkv_by_numbers.png"),
    "self_attention_sentence": lambda: learner.self_attention_sentence(OUT / "self_attention_sentence.png"),
    "translation_steps": lambda: learner.translation_steps(OUT / "translation_steps.png"),
    "translation_attentions": lambda: learner.translation_attentions(OUT / "translation_attentions.png"),
}


def main(argv: list[str]) -> int:
    if "--list" in argv:
        print("\n".join(FIGURES))
        return 0
    unknown = [a for a in argv if a not in FIGURES]
    if unknown:
        print(f"unknown figure {unknown[0]!r}; --list prints the names", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    began = time.time()
    for name in argv or FIGURES:
        torch.manual_seed(0)
        start = time.perf_counter()
        FIGURES[name]()
        print(f"{name}: {time.perf_counter() - start:.1f} s")
    for png in sorted(OUT.glob("*.png")):
        if png.stat().st_mtime >= began - 1:  # written by this run (some by scratchformer.viz)
            _shrink(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
