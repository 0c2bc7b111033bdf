"""The building blocks of "Attention Is All You Need", one concept per module, in paper order:

masks -> attention (scaled dot-product, multi-head) -> kv_cache -> feedforward (experts: a mixture of them) ->
embedding (tokens, positions) -> patches (an image as a sequence, for the Vision Transformer) -> layers (residual +
LayerNorm, encoder/decoder layers and stacks). Beside them, recording: the attention weights of a run,
returned as values (``record_attention``, ``attention_maps``).
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["causal_mask", "combine_masks", "key_padding_to_attention_mask", "padding_mask"],
                    "scratchformer.nn.masks"),
    **dict.fromkeys(["attend", "attention_reference", "CrossAttention", "MultiHeadAttention", "set_attention_impl"],
                    "scratchformer.nn.attention"),
    **dict.fromkeys(["attention_maps", "record_attention"], "scratchformer.nn.recording"),
    **dict.fromkeys(["DecoderCache", "KVCache"], "scratchformer.nn.kv_cache"),
    **dict.fromkeys(["FeedForward"], "scratchformer.nn.feedforward"),
    **dict.fromkeys(["load_balancing_loss", "MixtureOfExperts", "router_aux_loss"], "scratchformer.nn.experts"),
    **dict.fromkeys(["Embeddings", "LearnedPositionalEmbedding", "RotaryEmbedding", "sinusoidal_table",
                     "SinusoidalPositionalEncoding"],
                    "scratchformer.nn.embedding"),
    **dict.fromkeys(["patchify", "PatchEmbedding", "PatchEmbeddings"], "scratchformer.nn.patches"),
    **dict.fromkeys(["Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "ResidualNorm"], "scratchformer.nn.layers"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
