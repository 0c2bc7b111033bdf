"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2).

Notation used in every shape comment:

    B  batch size           T  query (target) length     S  key/value (source) length
    H  number of heads      D  head size = C / H         C  model size d_model

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                          (equation 1)
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
        head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Masks are boolean and ``True`` means *may attend* (see ``masks.py``). A query row whose mask allows no
key at all (a padded query that sees only padding, say) returns zeros, never NaN, on both paths.

Two implementations of equation 1, one definition:

- ``attention_reference``: the equation line for line (matmul, scale, mask, softmax, matmul). It is the
  definition, and the only path that returns the attention weights (for plots).
- ``F.scaled_dot_product_attention``: PyTorch's fused kernel (flash / memory-efficient on GPU).

``attend`` is the one place that chooses between them. Tests prove the two agree, forward and backward.
Inside a ``record_attention`` block (``recording.py``) the recorded modules ask ``attend`` for the weights
and hand them to the block's record; the modules themselves keep nothing.

Grouped-query attention (Ainslie et al. 2023; Llama 2 70B, Llama 3, Qwen3): ``n_kv_heads`` heads of keys and
values, each shared by a group of ``n_heads / n_kv_heads`` query heads (``n_kv_heads=1``: multi-query attention,
Shazeer 2019). Q is ``(B, H, T, D)``, K and V ``(B, H_kv, S, D)``: the KV cache holds H_kv heads, so it shrinks by
``H / H_kv``, and each K, V head is repeated for its group just before equation 1 (``repeat_kv``). With
``n_kv_heads == n_heads`` nothing is repeated: the paper's multi-head attention, bit for bit.

``attention="linear"`` (``ModelConfig``) swaps equation 1 for linear attention (Katharopoulos et al. 2020,
``linear_attention.py``) in every ``MultiHeadAttention`` of a model, with the same projections and no new
parameters; ``MultiHeadAttention._attend`` is the one place where the two kinds part ways.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.nn.config import CHOICES, AttentionKind
from scratchformer.nn.kv_cache import KVCache, LinearAttentionState
from scratchformer.nn.linear_attention import linear_attend
from scratchformer.nn.masks import causal_mask
from scratchformer.nn.recording import records_for

AttentionImpl = Literal["auto", "reference", "sdpa"]  # for linear attention: "sdpa" = its fast path (the sums)


def attention_reference(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                        dropout_p: float = 0.0, scale: float | None = None,
                        softcap: float = 0.0) -> tuple[Tensor, Tensor]:
    """Equation 1, written out. ``q (B, H, T, D)``, ``k, v (B, H, S, D)``, ``mask`` broadcastable to
    ``(B, H, T, S)`` with ``True`` = may attend. Returns ``(output (B, H, T, D), weights (B, H, T, S))``.
    ``scale``: the scores' factor (None: 1 / sqrt(D)); ``softcap`` > 0: each score s becomes c tanh(s / c) (Gemma 2).

    Every query row must allow at least one key (``attend`` guarantees it).
    """
    scores = q @ k.transpose(-2, -1)  # (B, H, T, S)
    scores = scores / math.sqrt(q.size(-1)) if scale is None else scores * scale
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)  # bounded to (-c, c), smoothly
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # masked keys get exactly zero weight
    weights = scores.softmax(dim=-1)  # (B, H, T, S), each row sums to 1
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return weights @ v, weights  # (B, H, T, D)


def attend(q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | None = None, is_causal: bool = False,
           dropout_p: float = 0.0, need_weights: bool = False, impl: AttentionImpl = "auto",
           scale: float | None = None, softcap: float = 0.0) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention through the reference or the fast path: the one place that chooses.

    ``q (B, H, T, D)``, ``k, v (B, H, S, D)``. ``mask``: boolean, broadcastable to ``(B, H, T, S)``,
    ``True`` = may attend. ``is_causal``: also forbid attending to later positions; with ``S > T`` the
    queries are taken to be the last ``T`` positions (incremental decoding). ``impl``: ``"reference"``,
    ``"sdpa"`` or ``"auto"`` (sdpa, unless the weights are needed). Returns ``(output (B, H, T, D),
    weights (B, H, T, S) or None)``; weights only come from the reference path. ``scale`` and ``softcap``: as
    ``attention_reference`` takes them (a softcap only the reference path computes).
    """
    if softcap:
        impl = "reference"
    T, S = q.size(-2), k.size(-2)
    if is_causal and T == 1:
        is_causal = False  # a single query at the last position may see every key
    if is_causal and (mask is not None or T != S or impl == "reference" or need_weights):
        # sdpa's own is_causal aligns the diagonal top-left and cannot be combined with a mask.
        mask = causal_mask(T, S, device=q.device) if mask is None else mask & causal_mask(T, S, device=q.device)
        is_causal = False

    empty_rows = None
    if mask is not None:
        # A row that may attend to nothing would be 0/0 = NaN in softmax (and in its gradient). Let such
        # rows attend everywhere, then zero their output: finite forward and backward, zeros out.
        empty_rows = ~mask.any(dim=-1, keepdim=True)  # (B, H or 1, T or 1, 1)
        mask = mask | empty_rows

    if need_weights or impl == "reference":
        out, weights = attention_reference(q, k, v, mask, dropout_p, scale, softcap)
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal,
                                             scale=scale)
        weights = None

    if empty_rows is not None:
        out = out.masked_fill(empty_rows, 0.0)
        if weights is not None:
            weights = weights.masked_fill(empty_rows, 0.0)
    return out, weights


def repeat_kv(x: Tensor, groups: int) -> Tensor:
    """Keys or values ``(B, H_kv, S, D)`` -> ``(B, H_kv * groups, S, D)``: head j serves queries
    ``j * groups ... (j + 1) * groups - 1`` (grouped-query attention; ``groups == 1`` returns ``x`` itself)."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


class RowsLinear(nn.Linear):
    """An ``nn.Linear`` whose output rows can be computed in part: ``rows(x, start, stop)`` is ``x W[start:stop]^T +
    b[start:stop]``, ``(..., stop - start)``. Attention's stacked [W^Q; W^K; W^V] is one: cross-attention takes its
    queries' rows, or its keys' and values'. A layer that stands in for it (an adapter, ``nn/lora.py``) computes
    its own rows the same way, so attention never asks what it is."""

    def rows(self, x: Tensor, start: int, stop: int) -> Tensor:
        bias = None if self.bias is None else self.bias[start:stop]
        return F.linear(x, self.weight[start:stop], bias)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (§3.2.2): ``forward`` is self-attention, ``cross`` is cross-attention.

    The projections, by name: ``w_q``, ``w_k`` and ``w_v`` (each ``(C, C)``, with biases ``b_q``, ``b_k``,
    ``b_v``) are W^Q, W^K and W^V of the paper's equation, all heads' at once (head i's are rows
    ``i*D:(i+1)*D``); ``out_proj`` is W^O. They are stored stacked, as the rows of one ``(3C, C)`` linear
    layer ``in_proj`` = [W^Q; W^K; W^V] (``torch.nn.MultiheadAttention``'s layout), because self-attention
    then projects a position's query, key and value with a single matmul, the fastest way; ``w_q``, ``w_k``,
    ``w_v`` are views of its three blocks. Cross-attention applies W^Q to the decoder stream and W^K, W^V to
    the encoder memory (``project_kv``, once per source sentence when decoding). With ``n_kv_heads`` (grouped-query
    attention, module docstring) and ``head_dim`` (D, when it is not ``C / H``) the blocks are ``(H D, C)``,
    ``(H_kv D, C)`` and ``(H_kv D, C)``, and W^O is ``(C, H D)``.

    ``rope``: a ``RotaryEmbedding`` to rotate queries and keys by their positions (self-attention only).
    ``q_norm``, ``k_norm``: QK-norm (Dehghani et al. 2023; the NanoGPT speedrun), not in the paper: each head's
    query and key vectors normalised over D (before rotary positions, before the cache) so that a score
    ``q . k / sqrt(D)`` is bounded by the learned gains instead of growing with the weights, a common cause of
    loss spikes in long or fast training.
    ``scale``, ``softcap``: the scores' factor (None: 1 / sqrt(D)) and Gemma 2's cap on them (0: none), ``attend``'s.
    ``kind``: ``"softmax"`` (equation 1) or ``"linear"`` (``linear_attention.py``: causal self-attention then
    decodes with a ``LinearAttentionState`` instead of a ``KVCache``). ``impl``: which attention path to use
    (see ``attend`` and ``linear_attend``). The attention weights come out through ``record_attention``.
    """

    def __init__(self, d_model: int, n_heads: int, *, bias: bool = True, dropout: float = 0.0,
                 rope: nn.Module | None = None, q_norm: nn.Module | None = None,
                 k_norm: nn.Module | None = None, kind: AttentionKind = "softmax", n_kv_heads: int | None = None,
                 head_dim: int | None = None, scale: float | None = None, softcap: float = 0.0) -> None:
        super().__init__()
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if head_dim is None and d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads or (kind == "linear" and n_kv_heads != n_heads):
            raise ValueError(f"n_kv_heads={n_kv_heads} does not fit n_heads={n_heads} with {kind} attention")
        if kind not in CHOICES["attention"]:
            raise ValueError(f"kind={kind!r} is not one of {', '.join(CHOICES['attention'])}")
        if kind == "linear" and dropout:
            raise ValueError("attention dropout drops attention weights, which linear attention never forms")
        self.kind = kind
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.head_dim = d_model // n_heads if head_dim is None else head_dim
        self.q_size, self.kv_size = n_heads * self.head_dim, n_kv_heads * self.head_dim  # H D and H_kv D
        self.in_proj = RowsLinear(d_model, self.q_size + 2 * self.kv_size, bias=bias)  # [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(self.q_size, d_model, bias=bias)  # W^O
        self.dropout = dropout
        self.rope = rope
        self.q_norm, self.k_norm = q_norm, k_norm  # over D, each head's vectors (None: not normalised)
        self.scale, self.softcap = scale, softcap
        self.impl: AttentionImpl = "auto"

    # W^Q, W^K, W^V and their biases by name: views of in_proj's three row blocks
    def _block(self, i: int, bias: bool = False) -> Tensor | None:
        tensor = self.in_proj.bias if bias else self.in_proj.weight
        start = 0 if i == 0 else self.q_size + (i - 1) * self.kv_size
        return None if tensor is None else tensor[start:start + (self.q_size if i == 0 else self.kv_size)]

    w_q = property(lambda self: self._block(0))
    w_k = property(lambda self: self._block(1))
    w_v = property(lambda self: self._block(2))
    b_q = property(lambda self: self._block(0, bias=True))
    b_k = property(lambda self: self._block(1, bias=True))
    b_v = property(lambda self: self._block(2, bias=True))

    def _in_rows(self, x: Tensor, start: int, stop: int | None) -> Tensor:
        """x times the rows ``start:stop`` of in_proj (plus their bias): a part of [W^Q; W^K; W^V]."""
        return self.in_proj.rows(x, start, self.in_proj.out_features if stop is None else stop)

    def _split_heads(self, x: Tensor) -> Tensor:
        B, L, _ = x.shape
        return x.view(B, L, -1, self.head_dim).transpose(1, 2)  # (B, L, H D) -> (B, H, L, D)

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the encoder memory ``(B, S, C)`` -> two ``(B, H, S, D)`` tensors: memory W^K
        and memory W^V, in one matmul with the stacked blocks."""
        k, v = self._in_rows(memory, self.q_size, None).chunk(2, dim=-1)  # (B, S, C) each
        k = self._split_heads(k)
        return (k if self.k_norm is None else self.k_norm(k)), self._split_heads(v)

    def forward(self, x: Tensor, *, mask: Tensor | None = None, is_causal: bool = False,
                positions: Tensor | None = None, cache: KVCache | LinearAttentionState | None = None) -> Tensor:
        """Self-attention: ``x (B, T, C)`` -> ``(B, T, C)``.

        ``mask``: bool, broadcastable to ``(B, H, T, S)``, ``True`` = may attend; ``is_causal``: also hide
        later positions. ``positions (T,)`` or ``(B, T)``: the absolute positions of ``x`` (rotary
        embeddings). ``cache`` (a ``KVCache``): append this step's keys and values and attend over all the
        cached ones (S = cached + T); with linear attention a ``LinearAttentionState``, which absorbs them.
        """
        B, T, C = x.shape
        if self.n_kv_heads == self.n_heads:
            qkv = self.in_proj(x).view(B, T, 3, self.n_heads, self.head_dim)  # (B, T, 3, H, D): one matmul
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, D)
        else:  # grouped-query: fewer heads of keys and values than of queries, still one matmul
            q, k, v = self.in_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
            q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)  # K, V: (B, H_kv, T, D)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q, positions), self.rope(k, positions)
        return self._attend(q, k, v, mask, is_causal, cache)

    def cross(self, x: Tensor, memory_kv: tuple[Tensor, Tensor], *, mask: Tensor | None = None) -> Tensor:
        """Cross-attention: queries ``x (B, T, C)`` W^Q, keys and values ``memory_kv`` (``project_kv`` of the
        encoder memory) -> ``(B, T, C)``. ``mask``: bool, broadcastable to ``(B, H, T, S)``, ``True`` = may
        attend."""
        q = self._split_heads(self._in_rows(x, 0, self.q_size))  # (B, H, T, D)
        if self.q_norm is not None:
            q = self.q_norm(q)
        k, v = memory_kv  # (B, H, S, D), keys normalised by project_kv
        return self._attend(q, k, v, mask, False)

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, is_causal: bool,
                cache: KVCache | LinearAttentionState | None = None) -> Tensor:
        """Equation 1 (or linear attention) for every head, then the heads concatenated and projected by W^O."""
        B, _, T, _ = q.shape
        records = records_for(self)  # open record_attention blocks that want this module's weights
        expected = LinearAttentionState if self.kind == "linear" else KVCache
        if cache is not None and not isinstance(cache, expected):
            raise TypeError(f"{self.kind} attention decodes with a {expected.__name__}, not a {type(cache).__name__}: "
                            "make the cache with the model's new_cache()")
        if self.kind == "linear":  # the one place where softmax and linear attention part ways
            out, weights = linear_attend(q, k, v, mask=mask, is_causal=is_causal, state=cache,  # type: ignore[arg-type]
                                         need_weights=bool(records), impl=self.impl)
        else:
            k, v, mask = self._keys(k, v, mask, cache)  # type: ignore[arg-type]  # (B, H_kv, S, D)
            groups = self.n_heads // self.n_kv_heads
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)  # (B, H, S, D)
            out, weights = attend(q, k, v, mask=mask, is_causal=is_causal,
                                  dropout_p=self.dropout if self.training else 0.0,
                                  need_weights=bool(records), impl=self.impl, scale=self.scale, softcap=self.softcap)
        for record in records:
            record.add(self, weights)  # type: ignore[arg-type]  # the reference path returned them
        out = out.transpose(1, 2).reshape(B, T, self.q_size)  # (B, H, T, D) -> (B, T, H D): concatenate the heads
        return self.out_proj(out)


    def _keys(self, k: Tensor, v: Tensor, mask: Tensor | None,
              cache: KVCache | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """This step's keys and values, with the cached past before them; the mask over them (a sliding window
        narrows it: ``sliding_window.py``)."""
        if cache is not None:
            k, v = cache.update(k, v)  # (B, H_kv, S, D): the past and this step
        return k, v, mask


class CrossAttention(MultiHeadAttention):
    """The decoder's attention over the encoder memory (§3.2.3): ``forward(x, memory_kv, mask=...)`` is
    ``cross``. Its own class, so that each module's forward is one kind of attention (hooks see it)."""

    def forward(self, x: Tensor, memory_kv: tuple[Tensor, Tensor], *,  # type: ignore[override]
                mask: Tensor | None = None) -> Tensor:
        return self.cross(x, memory_kv, mask=mask)


def set_attention_impl(model: nn.Module, impl: AttentionImpl) -> None:
    """Use the given attention path in every ``MultiHeadAttention`` of ``model``."""
    if impl not in get_args(AttentionImpl):
        raise ValueError(f"impl={impl!r} is not one of {', '.join(get_args(AttentionImpl))}")
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.impl = impl
