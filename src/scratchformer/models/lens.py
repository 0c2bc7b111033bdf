"""The logit lens: what a model would predict if its stack of layers stopped after the embeddings, or after
any one of its blocks (nostalgebraist, "interpreting GPT: the logit lens", 2020).

Every block adds its sub-layers' outputs to the residual stream ``x (B, T, C)`` (§3.1, ``nn/layers.py``), and
the model reads only the last state of that stream: through the final norm (pre-LN) and its output layer. The
lens reads every state the same way::

    states = residual_stream(gpt, input_ids)           # L + 1 tensors (B, T, C): embeddings, block 0, ...
    logits = read_out(gpt, states[l])                  # (B, T, V), as the model reads states[-1]
    lens = logit_lens(gpt, input_ids, top_k=5)         # every layer at once, reduced to what a page shows
    lens = logit_lens(seq2seq, src=src, tgt=tgt)       # an encoder-decoder's decoder (the memory fixed)
    probs = class_lens(classifier, input_ids)          # (L + 1, B, K): each layer through pooling and head
    probs = class_lens(vit, images)                    # a ViT's: each layer through its class token and head

So the last state's read-out is the model's own output (a test holds it to 1e-6). Post-LN (the paper's
norm) has no final norm: each block already ends in its own LayerNorm, so each state is read by the output
layer alone; the embeddings' state is the one read before any norm.

The states come from the model's own forward: the lens runs it once, taking what the embeddings and each block
hand on (the family registry's ``parts``: its embeddings, blocks and final norm), so it knows nothing of a
family's masks or positions, and reads every family the registry lists. The read-out is the norm the registry
names and the model's own ``output_logits`` (what its forward applies after the stack). The hooks that take the
states are removed when the pass ends and no module keeps anything; the attention inside is recorded as usual
(``nn.recording``) when asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.families import family, parts
from scratchformer.models import eval_mode
from scratchformer.nn.masks import padding_mask

__all__ = ["TokenLens", "class_lens", "logit_lens", "read_out", "residual_stream"]


def residual_stream(model: nn.Module, *inputs: Any, **named: Any) -> list[Tensor]:
    """The residual stream after the embeddings and after each block: ``L + 1`` tensors ``(B, T, C)``, before
    any final norm, from the model's own forward on its inputs (``input_ids``; an encoder-decoder's ``src`` and
    ``tgt``, its decoder's stream; a ViT's ``images``)."""
    where = parts(model)
    states: list[Tensor] = []
    keep = lambda module, args, out: states.append(out)  # noqa: E731
    hooks = [m.register_forward_hook(keep) for m in (where.embeddings, *where.blocks)]
    try:
        model(*inputs, **named)
    finally:
        for hook in hooks:
            hook.remove()
    return states


def read_out(model: nn.Module, state: Tensor, mask: Tensor | None = None) -> Tensor:
    """One residual-stream state read as the model reads its last: the final norm (pre-LN; post-LN has none),
    then the model's output layer -> logits ``(B, T, V)``; a classifier's pooling over the real tokens of ``mask
    (B, T)`` (True = real; a ViT its class token) and head -> ``(B, K)``."""
    norm = parts(model).final_norm
    return model.output_logits(state if norm is None else norm(state), mask)


@dataclass(frozen=True)
class TokenLens:
    """The lens of a token-predicting model, every layer ``l`` (0: the embeddings; ``i + 1``: after block
    ``i``) at every position, reduced to what a page shows."""

    top_ids: Tensor      # (L + 1, B, T, k) the k most likely tokens after layer l, best first
    top_probs: Tensor    # (L + 1, B, T, k) their probabilities
    final_ids: Tensor    # (B, T) the model's own most likely token at each position (the last layer's first)
    final_probs: Tensor  # (L + 1, B, T) the probability layer l gives that token


def _needs(model: nn.Module, lens: str, other: str) -> None:
    entry = family(model.config.arch)
    if entry.lens != lens:
        raise TypeError(f"{entry.title} has the {entry.lens} lens: use {other}")


def logit_lens(model: nn.Module, *inputs: Any, top_k: int = 5, **named: Any) -> TokenLens:
    """Every layer's next-token distribution (a GPT on ``input_ids``; an encoder-decoder's decoder on ``tgt``
    over ``src``), in eval mode without gradients. A layer's ``(B, T, V)`` probabilities are reduced at once,
    so a large vocabulary costs one layer's distribution at a time."""
    _needs(model, "tokens", "class_lens")
    with eval_mode(model), torch.no_grad():
        states = residual_stream(model, *inputs, **named)
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


def class_lens(model: nn.Module, inputs: Tensor) -> Tensor:
    """A classifier's class probabilities after each layer, ``(L + 1, B, K)``: each state through the final norm
    (pre-LN), the pooling (over the real tokens of ``inputs``, ids; a ViT's class token, of ``inputs``, images)
    and the head, in eval mode without gradients."""
    _needs(model, "classes", "logit_lens")
    tokens = family(model.config.arch).reads_tokens
    mask = padding_mask(inputs, model.config.pad_id) if tokens else None  # given to forward too: one mask
    with eval_mode(model), torch.no_grad():
        states = residual_stream(model, inputs, *([mask] if tokens else []))
        return torch.stack([read_out(model, s, mask).float().softmax(-1) for s in states])
