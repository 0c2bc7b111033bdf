"""The encoder-decoder Transformer of the paper (§3.1, Figure 1).

    src (B, S) -> source Embeddings -> Encoder -> memory (B, S, C)
    tgt (B, T) -> target Embeddings -> Decoder(masked self-attn, cross-attn over memory, FFN)
               -> (B, T, C) -> linear -> logits (B, T, V_tgt)

Defaults are the paper's: post-LN, ReLU, sinusoidal positions, embeddings x sqrt(C), and one
vocabulary whose embedding matrix is shared by the source embedding, the target embedding and the
pre-softmax linear map (§3.4). With ``tgt_vocab_size`` set, source and target vocabularies are
separate; ``tie_embeddings`` then ties only the target embedding to the output layer.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import Embeddings, positions_for
from scratchformer.nn.kv_cache import DecoderCache
from scratchformer.nn.layers import Decoder, Encoder
from scratchformer.nn.masks import padding_mask


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer. ``forward(src, tgt) -> logits (B, T, V_tgt)``.

    The padding masks ``src_padding_mask (B, S)`` and ``tgt_padding_mask (B, T)`` are booleans, ``True`` for
    real tokens (the same polarity as every mask here); when not given, the source's is ``src != pad_id``.
    The decoder is always causal: that is no argument, it is built in.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        check_family(self, config)
        self.config = config
        C = config.d_model
        src_token = nn.Embedding(config.vocab_size, C)
        share = config.shared_vocab and config.tie_embeddings
        tgt_token = src_token if share else nn.Embedding(config.target_vocab_size, C)
        self.src_embed = Embeddings(src_token, config)
        self.tgt_embed = Embeddings(tgt_token, config)
        assert config.n_encoder_layers is not None and config.n_decoder_layers is not None
        self.encoder = Encoder(config, config.n_encoder_layers)
        self.decoder = Decoder(config, config.n_decoder_layers, cross_attention=True)
        self.lm_head = None if config.tie_embeddings else nn.Linear(C, config.target_vocab_size, bias=False)
        init_weights(self, config)

    def output_weight(self) -> Tensor:
        """The ``(V_tgt, C)`` matrix of the final linear layer (the target embedding when tied)."""
        return self.tgt_embed.token.weight if self.lm_head is None else self.lm_head.weight

    def _check_length(self, n: int, what: str) -> None:
        if n > self.config.max_len:
            raise ValueError(f"{what} of {n} tokens is longer than max_len={self.config.max_len}")

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> Tensor:
        """``src (B, S)`` token ids -> encoder memory ``(B, S, C)``. ``src_padding_mask (B, S)``: True = real."""
        self._check_length(src.size(1), "source")
        if src_padding_mask is None:
            src_padding_mask = padding_mask(src, self.config.pad_id)
        positions = positions_for(src.size(1), device=src.device)
        return self.encoder(self.src_embed(src, positions), src_padding_mask.bool(), positions)

    def decode(self, tgt: Tensor, memory: Tensor, src_padding_mask: Tensor | None = None, *,
               tgt_padding_mask: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        """``tgt (B, T)`` target ids so far, ``memory (B, S, C)`` -> logits ``(B, T, V_tgt)``.

        ``src_padding_mask (B, S)``: True for real source tokens (cross-attention never looks at padding).
        ``tgt_padding_mask (B, T_total)``: True for real target tokens, only needed when padding can stand
        *before* real tokens; trailing padding is harmless under the causal mask. ``cache``: from
        ``new_cache``, for step-by-step decoding (the encoder keys/values are projected once).
        """
        T = tgt.size(1)
        past = cache.length if cache is not None else 0
        self._check_length(past + T, "target")
        key_mask = None if tgt_padding_mask is None else tgt_padding_mask.bool()
        positions = positions_for(T, past, key_mask, device=tgt.device)
        x = self.tgt_embed(tgt, positions)  # (B, T, C)
        memory_key_mask = None if src_padding_mask is None else src_padding_mask.bool()
        x = self.decoder(x, memory, key_mask=key_mask, memory_key_mask=memory_key_mask, positions=positions,
                         cache=cache)
        return self.output_logits(x)  # (B, T, V_tgt)

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """The final linear layer: the decoder's ``(B, T, C)`` -> logits ``(B, T, V_tgt)`` (``mask`` unused)."""
        return F.linear(hidden, self.output_weight())

    def forward(self, src: Tensor, tgt: Tensor, src_padding_mask: Tensor | None = None,
                tgt_padding_mask: Tensor | None = None) -> Tensor:
        """Teacher forcing: ``src (B, S)``, ``tgt (B, T)`` (the shifted-right target) -> ``(B, T, V_tgt)``."""
        if src_padding_mask is None:
            src_padding_mask = padding_mask(src, self.config.pad_id)
        memory = self.encode(src, src_padding_mask)
        return self.decode(tgt, memory, src_padding_mask, tgt_padding_mask=tgt_padding_mask)

    def new_cache(self, batch_size: int, max_len: int | None = None) -> DecoderCache:
        """An empty decoder cache for incremental decoding (see ``decode``): KV caches, or with
        ``attention="linear"`` the recurrent states that replace them (the cross-attention part is the same)."""
        p = self.output_weight()
        return self.decoder.new_cache(batch_size, max_len, device=p.device, dtype=p.dtype)
