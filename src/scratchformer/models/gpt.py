"""Decoder-only Transformer language model (GPT).

The paper's decoder without cross-attention: token embedding + positions, N masked self-attention
layers, then a linear map to vocabulary logits. Defaults follow GPT-2 (pre-LN with a final LayerNorm,
GELU, learned positions, output projection tied to the token embedding, no x sqrt(C) scaling)::

    input_ids (B, T) -> Embeddings -> (B, T, C) -> Decoder (causal) -> (B, T, C) -> logits (B, T, V)
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import Embeddings, positions_for
from scratchformer.nn.kv_cache import DecoderCache
from scratchformer.nn.layers import Decoder


class GPT(nn.Module):
    """A decoder-only language model. ``forward(input_ids) -> logits (B, T, V)``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        check_family(self, config)
        self.config = config
        self.embed = Embeddings(nn.Embedding(config.vocab_size, config.d_model), config)
        self.decoder = Decoder(config, config.n_layers, cross_attention=False)
        # Tied: logits = h @ E^T with the token embedding E (§3.4). Untied: a separate matrix.
        self.lm_head = None if config.tie_embeddings else nn.Linear(config.d_model, config.vocab_size, bias=False)
        init_weights(self, config)

    def output_weight(self) -> Tensor:
        """The ``(V, C)`` matrix of the final linear layer (the token embedding when tied)."""
        return self.embed.token.weight if self.lm_head is None else self.lm_head.weight

    def new_cache(self, batch_size: int, max_len: int | None = None) -> DecoderCache:
        """An empty cache for incremental decoding (see ``forward``'s ``cache``): a KV cache per layer, or with
        ``attention="linear"`` the fixed-size recurrent state that replaces it."""
        p = self.output_weight()
        return self.decoder.new_cache(batch_size, max_len, device=p.device, dtype=p.dtype)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                position_ids: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        """``input_ids (B, T)`` -> next-token logits ``(B, T, V)``: the final linear layer applied to
        ``hidden_states`` (same arguments)."""
        return self.output_logits(self.hidden_states(input_ids, attention_mask, position_ids=position_ids,
                                                     cache=cache))  # (B, T, V)

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """The final linear layer: ``(B, T, C)`` hidden states -> logits ``(B, T, V)`` (``mask`` unused: every
        position predicts its next token)."""
        return F.linear(hidden, self.output_weight())

    def hidden_states(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                      position_ids: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        """``input_ids (B, T)`` -> the last layer's output ``(B, T, C)``, before the vocabulary projection.

        ``attention_mask (B, T_total)``: ``True``/1 for real tokens, ``False``/0 for padding (left
        padding for batched prompts of different lengths); it covers the cached positions too
        (``T_total = cache.length + T``). Positions then count real tokens only, so a padded prompt
        gives the same logits as the prompt alone. ``cache``: from ``new_cache``; the call appends
        this step's keys and values to it (or, with linear attention, adds them to its running sums).
        """
        T = input_ids.size(1)
        past = cache.length if cache is not None else 0
        if past + T > self.config.max_len:
            raise ValueError(f"sequence of {past + T} tokens is longer than max_len={self.config.max_len}")
        key_mask = None if attention_mask is None else attention_mask.bool()
        if position_ids is None:
            position_ids = positions_for(T, past, key_mask, device=input_ids.device)
        x = self.embed(input_ids, position_ids)  # (B, T, C)
        return self.decoder(x, key_mask=key_mask, positions=position_ids, cache=cache)  # (B, T, C)
