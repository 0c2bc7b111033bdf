"""An image as a sequence of patches: the Vision Transformer's input (Dosovitskiy et al. 2021, §3.1, equation 1).

The Transformer reads a sequence of vectors; an image becomes one by cutting it into N = (image_size / P)^2
square patches of P x P pixels, flattening each into a vector of P^2 * channels numbers, and mapping it
linearly to the model width C, as a token id is mapped to its embedding (§3.4 of "Attention Is All You
Need")::

    z_0 = [x_class; x_p^1 E; x_p^2 E; ...; x_p^N E] + E_pos      E: (P^2 ch, C), E_pos: (N + 1, C)

- ``patchify``: ``(B, ch, H, W)`` pixels -> ``(B, N, ch P P)`` flattened patches, in reading order (row by row)
  and, inside a patch, channel-major, so that ``E`` is laid out as ``nn.Conv2d``'s weight is;
- ``PatchEmbedding``: the linear map ``E`` (with a bias), the same as a convolution whose kernel and stride
  are both P (tested: it is how most code writes it, here the equation is written out);
- ``PatchEmbeddings``: the patches embedded, a learned class token prepended (BERT's [CLS]: its final state
  is the image's representation), positions added (``positional``: learned, as the ViT paper; sinusoidal;
  rotary, applied in attention; or none), then dropout.

Positions are one-dimensional (the patch's index in reading order), as in the ViT paper, which found 2-D
positions no better (Appendix D.4).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """``images (B, ch, H, W)`` -> flattened patches ``(B, N, ch * P * P)``, N = (H / P) (W / P) in reading order."""
    B, ch, H, W = images.shape
    P = patch_size
    if H % P or W % P:
        raise ValueError(f"an image of {H} x {W} pixels cannot be cut into patches of {P} x {P}")
    x = images.reshape(B, ch, H // P, P, W // P, P)  # (B, ch, rows, P, cols, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, ch, P, P): one patch's pixels together, channel-major
    return x.reshape(B, (H // P) * (W // P), ch * P * P)  # (B, N, ch P P)


class PatchEmbedding(nn.Module):
    """``E`` of equation 1: ``(B, ch, H, W)`` -> ``(B, N, C)``, one vector per patch."""

    def __init__(self, channels: int, patch_size: int, d_model: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(channels * patch_size * patch_size, d_model)  # (C, ch P P): a Conv2d's weight, flat

    def forward(self, images: Tensor) -> Tensor:
        return self.proj(patchify(images, self.patch_size))  # (B, N, ch P P) -> (B, N, C)


class PatchEmbeddings(nn.Module):
    """Patches embedded, the class token first, positions added, dropout: ``(B, ch, H, W)`` -> ``(B, 1 + N, C)``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.image_size, self.channels = cfg.image_size, cfg.channels
        self.patches = PatchEmbedding(cfg.channels, cfg.patch_size, cfg.d_model)
        self.class_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))  # x_class, learned
        self.position_embedding: nn.Module | None
        if cfg.positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(cfg.max_len, cfg.d_model)
        elif cfg.positional == "sinusoidal":
            self.position_embedding = SinusoidalPositionalEncoding(cfg.max_len, cfg.d_model)
        else:  # rotary: inside self-attention; none: no positions (the model then sees a bag of patches)
            self.position_embedding = None
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, images: Tensor, positions: Tensor) -> Tensor:
        """``images (B, ch, H, W)``, ``positions (1 + N,)`` -> ``(B, 1 + N, C)``; position 0 is the class token."""
        B, ch, H, W = images.shape
        if (ch, H, W) != (self.channels, self.image_size, self.image_size):
            raise ValueError(f"expected images of shape (B, {self.channels}, {self.image_size}, {self.image_size}), "
                             f"got {tuple(images.shape)}")
        x = self.patches(images)  # (B, N, C)
        x = torch.cat([self.class_token.expand(B, -1, -1).to(x.dtype), x], dim=1)  # (B, 1 + N, C)
        if self.position_embedding is not None:
            x = x + self.position_embedding(positions)  # (1 + N, C) broadcasts over the batch
        return self.dropout(x)
