"""Where a Vision Transformer looks: the class token's attention over the image, patch by patch.

A ViT classifies from its class token's final state, and the class token gathers what it knows by attending
to the patches. ``class_token_attention`` takes that row of every layer's and every head's attention map
(``attention_maps``, the reference path), ``(L, H, 1 + N)``; ``plot_image_attention`` draws it over the
image: one row per layer, its first panel the mean of the heads, then each head; and on top, the image alone
and the *attention rollout* (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"), the
attention carried through every layer with the residual connection counted as attention to oneself::

    A_l = (mean over heads of layer l's attention + I) / 2,   R = A_L ... A_2 A_1,   shown: R[class token, patches]

Each panel's colours run from 0 to its own largest patch weight (a layer that looks at one patch and a layer
that spreads evenly would otherwise not both be readable); the panel's title gives the weight the class
token keeps on itself, which no patch shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from scratchformer.app.plots.common import new_figure, save
from scratchformer.checkpoints import Checkpoint
from scratchformer.data.images import as_input, read_image
from scratchformer.models import ViT
from scratchformer.nn.recording import attention_maps

__all__ = ["attention_rollout", "class_token_attention", "plot_checkpoint_image_attention", "plot_image_attention",
           "vit_attention"]

MAX_LAYERS = 6
MAX_HEADS = 8
PANEL_INCHES = 1.55
ALPHA = 0.7  # opacity of the attention over the grey image


def vit_attention(model: ViT, images: Tensor) -> Tensor:
    """Every layer's and head's self-attention, ``(L, H, 1 + N, 1 + N)``, for the first image of ``images (B, ch,
    S, S)`` (floats in [0, 1]); position 0 is the class token, 1..N the patches in reading order."""
    maps = attention_maps(model, images)  # {"encoder.layers.i.self_attn": (B, H, 1 + N, 1 + N)}
    return torch.stack([maps[f"encoder.layers.{i}.self_attn"][0] for i in range(len(model.encoder.layers))])


def class_token_attention(model: ViT, images: Tensor) -> Tensor:
    """The class token's row of ``vit_attention``, ``(L, H, 1 + N)``: entry 0 is its weight on itself."""
    return vit_attention(model, images)[:, :, 0]


def attention_rollout(maps: Tensor) -> Tensor:
    """Attention rollout of full maps ``(L, H, T, T)`` -> ``(T, T)``: how much each position's final state draws
    on each input position, the residual path counted as half of every layer's attention."""
    T = maps.size(-1)
    rollout = torch.eye(T)
    for layer in maps.float().mean(1):  # (T, T), the heads averaged
        mixed = 0.5 * layer + 0.5 * torch.eye(T)
        rollout = (mixed / mixed.sum(-1, keepdim=True)) @ rollout
    return rollout


def _grid(weights: Tensor, side: int) -> np.ndarray:
    """Patch weights ``(N,)`` in reading order -> ``(side, side)``, patch (row, column)."""
    return weights.reshape(side, side).numpy()


def _panel(ax, image: np.ndarray, weights: np.ndarray | None, title: str) -> None:  # noqa: ANN001 - an Axes
    """The image, and over it the patch weights, 0 to their maximum, in 'inferno' on the image in grey (its
    colours would mix with the weights'), with the patch grid."""
    S = image.shape[0]
    if weights is None:
        ax.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0, vmax=1, extent=(0, S, S, 0),
                  interpolation="nearest")
    else:
        grey = image if image.ndim == 2 else image @ np.array([0.299, 0.587, 0.114])  # luminance (ITU-R 601)
        ax.imshow(grey, cmap="gray", vmin=0, vmax=1, extent=(0, S, S, 0), interpolation="nearest")
        ax.imshow(weights, cmap="inferno", vmin=0, vmax=max(float(weights.max()), 1e-9), alpha=ALPHA,
                  extent=(0, S, S, 0), interpolation="nearest")
        for edge in np.linspace(0, S, weights.shape[0] + 1)[1:-1]:
            ax.axhline(edge, color="white", lw=0.4, alpha=0.5)
            ax.axvline(edge, color="white", lw=0.4, alpha=0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title, fontsize=8, pad=3)


def plot_image_attention(model: ViT, pixels: Tensor, path: str | os.PathLike, *, title: str = "") -> Path:
    """The class token's attention over one image ``pixels (ch, S, S)`` (floats in [0, 1]), written as a PNG."""
    cfg = model.config
    full = vit_attention(model, pixels.unsqueeze(0))  # (L, H, 1 + N, 1 + N)
    cls = full[:, :, 0]  # (L, H, 1 + N): the class token's row
    side = cfg.image_size // cfg.patch_size
    shown = np.asarray(pixels.permute(1, 2, 0).squeeze(-1).clamp(0, 1))  # (S, S) grey or (S, S, 3)
    layers = sorted({round(i * (cfg.n_layers - 1) / max(MAX_LAYERS - 1, 1)) for i in range(MAX_LAYERS)}) \
        if cfg.n_layers > MAX_LAYERS else list(range(cfg.n_layers))
    heads = list(range(min(cfg.n_heads, MAX_HEADS)))
    n_rows, n_cols = 1 + len(layers), 1 + len(heads)
    fig = new_figure(figsize=(n_cols * PANEL_INCHES, n_rows * PANEL_INCHES + 0.7), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    rollout = attention_rollout(full)[0]  # (1 + N,)
    _panel(axes[0][0], shown, None, "the image")
    _panel(axes[0][1], shown, _grid(rollout[1:], side), "rollout, all layers\n" + _weights(rollout))
    for ax in axes[0][2:]:
        ax.axis("off")
    for r, layer in enumerate(layers, start=1):
        mean = cls[layer].mean(0)
        _panel(axes[r][0], shown, _grid(mean[1:], side), f"layer {layer}, mean of heads\n" + _weights(mean))
        for c, head in enumerate(heads, start=1):
            w = cls[layer, head]
            _panel(axes[r][c], shown, _grid(w[1:], side), f"layer {layer}, head {head}\n" + _weights(w))
    from matplotlib.cm import ScalarMappable  # matplotlib is there: common.py has checked
    from matplotlib.colors import Normalize

    scale = ScalarMappable(Normalize(0, 1), cmap="inferno")
    fig.colorbar(scale, ax=axes[-1, :], location="bottom", shrink=0.6, aspect=40,
                 label="patch weight / the panel's largest patch weight")
    fig.suptitle(title or "the class token's attention over the patches", fontsize=10)
    return save(fig, path)


def _weights(row: Tensor) -> str:
    """A panel's numbers: its largest patch weight and the class token's weight on itself."""
    return f"max {float(row[1:].max()):.2f}, self {float(row[0]):.2f}"


def plot_checkpoint_image_attention(ckpt: Checkpoint, image: str | os.PathLike, path: str | os.PathLike) -> Path:
    """``scratchformer plot attention --ckpt RUN --image FILE``: a trained ViT's class-token attention over an image
    file (read at the model's image size), titled with the model's prediction."""
    model = ckpt.model
    assert isinstance(model, ViT)
    cfg = model.config
    pixels = as_input(read_image(image, cfg.image_size, cfg.channels))  # (ch, S, S)
    with torch.no_grad():
        probs = model(pixels.unsqueeze(0)).softmax(-1)[0]
    labels = ckpt.extra.get("labels") or [str(i) for i in range(cfg.n_classes)]
    k = int(probs.argmax())
    title = (f"{Path(image).name}: predicted {labels[k]} ({probs[k]:.2f})\nthe class token's attention over the "
             f"{cfg.n_patches} patches of {cfg.patch_size} x {cfg.patch_size} (each panel scaled to its own maximum)")
    return plot_image_attention(model, pixels, path, title=title)
