"""Decoding strategies: functions that take a model (the model maps tokens to logits, nothing else).

- ``generate``: GPT continuation, greedy or sampled (temperature, top-k, top-p), with a KV cache,
  batched prompts of different lengths (left padding) and a sliding window past ``max_len``.
- ``greedy_translate``: seq2seq greedy decoding, batched; the encoder runs once, the cross-attention
  keys/values are projected once, and the decoder keeps a KV cache.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .models import GPT, Seq2SeqTransformer


def _filter_logits(logits: Tensor, top_k: int | None, top_p: float | None) -> Tensor:
    """Set logits outside the top-k / nucleus (top-p) set to -inf. ``logits (B, V)``."""
    if top_k is not None and top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        # drop a token if the tokens ranked above it already reach top_p (the first token always stays)
        drop_sorted = probs.cumsum(-1) - probs >= top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _next_token(logits: Tensor, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
                generator: torch.Generator | None) -> Tensor:
    """``(B, V)`` logits of the last position -> ``(B, 1)`` next token ids."""
    if not do_sample:
        return logits.argmax(-1, keepdim=True)
    logits = _filter_logits(logits / max(temperature, 1e-8), top_k, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)


@torch.no_grad()
def generate(model: GPT, input_ids: Tensor, max_new_tokens: int, *, do_sample: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             eos_id: int | None = None, use_cache: bool = True, seed: int | None = None,
             attention_mask: Tensor | None = None) -> Tensor:
    """Continue ``input_ids (B, T)``; returns ``(B, T + new)``: the prompt followed by the new tokens.

    ``attention_mask (B, T)``: 1 for real prompt tokens, 0 for left padding. After ``eos_id`` a row
    keeps emitting ``eos_id``; generation stops early once every row has ended. When the sequence
    outgrows ``model.config.max_len``, only the last ``max_len`` tokens are fed (sliding window).
    """
    model.eval()
    B, T = input_ids.shape
    device = input_ids.device
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    mask = torch.ones(B, T, dtype=torch.bool, device=device) if attention_mask is None else attention_mask.bool()
    seq = input_ids
    max_len = model.config.max_len
    cache = model.new_cache(B) if use_cache and T + max_new_tokens <= max_len else None
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    logits = None
    for _ in range(max_new_tokens):
        if cache is not None:
            if logits is None:  # the prompt, all at once
                logits = model(seq, mask, cache=cache)[:, -1]
            else:
                logits = model(seq[:, -1:], mask, cache=cache)[:, -1]
        else:
            window, window_mask = seq[:, -max_len:], mask[:, -max_len:]
            logits = model(window, window_mask)[:, -1]
        nxt = _next_token(logits.float(), do_sample, temperature, top_k, top_p, generator)
        if eos_id is not None:
            nxt = torch.where(finished[:, None], torch.full_like(nxt, eos_id), nxt)
            finished |= nxt[:, 0] == eos_id
        seq = torch.cat([seq, nxt], 1)
        mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.bool, device=device)], 1)
        if eos_id is not None and finished.all():
            break
    return seq


@torch.no_grad()
def greedy_translate(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
                     max_new_tokens: int) -> list[list[int]]:
    """Greedy decoding of a batch of sources ``src (B, S)`` -> one token list per row (no bos/eos)."""
    model.eval()
    B = src.size(0)
    max_new_tokens = min(max_new_tokens, model.config.max_len)
    memory = model.encode(src, src_mask)
    cache = model.new_cache(B, max_new_tokens)
    token = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
    out = torch.empty(B, 0, dtype=torch.long, device=src.device)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        logits = model.decode(token, memory, src_mask, cache=cache)[:, -1]
        token = logits.argmax(-1, keepdim=True)
        token = torch.where(finished[:, None], torch.full_like(token, eos_id), token)
        finished |= token[:, 0] == eos_id
        out = torch.cat([out, token], 1)
        if finished.all():
            break
    results = []
    for row in out.tolist():
        results.append(row[:row.index(eos_id)] if eos_id in row else row)
    return results
