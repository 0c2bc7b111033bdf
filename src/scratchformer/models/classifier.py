"""Encoder-only Transformer classifier (BERT-like).

    input_ids (B, T) -> Embeddings -> Encoder -> hidden (B, T, C) -> pool -> (B, C) -> linear -> (B, K)

Pooling (config field ``pooling``): ``mean`` averages the hidden states of the real (unpadded) tokens;
``max`` takes each feature's largest value over the real tokens (as a CNN text classifier pools);
``cls`` takes the first position, which the tokenizer must fill with a [CLS] token; ``pooler`` is BERT's
pooler, ``tanh(W h_0 + b)`` on that first position (a ``(C, C)`` layer of its own), which makes the model
exactly Hugging Face's ``BertForSequenceClassification`` when the encoder's settings are BERT's too.

The same module serves masked-token pretraining (``task=mlm``): ``predict_tokens(ids, mask, chosen)``
scores the vocabulary at the chosen positions through the tied token embeddings, so a pretrained run
is a classifier whose encoder has learnt something and whose head is still untrained.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import Embeddings, positions_for
from scratchformer.nn.layers import Encoder
from scratchformer.nn.masks import padding_mask


class EncoderClassifier(nn.Module):
    """``forward(input_ids, mask) -> class logits (B, n_classes)``; ``encode`` -> ``(B, T, C)``.

    ``mask (B, T)``: ``True``/1 for real tokens, ``False``/0 for padding; default ``input_ids != pad_id``.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        check_family(self, config)
        self.config = config
        self.embed = Embeddings(nn.Embedding(config.vocab_size, config.d_model), config)
        self.encoder = Encoder(config, config.n_layers)
        self.dropout = nn.Dropout(config.dropout)
        self.pooler = (nn.Linear(config.d_model, config.d_model, bias=config.bias) if config.pooling == "pooler"
                       else None)
        self.head = nn.Linear(config.d_model, config.n_classes)
        init_weights(self, config)

    def _mask(self, input_ids: Tensor, mask: Tensor | None) -> Tensor:
        return padding_mask(input_ids, self.config.pad_id) if mask is None else mask.bool()

    def encode(self, input_ids: Tensor, mask: Tensor | None = None) -> Tensor:
        """``input_ids (B, T)`` -> last hidden states ``(B, T, C)``."""
        T = input_ids.size(1)
        if T > self.config.max_len:
            raise ValueError(f"input of {T} tokens is longer than max_len={self.config.max_len}")
        positions = positions_for(T, device=input_ids.device)
        return self.encoder(self.embed(input_ids, positions), self._mask(input_ids, mask), positions)

    def pool(self, hidden: Tensor, mask: Tensor) -> Tensor:
        """``(B, T, C)`` hidden states, ``(B, T)`` real-token mask -> ``(B, C)`` sentence vectors."""
        if self.config.pooling == "cls":
            return hidden[:, 0]
        if self.pooler is not None:  # BERT: the first token through a dense layer and tanh
            return torch.tanh(self.pooler(hidden[:, 0]))
        if self.config.pooling == "max":  # padding can never win: it is set to the lowest number first
            return hidden.masked_fill(~mask.unsqueeze(-1), torch.finfo(hidden.dtype).min).amax(1)
        m = mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)

    def forward(self, input_ids: Tensor, mask: Tensor | None = None) -> Tensor:
        """Class logits ``(B, n_classes)``: the pooled hidden states through the head."""
        mask = self._mask(input_ids, mask)
        return self.output_logits(self.encode(input_ids, mask), mask)

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """What follows the encoder: ``(B, T, C)`` hidden states pooled over the real tokens of ``mask (B, T)``,
        through the head -> class logits ``(B, n_classes)``."""
        mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device) if mask is None else mask.bool()
        return self.head(self.dropout(self.pool(hidden, mask)))  # (B, C) -> (B, n_classes)

    def predict_tokens(self, input_ids: Tensor, mask: Tensor | None, chosen: Tensor) -> Tensor:
        """Logits over the vocabulary at the ``chosen`` positions (a ``(B, T)`` bool mask), ``(N, V)`` for N
        chosen positions: the hidden states times the token embedding matrix (tied, as BERT's masked-token
        head), which is what masked-token pretraining (``task=mlm``) trains."""
        hidden = self.encode(input_ids, self._mask(input_ids, mask))  # (B, T, C)
        return hidden[chosen.bool()] @ self.embed.token.weight.T  # (N, C) @ (C, V) -> (N, V)
