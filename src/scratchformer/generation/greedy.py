"""Seq2seq greedy decoding, batched: the encoder runs once, the cross-attention keys/values are projected once,
and the decoder keeps a KV cache."""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.generation.common import cut_at_eos, default_limits
from scratchformer.models import Seq2SeqTransformer, eval_mode


@torch.no_grad()
def greedy_translate(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
                     max_new_tokens: int | None = None) -> list[list[int]]:
    """Greedy decoding of a batch of sources ``src (B, S)`` -> one token list per row (no bos/eos).

    ``src_mask (B, S)``: True for real source tokens (padding may stand anywhere). ``max_new_tokens``:
    the most tokens per row, eos included, capped by ``max_len``; by default each row's input length
    + 50, as for ``beam_search``. Decoding stops when every row has emitted ``eos_id``.
    """
    B = src.size(0)
    device = src.device
    src_mask = src_mask.bool()
    limits = default_limits(src_mask, max_new_tokens, model.config.max_len)  # (B,)
    steps = int(limits.max()) if B else 0
    out = torch.full((B, steps), eos_id, dtype=torch.long, device=device)
    with eval_mode(model):
        memory = model.encode(src, src_mask)  # (B, S, C), once
        cache = model.new_cache(B, max(steps, 1))
        token = torch.full((B, 1), bos_id, dtype=torch.long, device=device)
        finished = limits <= 0
        for t in range(steps):
            logits = model.decode(token, memory, src_mask, cache=cache)[:, -1]  # (B, V)
            nxt = logits.argmax(-1)  # (B,)
            out[:, t] = nxt.masked_fill(finished, eos_id)
            # a row that has emitted its last allowed token is done too
            finished |= (nxt == eos_id) | (limits <= t + 1)
            if bool(finished.all()):
                break
            token = nxt[:, None]  # rows that are done decode on, unread: cheaper than leaving the batch
    return [cut_at_eos(row[:n], eos_id) for row, n in zip(out.tolist(), limits.tolist())]
