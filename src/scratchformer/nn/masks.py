"""Attention masks: the causal ("no peeking ahead") mask of §3.2.3, and padding masks (what batches need).

One convention everywhere in scratchformer: a mask is boolean and ``True`` means *may attend*, the
polarity of ``F.scaled_dot_product_attention``. (``torch.nn.MultiheadAttention`` uses the opposite one
for boolean masks; ``scratchformer.interop`` converts at that boundary and nowhere else.)

Shapes: B batch, T query length, S key length. Attention masks broadcast to ``(B, H, T, S)``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """``(B, S)`` token ids -> ``(B, S)`` bool, ``True`` for real tokens, ``False`` for padding."""
    return ids != pad_id


def causal_mask(query_len: int, key_len: int | None = None, device: torch.device | None = None) -> Tensor:
    """``(T, S)`` bool lower-triangular mask: query ``i`` may attend to keys ``0 .. i + S - T``.

    With ``S > T`` (incremental decoding: S - T keys are already cached) the queries are the *last* T
    positions, so the diagonal is aligned bottom-right. (``F.scaled_dot_product_attention(is_causal=True)``
    aligns top-left, which is only right when T == S.)
    """
    key_len = query_len if key_len is None else key_len
    return torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(key_len - query_len)


def window_mask(length: int, window: int, device: torch.device | None = None) -> Tensor:
    """``(T, T)`` bool band: query ``i`` may attend to keys ``j`` with ``|i - j| <= window``."""
    i = torch.arange(length, device=device)
    return (i[:, None] - i[None, :]).abs() <= window


def sliding_window_mask(query_len: int, key_len: int, window: int, device: torch.device | None = None) -> Tensor:
    """``(T, S)`` bool causal band: the T queries are the last T of the S positions (as in ``causal_mask``), and query
    ``i`` may attend to key ``j`` when ``0 <= i - j < window``: the last ``window`` positions, itself included."""
    i = torch.arange(query_len, device=device)[:, None] + (key_len - query_len)  # each query's position among keys
    j = torch.arange(key_len, device=device)[None, :]
    return (j <= i) & (i - j < window)


def key_padding_to_attention_mask(key_mask: Tensor) -> Tensor:
    """``(B, S)`` real-token mask -> ``(B, 1, 1, S)``: every query (and head) sees the same keys."""
    return key_mask[:, None, None, :]


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of broadcastable boolean masks; ``None`` entries mean "no restriction"."""
    out: Tensor | None = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out
