"""Embeddings (§3.4) and positional encodings (§3.5).

Attention itself is order-blind: permuting the tokens permutes its output. Positions are injected in
one of three ways, or not at all (config field ``positional``):

- ``sinusoidal`` (the paper)::

      PE(pos, 2i)   = sin(pos / 10000^(2i / C))
      PE(pos, 2i+1) = cos(pos / 10000^(2i / C))

  a fixed ``(max_len, C)`` table added to the token embeddings. It is indexed by the *position* of each
  token, never by the batch index (a bug in several tutorials, tested against here).
- ``learned``: a trained ``(max_len, C)`` table (GPT-2, BERT).
- ``rotary`` (RoPE, Su et al. 2021; a deviation from the paper): nothing is added to the embeddings;
  instead each self-attention layer rotates queries and keys by an angle proportional to their
  position, so that q . k depends only on the relative offset. See ``RotaryEmbedding``.
- ``none``: no positional information at all. An encoder is then order-blind: permuting the input
  permutes its outputs, and a mean- or max-pooled classifier sees a bag of words (tested). A demonstration
  of why §3.5 exists, and a baseline; a decoder still learns some order from its causal mask.

Token embeddings are multiplied by sqrt(C) in the paper ("we multiply those weights by sqrt(d_model)");
``scale_embeddings`` turns that on or off (GPT-2 and BERT do not scale).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.nn.config import ModelConfig
from scratchformer.nn.norms import norm_layer
from scratchformer.nn.rope_scaling import llama3_frequencies


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """The paper's ``(max_len, C)`` positional-encoding matrix."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = pos * inv_freq  # (max_len, C/2): angle of position pos in dimension pair i
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids; ``positions (T,)`` or ``(B, T)`` -> ``(T, C)`` or ``(B, T, C)``."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        # A buffer, not a parameter, and not saved in checkpoints: it is a function of the shape.
        self.register_buffer("table", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        return self.table[positions]


class LearnedPositionalEmbedding(nn.Module):
    """A trained table; ``positions (T,)`` or ``(B, T)`` -> ``(T, C)`` or ``(B, T, C)``."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: Tensor) -> Tensor:
        return self.weight[positions]


def rotary_frequencies(head_dim: int, base: float = 10000.0, scaling: dict[str, Any] | None = None,
                       device: torch.device | str | None = None) -> Tensor:
    """The ``(D/2,)`` angles per position of the rotary pairs, ``base^(-2j / D)`` in float64, scaled as Llama 3
    scales them when ``scaling`` is given (``rope_scaling.py``)."""
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)  # (D/2,)
    return inv_freq if scaling is None else llama3_frequencies(inv_freq, scaling)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for a head of size D (half-split layout, as GPT-NeoX and HF LLaMA).

    Dimension pairs ``(j, j + D/2)`` of a query or key at position p are rotated by the angle
    ``p * base^(-2j / D)``. ``forward(x (B, H, T, D), positions (T,) or (B, T)) -> (B, H, T, D)``.
    ``scaling``: Llama 3's rotary scaling of those frequencies (``rope_scaling.py``), or None.
    """

    def __init__(self, head_dim: int, max_len: int, base: float = 10000.0,
                 scaling: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.head_dim, self.max_len, self.base, self.scaling = head_dim, max_len, base, scaling
        self.build_tables()

    def build_tables(self, device: torch.device | str | None = None) -> None:
        """The ``(max_len, D/2)`` cosines and sines (again, on ``device``, for a model built without memory)."""
        inv_freq = rotary_frequencies(self.head_dim, self.base, self.scaling, device)  # (D/2,)
        angles = torch.arange(self.max_len, dtype=torch.float64, device=device)[:, None] * inv_freq  # (max_len, D/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor, positions: Tensor | None) -> Tensor:
        if positions is None:
            positions = torch.arange(x.size(-2), device=x.device)
        cos, sin = self.cos[positions], self.sin[positions]  # (T, D/2) or (B, T, D/2)
        if positions.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, D/2): same rotation for every head
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, T, D/2) each
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).type_as(x)


class Embeddings(nn.Module):
    """Token embedding (x sqrt(C) if ``scale_embeddings``) + positional encoding, then dropout.

    ``token`` may be shared with another ``Embeddings`` (source and target in the paper) and with the
    output projection (weight tying, §3.4). ``forward(ids (B, T), positions (T,) or (B, T)) -> (B, T, C)``.
    """

    def __init__(self, token: nn.Embedding, cfg: ModelConfig) -> None:
        super().__init__()
        self.token = token
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.position_embedding: nn.Module | None  # a table indexed by position, or None
        if cfg.positional == "sinusoidal":
            self.position_embedding = SinusoidalPositionalEncoding(cfg.max_len, cfg.d_model)
        elif cfg.positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(cfg.max_len, cfg.d_model)
        else:  # rotary: applied inside self-attention, nothing to add here; none: nothing at all
            self.position_embedding = None
        self.norm = norm_layer(cfg) if cfg.embedding_norm else None
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, ids: Tensor, positions: Tensor) -> Tensor:
        x = self.token(ids)  # (B, T, C)
        if self.scale != 1.0:  # the factor in the table's dtype, as Gemma's (sqrt(C) rounded to bfloat16 there)
            x = x * torch.tensor(self.scale, dtype=x.dtype)
        if self.position_embedding is not None:
            x = x + self.position_embedding(positions)  # (T, C) broadcasts over the batch; (B, T, C) per row
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x)


def positions_for(length: int, offset: int = 0, key_mask: Tensor | None = None,
                  device: torch.device | None = None) -> Tensor:
    """Absolute positions of ``length`` new tokens that follow ``offset`` earlier (cached) ones.

    Without a mask: ``offset, ..., offset + length - 1`` as a ``(T,)`` tensor shared by the batch.
    With ``key_mask (B, offset + length)`` (``True`` = real token, e.g. left-padded prompts): each row
    counts only its real tokens, so a prompt gets the same positions padded or not -> ``(B, T)``.
    """
    if key_mask is None:
        return torch.arange(offset, offset + length, device=device)
    return (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, offset:offset + length]
