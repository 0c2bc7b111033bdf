"""Key/value caches for incremental (token-by-token) decoding.

Without a cache, generating token t+1 recomputes the keys and values of all t earlier tokens in every
layer. They never change (causal masking means earlier positions never see later ones), so we keep
them:

- ``KVCache``: one self-attention layer's keys and values, preallocated to ``max_len`` positions and
  filled left to right by ``update`` (it grows by the number of new tokens each step). A sliding-window layer's
  keeps only its window's (``sliding_window.WindowKVCache``).
- ``LinearAttentionState``: what replaces the ``KVCache`` when the model uses linear attention
  (``attention="linear"``, Katharopoulos et al. 2020, "Transformers are RNNs", §3.4): not the past keys
  and values but two running sums over them, a fixed-size state, so that a new token costs the same at
  position 10 as at position 10,000.
- ``DecoderCache``: a decoder stack's caches: one ``KVCache`` (or ``LinearAttentionState``) per layer,
  plus each layer's cross-attention keys/values over the encoder memory, projected once per source sentence.

The model picks the kind: ``model.new_cache()`` returns the one its attention needs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import Tensor

from scratchformer.nn.masks import sliding_window_mask


class KVCache:
    """Preallocated ``(B, H, max_len, D)`` keys and values of one attention layer.

    ``update(k, v)`` writes the new ``(B, H, T, D)`` keys/values after the ``length`` already stored
    and returns views of all ``length + T`` of them; ``reset()`` empties the cache (no reallocation).
    """

    def __init__(self, batch_size: int, n_heads: int, head_dim: int, max_len: int, *,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        shape = (batch_size, n_heads, max_len, head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    @classmethod
    def over(cls, keys: Tensor, values: Tensor, length: int) -> KVCache:
        """A cache on storage that exists already (views of a decoding engine's row), its first ``length`` positions
        filled: ``update`` writes into that storage."""
        cache = cls.__new__(cls)
        cache.keys, cache.values, cache.length = keys, values, length
        return cache

    @property
    def max_len(self) -> int:
        return self.keys.size(2)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``k, v (B, H, T, D)``; return all keys and values so far, ``(B, H, length, D)``."""
        start, end = self.length, self.length + k.size(2)
        if end > self.max_len:
            raise ValueError(f"KV cache is full: {end} positions needed, max_len={self.max_len}")
        self.keys[:, :, start:end] = k
        self.values[:, :, start:end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def reset(self) -> None:
        self.length = 0

    def visible(self, mask: Tensor | None, queries: int, keys: int, window: int) -> Tensor:
        """Which of the ``keys`` that ``update`` just returned each of its ``queries`` new positions may see through a
        sliding window of ``window`` positions (``sliding_window.py``): the band, and the real-token ``mask`` (its
        last ``keys`` columns: the returned keys are the latest positions), ``(B or 1, 1, T, S)``."""
        band = sliding_window_mask(queries, keys, window, device=self.keys.device)  # (T, S)
        return band if mask is None else mask[..., -keys:] & band

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (a ``(B',)`` LongTensor), e.g. the surviving beams in beam search.

        Only the filled ``length`` positions are copied (the rest is never read before being written).
        """
        n = self.length
        keys = self.keys.new_empty((index.numel(), *self.keys.shape[1:]))  # never read past length
        values = self.values.new_empty((index.numel(), *self.values.shape[1:]))
        keys[:, :, :n] = self.keys[:, :, :n].index_select(0, index)
        values[:, :, :n] = self.values[:, :, :n].index_select(0, index)
        self.keys, self.values = keys, values


class LinearAttentionState:
    """The recurrent state of one causal linear-attention layer: ``s (B, H, D, D)`` and ``z (B, H, D)``.

    After ``length`` tokens, ``s = sum_j phi(k_j) v_j^T`` and ``z = sum_j phi(k_j)`` (padded keys add
    nothing: their ``phi(k)`` is zero). Its size does not depend on ``length``: there is no ``max_len``.
    ``add(s, z, n)`` adds the sums of ``n`` new tokens; ``reset()`` and ``reorder(index)`` as ``KVCache``.
    """

    def __init__(self, batch_size: int, n_heads: int, head_dim: int, *,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        self.s = torch.zeros(batch_size, n_heads, head_dim, head_dim, device=device, dtype=dtype)
        self.z = torch.zeros(batch_size, n_heads, head_dim, device=device, dtype=dtype)
        self.length = 0

    def add(self, s: Tensor, z: Tensor, n: int) -> None:
        """Fold in ``n`` more tokens: their ``sum phi(k) v^T (B, H, D, D)`` and ``sum phi(k) (B, H, D)``."""
        self.s, self.z = self.s + s, self.z + z  # not in place: autograd may still need the old sums
        self.length += n

    def reset(self) -> None:
        self.s.zero_()
        self.z.zero_()
        self.length = 0

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (a ``(B',)`` LongTensor), e.g. the surviving beams in beam search."""
        self.s, self.z = self.s.index_select(0, index), self.z.index_select(0, index)


@dataclass
class DecoderCache:
    """Everything a decoder stack remembers between decoding steps."""

    self_attn: list[KVCache] | list[LinearAttentionState]
    # Per layer: cross-attention (keys, values) of the encoder memory, each (B, H, S, D); None until
    # the first step projects them.
    cross_attn: list[tuple[Tensor, Tensor] | None] = field(default_factory=list)

    @property
    def length(self) -> int:
        """How many positions have been decoded (and cached) so far."""
        return self.self_attn[0].length if self.self_attn else 0

    def keep_memory_kv(self, layer: int, kv: tuple[Tensor, Tensor]) -> None:
        """Keep layer ``layer``'s cross-attention keys and values, projected at the first step."""
        self.cross_attn[layer] = kv

    def reset(self) -> None:
        for c in self.self_attn:
            c.reset()
        self.cross_attn = [None] * len(self.self_attn)

    def reorder(self, index: Tensor) -> None:
        for c in self.self_attn:
            c.reorder(index)
        self.cross_attn = [None if kv is None else (kv[0].index_select(0, index), kv[1].index_select(0, index))
                           for kv in self.cross_attn]

    def rows(self, index: Tensor) -> DecoderCache:
        """A new cache holding rows ``index`` of this one (their filled positions copied, as ``reorder`` copies
        them); this one is left as it is, so several can continue from it (a question's prompt, once per choice)."""
        out = DecoderCache([copy.copy(c) for c in self.self_attn], list(self.cross_attn))  # type: ignore[arg-type]
        out.reorder(index)
        return out
