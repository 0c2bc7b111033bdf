"""A GPT that classifies: the decoder-only model's hidden state at each text's last real token, through a head.

    input_ids (B, T) -> Embeddings -> Decoder (causal) -> (B, T, C) -> the last real token's row (B, C)
                     -> linear (no bias, as GPT-2's ``score``) -> class logits (B, K)

Why the last token: under the causal mask, position t has seen tokens 0..t only, so the last *real* token is the
one position that has read the whole text (the first has read one token). Why *real*: a batch pads its shorter
texts; the last position of a right-padded row is a pad, which has read the text and then padding, and its state
changes with the amount of padding (the bug of a classifier that reads ``hidden[:, -1]``). Here the position is
found from the mask, and positions count real tokens only (``GPT.hidden_states``), so padding on the right or the
left changes nothing. This is Hugging Face's ``GPT2ForSequenceClassification``, which the tests check it against.

The model keeps a GPT's ``embed`` and ``decoder`` by their names, so a GPT run's weights load into it as they
are (``train/fine_tune.py``); its config is a GPT's with ``pooling="last"`` and ``n_classes``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.models.gpt import GPT
from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.embedding import Embeddings
from scratchformer.nn.layers import Decoder
from scratchformer.nn.masks import padding_mask

__all__ = ["GPTClassifier", "last_real"]


def last_real(mask: Tensor) -> Tensor:
    """``(B, T)`` real-token mask -> the index of each row's last real token ``(B,)`` (left or right padding)."""
    positions = torch.arange(mask.size(1), device=mask.device)  # (T,)
    return (positions * mask.long()).argmax(-1)  # the largest real position; 0 for a row of padding only


class GPTClassifier(nn.Module):
    """``forward(input_ids, mask) -> class logits (B, n_classes)``: a GPT's last real token through ``head``.

    ``mask (B, T)``: ``True``/1 for real tokens, ``False``/0 for padding; default ``input_ids != pad_id``.
    """

    hidden_states = GPT.hidden_states  # the GPT's own: embeddings, causal decoder, positions over real tokens

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        check_family(self, config)
        self.config = config
        self.embed = Embeddings(nn.Embedding(config.vocab_size, config.d_model), config)
        self.decoder = Decoder(config, config.n_layers, cross_attention=False)
        self.head = nn.Linear(config.d_model, config.n_classes, bias=False)  # (K, C)
        init_weights(self, config)

    def forward(self, input_ids: Tensor, mask: Tensor | None = None) -> Tensor:
        """Class logits ``(B, n_classes)`` from the hidden state at each row's last real token."""
        mask = padding_mask(input_ids, self.config.pad_id) if mask is None else mask.bool()
        return self.output_logits(self.hidden_states(input_ids, mask), mask)

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """What follows the decoder: the ``(B, T, C)`` hidden state at each row's last real token of ``mask (B, T)``
        (the last position without one) through the head -> class logits ``(B, n_classes)``."""
        mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device) if mask is None else mask.bool()
        last = hidden[torch.arange(hidden.size(0), device=hidden.device), last_real(mask)]  # (B, C)
        return self.head(last)  # (B, n_classes)
