"""Sliding-window attention (Beltagy et al. 2020, "Longformer", §3.1; Mistral 7B; Gemma 2 and 3's local layers).

A causal self-attention whose query at position i sees only the keys at positions ``i - W + 1 .. i``: the last W
positions, itself included (``ModelConfig.sliding_window`` = W; ``transformers``' ``kv_idx > q_idx - W``)::

    may attend(i, j) = 0 <= i - j < W                                    (the causal mask, cut to a band)

Information still travels further than W: layer l's state at i has read layer l-1's states at i - W + 1 .. i, each
of which read W more, so L sliding layers reach L (W - 1) positions back. Gemma 3 mixes the two kinds: five local
(sliding) layers of W = 512 or 1,024 positions to one global layer that sees everything, each kind with its own
rotary base (10,000 local, 1,000,000 global): long-range reading is left to the global layers.

What it saves is the cache. A full layer keeps every past key and value: its memory grows with the sequence. A
sliding layer never reads a key older than W - 1 positions, so its cache keeps at most W - 1 past ones
(``WindowKVCache``; the decoding engine's pool keeps a ring of W per row, ``generation/pool.py``), and stops growing.

``sliding_window_mask`` is the band; ``SlidingWindowAttention`` is ``MultiHeadAttention`` with the band added to its
mask, over the keys its cache returns (``KVCache.visible``: which of them each new query may see).
"""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.kv_cache import KVCache
from scratchformer.nn.masks import sliding_window_mask

__all__ = ["SlidingWindowAttention", "WindowKVCache"]


class SlidingWindowAttention(MultiHeadAttention):
    """Causal self-attention over the last ``window`` positions (the module docstring); otherwise
    ``MultiHeadAttention`` itself (the same projections, names and cache shapes)."""

    def __init__(self, *args, window: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.window = window

    def _keys(self, k: Tensor, v: Tensor, mask: Tensor | None,
              cache: KVCache | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """This step's keys and values added to the cache; what the queries see: the band of the window, and
        ``mask`` (over every position so far) where it still covers them."""
        T = k.size(2)
        if cache is None:
            band = sliding_window_mask(T, T, self.window, device=k.device)  # (T, T)
            return k, v, band if mask is None else mask & band
        k, v = cache.update(k, v)  # (B, H_kv, S, D): the held past and this step
        return k, v, cache.visible(mask, T, k.size(2), self.window)

    def extra_repr(self) -> str:
        return f"window={self.window}"


class WindowKVCache(KVCache):
    """One sliding layer's cache for ``generate``: the last ``window - 1`` positions' keys and values (all that a new
    query can still see besides itself), ``(B, H, window - 1, D)``, held in order; ``length`` counts every position
    seen, as ``KVCache``'s does. ``update(k, v)`` returns the held ones followed by the new ones, then keeps the last
    ``window - 1`` of them: the memory stays at the window's however long the sequence grows."""

    def __init__(self, batch_size: int, n_heads: int, head_dim: int, window: int, *,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__(batch_size, n_heads, head_dim, max(window - 1, 0), device=device, dtype=dtype)
        self.window = window

    @property
    def held(self) -> int:
        """How many past positions are held now (at most ``window - 1``)."""
        return min(self.length, self.keys.size(2))

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``k, v (B, H, T, D)``; return the held past and them, ``(B, H, held + T, D)``, oldest first."""
        n = self.held
        keys = torch.cat([self.keys[:, :, :n], k], dim=2)  # (B, H, n + T, D)
        values = torch.cat([self.values[:, :, :n], v], dim=2)
        keep = min(keys.size(2), self.keys.size(2))
        if keep:
            self.keys[:, :, :keep] = keys[:, :, keys.size(2) - keep:]
            self.values[:, :, :keep] = values[:, :, values.size(2) - keep:]
        self.length += k.size(2)
        return keys, values

    def reorder(self, index: Tensor) -> None:
        n = self.held
        keys, values = self.keys.index_select(0, index), self.values.index_select(0, index)
        keys[:, :, n:], values[:, :, n:] = 0, 0
        self.keys, self.values = keys, values
