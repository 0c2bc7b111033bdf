"""The logit lens: what a model would predict if its stack of layers stopped after the embeddings, or after
any one of its blocks (nostalgebraist, "interpreting GPT: the logit lens", 2020).

Every block adds its sub-layers' outputs to the residual stream ``x (B, T, C)`` (§3.1, ``nn/layers.py``), and
the model reads only the last state of that stream: through the final norm (pre-LN) and the output layer.
The lens reads every state the same way::

    states = residual_stream(gpt, input_ids)           # L + 1 tensors (B, T, C): embeddings, block 0, ...
    logits = read_out(gpt, states[l])                  # (B, T, V), as the model reads states[-1]
    lens = logit_lens(gpt, input_ids, top_k=5)         # every layer at once, reduced to what a page shows
    lens = logit_lens(seq2seq, src=src, tgt=tgt)       # an encoder-decoder's decoder (the memory fixed)
    probs = class_lens(classifier, input_ids)          # (L + 1, B, K): each layer through pooling and head

So the last state's read-out is the model's own output (a test holds it to 1e-6). Post-LN (the paper's
norm) has no final norm: each block already ends in its own LayerNorm, so each state is read by the output
layer alone; the embeddings' state is the one read before any norm.

The states are values this module returns: it runs the model's own blocks one after another with the masks
and positions of the model's forward called without a cache or masks (padding found by ``pad_id`` where that
forward finds it: a classifier's input, a source), and no module keeps anything. The attention inside them is
recorded as usual (``nn.recording``) when asked; a test holds each state equal to the block's own output.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.models.classifier import EncoderClassifier
from scratchformer.models.gpt import GPT
from scratchformer.models.seq2seq import Seq2SeqTransformer
from scratchformer.nn.embedding import positions_for
from scratchformer.nn.masks import combine_masks, key_padding_to_attention_mask, padding_mask, window_mask

__all__ = ["TokenLens", "class_lens", "logit_lens", "read_out", "residual_stream"]


def _check_length(model: nn.Module, n: int) -> None:
    if n > model.config.max_len:
        raise ValueError(f"sequence of {n} tokens is longer than max_len={model.config.max_len}")


def residual_stream(model: nn.Module, input_ids: Tensor | None = None, *, src: Tensor | None = None,
                    tgt: Tensor | None = None) -> list[Tensor]:
    """The residual stream after the embeddings and after each block: ``L + 1`` tensors ``(B, T, C)``, before
    any final norm. A GPT or a classifier reads ``input_ids (B, T)``; an encoder-decoder's decoder reads
    ``tgt (B, T)`` over the memory of ``src (B, S)`` (its source padding masked, as in its forward)."""
    if isinstance(model, Seq2SeqTransformer):
        src_mask = padding_mask(src, model.config.pad_id)
        memory = model.encode(src, src_mask)  # (B, S, C)
        ids, embed, blocks = tgt, model.tgt_embed, model.decoder.layers
        context = {"memory": memory, "memory_mask": key_padding_to_attention_mask(src_mask)}  # (B, 1, 1, S)
    elif isinstance(model, GPT):
        ids, embed, blocks, context = input_ids, model.embed, model.decoder.layers, {}
    elif isinstance(model, EncoderClassifier):
        ids, embed, blocks = input_ids, model.embed, model.encoder.layers
        mask = key_padding_to_attention_mask(padding_mask(ids, model.config.pad_id))  # (B, 1, 1, T)
        if model.config.attention_window:  # & the (T, T) band, as the encoder's forward
            mask = combine_masks(mask, window_mask(ids.size(1), model.config.attention_window, ids.device))
        context = {"mask": mask}
    else:
        raise TypeError(f"the lens reads a GPT, an encoder-decoder or an encoder classifier, not "
                        f"{type(model).__name__}")
    _check_length(model, ids.size(1))
    positions = positions_for(ids.size(1), device=ids.device)
    x = embed(ids, positions)  # (B, T, C)
    states = [x]
    for block in blocks:  # the stack's forward, one block at a time (the decoder's is always causal)
        x = block(x, positions=positions, **context)
        states.append(x)
    return states


def read_out(model: nn.Module, state: Tensor, mask: Tensor | None = None) -> Tensor:
    """One residual-stream state read as the model reads its last: the final norm (pre-LN; post-LN has none),
    then the output layer -> logits ``(B, T, V)``; a classifier pools over the real tokens of ``mask (B, T)``
    (True = real) and applies its head -> ``(B, K)``."""
    stack = model.encoder if isinstance(model, EncoderClassifier) else model.decoder
    h = state if stack.norm is None else stack.norm(state)
    if isinstance(model, EncoderClassifier):
        return model.head(model.pool(h, mask))  # (B, C) -> (B, K); dropout is off in eval mode
    return F.linear(h, model.output_weight())  # (B, T, V)


@contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()  # dropout off: the lens reads the model as it predicts
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


@dataclass(frozen=True)
class TokenLens:
    """The lens of a token-predicting model, every layer ``l`` (0: the embeddings; ``i + 1``: after block
    ``i``) at every position, reduced to what a page shows."""

    top_ids: Tensor      # (L + 1, B, T, k) the k most likely tokens after layer l, best first
    top_probs: Tensor    # (L + 1, B, T, k) their probabilities
    final_ids: Tensor    # (B, T) the model's own most likely token at each position (the last layer's first)
    final_probs: Tensor  # (L + 1, B, T) the probability layer l gives that token


def logit_lens(model: nn.Module, input_ids: Tensor | None = None, *, src: Tensor | None = None,
               tgt: Tensor | None = None, top_k: int = 5) -> TokenLens:
    """Every layer's next-token distribution (a GPT on ``input_ids``; an encoder-decoder's decoder on ``tgt``
    over ``src``), in eval mode without gradients. A layer's ``(B, T, V)`` probabilities are reduced at once,
    so a large vocabulary costs one layer's distribution at a time."""
    if isinstance(model, EncoderClassifier):
        raise TypeError("an encoder classifier predicts no token: its lens is class_lens")
    with _evaluating(model):
        states = residual_stream(model, input_ids, src=src, tgt=tgt)
        last = read_out(model, states[-1]).float().softmax(-1)  # (B, T, V)
        final = last.argmax(-1)  # (B, T)
        k = min(top_k, last.size(-1))
        tops, finals = [], []
        for state in states:
            probs = last if state is states[-1] else read_out(model, state).float().softmax(-1)
            tops.append(probs.topk(k, dim=-1))
            finals.append(probs.gather(-1, final[..., None])[..., 0])  # (B, T)
    return TokenLens(torch.stack([t.indices for t in tops]), torch.stack([t.values for t in tops]), final,
                     torch.stack(finals))


def class_lens(model: EncoderClassifier, input_ids: Tensor) -> Tensor:
    """An encoder classifier's class probabilities after each layer, ``(L + 1, B, K)``: each state through
    the final norm (pre-LN), the pooling over the real tokens and the head (eval mode, no gradients)."""
    if not isinstance(model, EncoderClassifier):
        raise TypeError(f"class_lens reads an encoder classifier, not {type(model).__name__}")
    with _evaluating(model):
        mask = padding_mask(input_ids, model.config.pad_id)
        states = residual_stream(model, input_ids)
        return torch.stack([read_out(model, s, mask).float().softmax(-1) for s in states])
