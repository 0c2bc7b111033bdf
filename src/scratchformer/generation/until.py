"""Greedy continuation of many prompts until each stops: at an end-of-text token, when ``stop`` says so (a stop
sequence seen in its text, say), or after ``max_new_tokens``. What a generation benchmark (GSM8K) asks of a model.

The prompts are sorted longest first and batched by a token budget (rows x (longest prompt + max_new_tokens)
positions); a batch's prompts are left-padded and read in one pass into the KV cache, then each step reads one token
a row. A row that has stopped leaves the batch at once (its cache rows are dropped, ``DecoderCache.reorder``), so
the batch shrinks as its answers end, instead of running every row to the longest answer.

Masks are boolean with ``True`` = real token, as everywhere in scratchformer; the model numbers positions by real
tokens, so a padded row continues exactly as it would alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

from scratchformer.data.batching import pad_batch
from scratchformer.generation.common import eval_mode
from scratchformer.generation.sampling import output_matrix
from scratchformer.models import GPT

__all__ = ["generate_until"]


def _batches(lengths: Sequence[int], max_new_tokens: int, max_tokens: int) -> list[list[int]]:
    """Indices longest prompt first (ties in input order), cut so that rows x (longest + new) <= ``max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * (lengths[batches[-1][0]] + max_new_tokens) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


@torch.no_grad()
def generate_until(model: GPT, prompts: Sequence[Sequence[int]], max_new_tokens: int, *,
                   eos_ids: Sequence[int] = (), stop: Callable[[int, list[int]], bool] | None = None,
                   max_tokens: int = 16384, progress: Callable[[int], object] | None = None) -> list[list[int]]:
    """The greedy new tokens of each prompt, in input order, without the end-of-text token that ended it.

    - ``prompts``: token ids, each at least one token and at most ``model.config.max_len - max_new_tokens``.
    - ``eos_ids``: a row ends when it emits one of them (not kept).
    - ``stop(i, new)``: asked after each step for each row still going (``i`` its index in ``prompts``, ``new`` its
      new tokens so far); True ends it (the tokens are kept: the caller cuts the text where it stops).
    - ``progress(n)``: told as each batch is done, with its number of prompts.
    """
    window = model.config.max_len
    too_long = [len(p) for p in prompts if not 0 < len(p) <= window - max_new_tokens]
    if too_long:
        raise ValueError(f"a prompt of {too_long[0]} tokens: each needs 1 to {window - max_new_tokens} (the window "
                         f"of {window} less {max_new_tokens} new tokens)")
    out: list[list[int]] = [[] for _ in prompts]
    with eval_mode(model):
        for batch in _batches([len(p) for p in prompts], max_new_tokens, max_tokens):
            _run_batch(model, [prompts[i] for i in batch], batch, max_new_tokens, set(eos_ids), stop, out)
            if progress is not None:
                progress(len(batch))
    return out


def _run_batch(model: GPT, prompts: list[Sequence[int]], index: list[int], max_new_tokens: int, eos: set[int],
               stop: Callable[[int, list[int]], bool] | None, out: list[list[int]]) -> None:
    """One batch, its rows leaving as they end; each row's new tokens into ``out`` at its index."""
    device = model.output_weight().device
    ids, mask = (t.to(device) for t in pad_batch(prompts, left=True))  # (B, T) each
    T = ids.size(1)
    mask = torch.cat([mask, mask.new_ones(len(prompts), max_new_tokens)], 1)  # (B, T + new)
    cache = model.new_cache(len(prompts), T + max_new_tokens)
    out_t = output_matrix(model)  # (C, V), or None: the (V, C) weight as it is
    rows = list(index)  # the prompt index of each live row
    hidden = model.hidden_states(ids, mask[:, :T], cache=cache)[:, -1]  # (B, C)
    for step in range(max_new_tokens):
        logits = hidden @ out_t if out_t is not None else F.linear(hidden, model.output_weight())  # (B, V)
        nxt = logits.argmax(-1)  # (B,)
        keep = []
        for r, (i, token) in enumerate(zip(rows, nxt.tolist())):
            if token in eos:
                continue
            out[i].append(token)
            if step + 1 < max_new_tokens and not (stop is not None and stop(i, out[i])):
                keep.append(r)
        if not keep:
            return
        if len(keep) < len(rows):  # rows that ended leave the batch, and their keys and values the cache
            where = torch.tensor(keep, device=device)
            cache.reorder(where)
            mask, nxt = mask[where], nxt[where]
            rows = [rows[r] for r in keep]
        cur = T + step + 1  # positions read once this token is
        hidden = model.hidden_states(nxt[:, None], mask[:, :cur], cache=cache)[:, -1]
