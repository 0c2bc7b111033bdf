"""Attention maps as values: ``record_attention`` and ``attention_maps``.

    with record_attention(model) as maps:      # maps: {module name: (B, H, T, S) weights}
        logits = model(src, tgt)               # forward returns the logits, as always
    maps["decoder.layers.0.cross_attn"]

    maps = attention_maps(model, src=src, tgt=tgt)   # the same in one call (eval mode, no gradients)

No module keeps anything. A ``with record_attention(model)`` block opens an ``AttentionRecord`` in the
caller's context (a ``contextvars.ContextVar``: another thread, or another request of a server, has its own);
while it is open, every ``MultiHeadAttention`` of ``model`` that runs takes its weights from the reference
path (``attend`` returns them as a value beside the output) and hands them to the record under the module's
name. The modules' attributes, their outputs' types and the model's forward are the same as without it.
Under ``torch.compile`` nothing is recorded (a compiled graph holds no such side exit); run the model eagerly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor, nn

__all__ = ["ATTENTION_KINDS", "AttentionRecord", "attention_maps", "record_attention", "records_for"]

# The kinds of attention a model has, as attention_maps' keys name them: "{stack}.layers.{i}.{kind}".
ATTENTION_KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")


class AttentionRecord:
    """The maps of one ``record_attention`` block: ``maps[name]`` is the last ``(B, H, T, S)`` weights the module
    called ``name`` (in ``model.named_modules()``) produced; modules of other models are not its business."""

    def __init__(self, model: nn.Module) -> None:
        self.names = {module: name for name, module in model.named_modules()}
        self.maps: dict[str, Tensor] = {}

    def add(self, module: nn.Module, weights: Tensor) -> None:
        self.maps[self.names[module]] = weights.detach()


_OPEN: ContextVar[tuple[AttentionRecord, ...]] = ContextVar("scratchformer_attention_records", default=())


def records_for(module: nn.Module) -> tuple[AttentionRecord, ...]:
    """The open records that want ``module``'s weights (usually none: then attention takes its fast path)."""
    if torch.compiler.is_compiling():  # ContextVar.get would break the graph; nothing is recorded there
        return ()
    return tuple(r for r in _OPEN.get() if module in r.names)


@contextmanager
def record_attention(model: nn.Module) -> Iterator[dict[str, Tensor]]:
    """Collect the attention weights of ``model``'s modules while the block runs, keyed by module name.

    >>> with record_attention(model) as maps:
    ...     model(src, tgt)
    >>> maps["decoder.layers.0.cross_attn"].shape  # (B, H, T, S)

    The recorded modules use the reference path meanwhile (the fused kernel does not return weights). A
    module that runs several times in the block (decoding step by step) leaves its last weights.
    """
    record = AttentionRecord(model)
    token = _OPEN.set((*_OPEN.get(), record))
    try:
        yield record.maps
    finally:
        _OPEN.reset(token)


@torch.no_grad()
def attention_maps(model: nn.Module, *args: Tensor, **inputs: Tensor) -> dict[str, Tensor]:
    """Run ``model(*args, **inputs)`` once (eval mode, no gradients) and return its attention weights.

    Keys are module names (``"encoder.layers.0.self_attn"``, ``"decoder.layers.1.cross_attn"``; GPT's are
    ``"decoder.layers.i.self_attn"``), values ``(B, H, T, S)`` tensors on the CPU. The model runs on the
    reference attention path meanwhile (see ``record_attention``) and is handed back in its mode.
    """
    was_training = model.training
    model.eval()  # attention dropout would blot out the maps
    try:
        with record_attention(model) as maps:
            model(*args, **inputs)
    finally:
        model.train(was_training)
    return {name: w.float().cpu() for name, w in maps.items()}
