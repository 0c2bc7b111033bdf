"""Decoder-only Transformer language model (GPT).

The paper's decoder without cross-attention: token embedding + positions, N masked self-attention
layers, then a linear map to vocabulary logits. Defaults follow GPT-2 (pre-LN with a final LayerNorm,
GELU, learned positions, output projection tied to the token embedding, no x sqrt(C) scaling)::

    input_ids (B, T) -> Embeddings -> (B, T, C) -> Decoder (causal) -> (B, T, C) -> logits (B, T, V)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import Embeddings, positions_for
from scratchformer.nn.kv_cache import DecoderCache
from scratchformer.nn.layers import Decoder

TRANSPOSE_LIMIT = 256 << 20  # bytes: an output matrix larger than this is used as stored (no second copy)


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


@torch.no_grad()
def output_matrix(model: GPT) -> Tensor | None:
    """The output matrix transposed to ``(C, V)``, a layout whose matrix-vector product runs about 2x faster on CPU;
    made once per model and weights (kept on the model until the weights change: their version counts every in-place
    change but one made through ``.data``, which is seen where it touches any of 4,096 values sampled across the
    matrix), or None for a matrix over
    ``TRANSPOSE_LIMIT`` bytes (Qwen3's 151,936 x 1,024: a second copy of 300 MB would cost more memory than its speed
    is worth)."""
    weight = model.output_weight()
    if weight.numel() * weight.element_size() > TRANSPOSE_LIMIT:
        return None
    key = (weight.data_ptr(), weight._version, weight.dtype, weight.device)
    sample = weight.detach().reshape(-1)[::max(1, weight.numel() // 4096)]  # a change through .data: not versioned
    kept = model.__dict__.get("_output_t")
    if kept is None or kept[0] != key or not torch.equal(kept[1], sample):
        kept = (key, sample.clone(), weight.detach().t().contiguous())
        model.__dict__["_output_t"] = kept
    return kept[2]


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

    def new_cache(self, batch_size: int, max_len: int | None = None, *, windows: bool = True) -> DecoderCache:
        """An empty cache for incremental decoding (see ``forward``'s ``cache``): a KV cache per layer (a sliding
        layer's holds its window only, unless ``windows`` is False), or with ``attention="linear"`` the fixed-size
        recurrent state that replaces it."""
        p = self.output_weight()
        return self.decoder.new_cache(batch_size, max_len, device=p.device, dtype=p.dtype, windows=windows)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, *,
                position_ids: Tensor | None = None, cache: DecoderCache | None = None) -> Tensor:
        """``input_ids (B, T)`` -> next-token logits ``(B, T, V)``: the final linear layer applied to
        ``hidden_states`` (same arguments)."""
        return self.output_logits(self.hidden_states(input_ids, attention_mask, position_ids=position_ids,
                                                     cache=cache))  # (B, T, V)

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """The final linear layer: ``(..., C)`` hidden states -> logits ``(..., V)`` (``mask`` unused: every position
        predicts its next token). Every caller that wants logits asks here (decoding, benchmarks, exports), so that
        what the model does after its last layer is done once.

        Decoding asks for one position a row, ``(B, C)``, without gradients: that product is bound by reading the
        ``(V, C)`` matrix, and on CPU it runs about twice as fast against the matrix stored transposed, ``(C, V)``
        (``output_matrix``, kept until the weights change). Training, and tracing for an export, take the plain
        ``F.linear``. With ``logit_softcap`` c (Gemma 2; Gemma 3 where its config sets it) each logit z becomes
        c tanh(z / c): bounded, and every caller gets it."""
        if hidden.dim() == 2 and not torch.is_grad_enabled() and not _tracing():
            transposed = output_matrix(self)
            logits = hidden @ transposed if transposed is not None else F.linear(hidden, self.output_weight())  # (B, V)
        else:
            logits = F.linear(hidden, self.output_weight())
        cap = self.config.logit_softcap
        return cap * torch.tanh(logits / cap) if cap else logits

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
