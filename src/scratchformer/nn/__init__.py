"""The building blocks of "Attention Is All You Need", one concept per module, in paper order:

masks -> attention (scaled dot-product, multi-head) -> kv_cache -> feedforward -> embedding
(tokens, positions) -> layers (residual + LayerNorm, encoder/decoder layers and stacks).
"""

from scratchformer.nn.attention import (
    MultiHeadAttention,
    attend,
    attention_reference,
    record_attention,
    set_attention_impl,
)
from scratchformer.nn.embedding import (
    Embeddings,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)
from scratchformer.nn.feedforward import FeedForward
from scratchformer.nn.kv_cache import DecoderCache, KVCache
from scratchformer.nn.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, ResidualNorm
from scratchformer.nn.masks import causal_mask, combine_masks, key_padding_to_attention_mask, padding_mask

__all__ = [
    "Decoder", "DecoderCache", "DecoderLayer", "Embeddings", "Encoder", "EncoderLayer", "FeedForward",
    "KVCache", "LearnedPositionalEmbedding", "MultiHeadAttention", "ResidualNorm", "RotaryEmbedding",
    "SinusoidalPositionalEncoding", "attend", "attention_reference", "causal_mask", "combine_masks",
    "key_padding_to_attention_mask", "padding_mask", "record_attention", "set_attention_impl",
    "sinusoidal_table",
]
