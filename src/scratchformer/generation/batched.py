"""Decoding many sentences at once: sorted by length into batches of at most ``max_tokens`` padded source tokens
(``data.batching.sorted_batches``: many short ones or few long ones a batch, next to no padding), each batch
decoded by beam search or greedily; the results come back in input order."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from scratchformer.data.batching import pad_batch, sorted_batches
from scratchformer.generation.beam import beam_search
from scratchformer.generation.greedy import greedy_translate
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID

__all__ = ["translate_ids"]


def translate_ids(model: nn.Module, sources: list[list[int]], *, beam: int = 4, length_penalty: float = 0.6,
                  max_tokens: int = 1024, progress: Callable[[int], object] | None = None) -> list[list[int]]:
    """The target ids of each source (ids ending with ``<eos>``), in input order. ``beam`` 1: greedy. Each
    translation may be as long as its source + 50 tokens (§6.1), within the model's ``max_len``.
    ``progress(n)``: told after each batch of n sources."""
    device = next(model.parameters()).device
    results: list[list[int]] = [[] for _ in sources]
    for idx in sorted_batches([len(s) for s in sources], max_tokens):
        src, mask = pad_batch([sources[i] for i in idx], PAD_ID)  # (B, S), (B, S) True = real token
        src, mask = src.to(device), mask.to(device)
        max_new = min(model.config.max_len, src.size(1) + 50)  # type: ignore[union-attr]
        if beam > 1:
            hyps = beam_search(model, src, mask, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=beam,
                               length_penalty=length_penalty, max_new_tokens=max_new)
        else:
            hyps = greedy_translate(model, src, mask, bos_id=BOS_ID, eos_id=EOS_ID, max_new_tokens=max_new)
        for i, h in zip(idx, hyps):
            results[i] = h
        if progress is not None:
            progress(len(idx))
    return results
