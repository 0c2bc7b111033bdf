"""Residual connections with LayerNorm (§3.1, §5.4), encoder and decoder layers, and the two stacks.

Each sub-layer (attention or feed-forward) is wrapped in a residual connection and a LayerNorm. The
paper normalises *after* adding the residual ("post-LN"); most modern code normalises the sub-layer's
*input* instead ("pre-LN"), which keeps an un-normalised residual path from input to output, trains
stably without a long warm-up, and needs one final LayerNorm at the top of the stack::

    post-LN (paper):  x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-LN:           x = x + Dropout(Sublayer(LayerNorm(x)))

``ResidualNorm`` is the one place in the code where that choice (config field ``norm``) branches. Which
normalisation (LayerNorm, or RMSNorm with ``norm_type="rmsnorm"``) is ``norms.py``'s.

Encoder layer (§3.1):  self-attention -> feed-forward
Decoder layer (§3.1):  masked self-attention -> cross-attention over the encoder memory -> feed-forward
A decoder-only model (GPT) uses decoder layers without the cross-attention; the layers its config names attend
through a sliding window (``sliding_window.py``), rotating by their own base where ``local_rope_base`` gives one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from scratchformer.nn.attention import CrossAttention, MultiHeadAttention
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import RotaryEmbedding
from scratchformer.nn.experts import feed_forward
from scratchformer.nn.feedforward import FeedForward
from scratchformer.nn.kv_cache import DecoderCache, KVCache, LinearAttentionState
from scratchformer.nn.masks import combine_masks, key_padding_to_attention_mask, window_mask
from scratchformer.nn.norms import norm_layer
from scratchformer.nn.sliding_window import SlidingWindowAttention, WindowKVCache
from scratchformer.nn.window_settings import sliding


class ResidualNorm(nn.Module):
    """Residual connection + LayerNorm around one sub-layer, post-LN (paper) or pre-LN; with ``sandwich_norm``, pre-LN
    with a second norm on the sub-layer's output before the sum (Gemma 2 and 3: x + Norm'(Sublayer(Norm(x))))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.norm = norm_layer(cfg)
        self.post_norm = norm_layer(cfg) if cfg.sandwich_norm else None
        self.dropout = nn.Dropout(cfg.dropout)  # "residual dropout" (§5.4)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.pre_norm:
            out = sublayer(self.norm(x))
            return x + self.dropout(out if self.post_norm is None else self.post_norm(out))
        return self.norm(x + self.dropout(sublayer(x)))


def _qk_norms(cfg: ModelConfig) -> dict[str, nn.Module]:
    return {"q_norm": norm_layer(cfg, cfg.head_dim), "k_norm": norm_layer(cfg, cfg.head_dim)} if cfg.qk_norm else {}


def _self_attention(cfg: ModelConfig, rope: RotaryEmbedding | None, window: int = 0) -> MultiHeadAttention:
    """A layer's self-attention: over every earlier position, or (``window``) the last ``window`` of them."""
    kind, more = (SlidingWindowAttention, {"window": window}) if window else (MultiHeadAttention, {})
    return kind(cfg.d_model, cfg.n_heads, bias=cfg.bias, dropout=cfg.attention_dropout, rope=rope, kind=cfg.attention,
                n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim, scale=cfg.attention_scale,
                softcap=cfg.attention_softcap, **more, **_qk_norms(cfg))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with residual + LayerNorm. ``(B, S, C) -> (B, S, C)``."""

    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding | None = None) -> None:
        super().__init__()
        self.self_attn = _self_attention(cfg, rope)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias)  # type: ignore[arg-type]
        self.attn_block = ResidualNorm(cfg)
        self.ffn_block = ResidualNorm(cfg)

    def forward(self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """``mask``: bool, broadcastable to ``(B, H, S, S)``, ``True`` = may attend."""
        x = self.attn_block(x, lambda h: self.self_attn(h, mask=mask, positions=positions))
        return self.ffn_block(x, self.ffn)


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder memory (unless ``cross_attention`` is
    False, as in GPT), then feed-forward; each with residual + LayerNorm. ``(B, T, C) -> (B, T, C)``.
    """

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True, rope: RotaryEmbedding | None = None,
                 layer: int = 0) -> None:
        super().__init__()
        self.self_attn = _self_attention(cfg, rope, cfg.sliding_window if sliding(cfg, layer) else 0)
        self.self_attn_block = ResidualNorm(cfg)
        self.cross_attn: CrossAttention | None = None
        self.cross_attn_block: ResidualNorm | None = None
        if cross_attention:
            self.cross_attn = CrossAttention(cfg.d_model, cfg.n_heads, bias=cfg.bias, dropout=cfg.attention_dropout,
                                             kind=cfg.attention, head_dim=cfg.head_dim, scale=cfg.attention_scale,
                                             softcap=cfg.attention_softcap, **_qk_norms(cfg))
            self.cross_attn_block = ResidualNorm(cfg)
        self.ffn = feed_forward(cfg, layer)  # a mixture of experts in the layers the config gives them (experts.py)
        self.ffn_block = ResidualNorm(cfg)

    def forward(self, x: Tensor, memory: Tensor | None = None, *, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, positions: Tensor | None = None,
                cache: KVCache | LinearAttentionState | None = None,
                memory_kv: tuple[Tensor, Tensor] | None = None,
                keep_memory_kv: Callable[[tuple[Tensor, Tensor]], None] | None = None) -> Tensor:
        """``x (B, T, C)``; ``memory (B, S, C)`` the encoder output (or ``memory_kv``, its projected keys
        and values; ``keep_memory_kv`` receives them when they are projected here, for a cache to keep).
        ``self_mask`` (broadcastable to ``(B, H, T, T_total)``) and ``memory_mask`` (to ``(B, H, T, S)``) are
        boolean, ``True`` = may attend; self-attention is always causal.
        """
        x = self.self_attn_block(x, lambda h: self.self_attn(
            h, mask=self_mask, is_causal=True, positions=positions, cache=cache))
        if self.cross_attn is not None and self.cross_attn_block is not None:
            if memory_kv is None:
                if memory is None:
                    raise ValueError("this decoder layer has cross-attention: pass the encoder memory")
                memory_kv = self.cross_attn.project_kv(memory)  # (B, H, S, D) keys and values
                if keep_memory_kv is not None:  # decoding: projected once per sentence, at its first step
                    keep_memory_kv(memory_kv)
            cross_attn, kv = self.cross_attn, memory_kv
            x = self.cross_attn_block(x, lambda h: cross_attn(h, kv, mask=memory_mask))
        return self.ffn_block(x, self.ffn)


class Encoder(nn.Module):
    """N encoder layers (+ a final LayerNorm when pre-LN). ``(B, S, C) -> (B, S, C)``."""

    def __init__(self, cfg: ModelConfig, n_layers: int) -> None:
        super().__init__()
        rope = None if cfg.positional != "rotary" else RotaryEmbedding(cfg.head_dim, cfg.max_len, cfg.rope_base,
                                                                        cfg.rope_scaling)
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(EncoderLayer(cfg, rope))
        self.norm = norm_layer(cfg) if cfg.norm == "pre" else None
        self.window = cfg.attention_window

    def forward(self, x: Tensor, key_mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        """``key_mask (B, S)``: ``True`` for real tokens; padding is never attended to (nor, with an
        ``attention_window``, tokens further away than that)."""
        mask = None if key_mask is None else key_padding_to_attention_mask(key_mask)  # (B, 1, 1, S)
        if self.window:
            mask = combine_masks(mask, window_mask(x.size(1), self.window, x.device))  # & (S, S) band
        for layer in self.layers:
            x = layer(x, mask, positions)
        return x if self.norm is None else self.norm(x)


class Decoder(nn.Module):
    """N decoder layers (+ a final LayerNorm when pre-LN). ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, cfg: ModelConfig, n_layers: int, cross_attention: bool = True) -> None:
        super().__init__()
        self.cfg = cfg
        rope = None if cfg.positional != "rotary" else RotaryEmbedding(cfg.head_dim, cfg.max_len, cfg.rope_base,
                                                                        cfg.rope_scaling)
        local = rope  # the sliding layers' (Gemma 3's local layers rotate by their own base, unscaled)
        if rope is not None and cfg.local_rope_base is not None:
            local = RotaryEmbedding(cfg.head_dim, cfg.max_len, cfg.local_rope_base)
        self.layers = nn.ModuleList()
        for i in range(n_layers):
            self.layers.append(DecoderLayer(cfg, cross_attention, local if sliding(cfg, i) else rope, i))
        self.norm = norm_layer(cfg) if cfg.norm == "pre" else None

    def new_cache(self, batch_size: int, max_len: int | None = None, *, device: torch.device | str | None = None,
                  dtype: torch.dtype | None = None, windows: bool = True) -> DecoderCache:
        """An empty cache for decoding up to ``max_len`` positions (default: the model's): a ``KVCache`` per
        layer (a sliding layer's keeps its window only, ``WindowKVCache``, unless ``windows`` is False: a prefill
        whose rows are copied out at their own lengths), or with linear attention a ``LinearAttentionState`` (fixed
        size; ``max_len`` does not apply)."""
        cfg = self.cfg
        max_len = cfg.max_len if max_len is None else max_len
        kw = dict(device=device, dtype=dtype)
        self_attn: list[KVCache] | list[LinearAttentionState]
        if cfg.attention == "linear":
            self_attn = [LinearAttentionState(batch_size, cfg.n_heads, cfg.head_dim, **kw) for _ in self.layers]
        else:
            self_attn = [WindowKVCache(batch_size, cfg.kv_heads, cfg.head_dim, cfg.sliding_window, **kw)
                         if windows and sliding(cfg, i) else
                         KVCache(batch_size, cfg.kv_heads, cfg.head_dim, max_len, **kw)
                         for i in range(len(self.layers))]
        return DecoderCache(self_attn, [None] * len(self.layers))

    def forward(self, x: Tensor, memory: Tensor | None = None, *, key_mask: Tensor | None = None,
                memory_key_mask: Tensor | None = None, positions: Tensor | None = None,
                cache: DecoderCache | None = None) -> Tensor:
        """``x (B, T, C)``, ``memory (B, S, C)``.

        ``key_mask (B, T_total)``: ``True`` for real target tokens, covering the cached positions too
        (``T_total = cache.length + T``); None means no target padding (the causal mask alone).
        ``memory_key_mask (B, S)``: ``True`` for real source tokens. ``cache``: see ``new_cache``.
        """
        self_mask = None if key_mask is None else key_padding_to_attention_mask(key_mask)  # (B, 1, 1, T_total)
        memory_mask = None if memory_key_mask is None else key_padding_to_attention_mask(memory_key_mask)
        for i, layer in enumerate(self.layers):
            layer_cache, memory_kv, keep = None, None, None
            if cache is not None:  # the layer projects the memory at the first step, the cache keeps it
                layer_cache, memory_kv, keep = cache.self_attn[i], cache.cross_attn[i], partial(cache.keep_memory_kv, i)
            x = layer(x, memory, self_mask=self_mask, memory_mask=memory_mask, positions=positions,
                      cache=layer_cache, memory_kv=memory_kv, keep_memory_kv=keep)
        return x if self.norm is None else self.norm(x)
