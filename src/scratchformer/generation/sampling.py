"""GPT continuation: greedy or sampled (temperature, top-k, top-p), with a KV cache, batched prompts of
different lengths (left padding) and a sliding window past ``max_len``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from scratchformer.models import GPT, eval_mode


def filter_logits(logits: Tensor, top_k: int | None, top_p: float | None) -> Tensor:
    """Set logits outside the top-k, then outside the nucleus (top-p), to -inf. ``logits (B, V)``.

    Top-p keeps the smallest set of most likely tokens whose probabilities sum to at least ``top_p``
    (Holtzman et al., 2019), and always the most likely token. Ties at the k-th logit are all kept.
    """
    if top_k is not None and top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (B, V) each
        probs = sorted_logits.softmax(-1)
        # Drop a token if the tokens ranked above it already reach top_p; the first one never goes
        # (with top_p <= 0 everything would be dropped and softmax would give NaN).
        drop_sorted = probs.cumsum(-1) - probs >= top_p
        drop_sorted[:, 0] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token(logits: Tensor, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
                generator: torch.Generator | None) -> Tensor:
    """``(B, V)`` logits of the last position -> ``(B,)`` next token ids."""
    if not do_sample:
        return logits.argmax(-1)
    logits = filter_logits(logits.float() / max(temperature, 1e-8), top_k, top_p)
    return draw(logits.softmax(-1), generator)


def draw(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One token a row of ``probs (B, V)``, by inverting the running sum: a uniform ``u`` in (0, 1] a row, and the
    first token whose running sum reaches ``u`` times the row's total (that token's probability is above 0). The
    distribution of ``torch.multinomial``, which draws V random numbers a row; this draws one, and a decoding step
    of GPT-2's 50,257 tokens spends a tenth of the time drawing."""
    running = probs.double().cumsum(-1)  # (B, V)
    u = 1 - torch.rand(probs.size(0), 1, generator=generator, dtype=torch.float64, device=probs.device)  # (0, 1]
    return torch.searchsorted(running, u * running[:, -1:])[:, 0]  # (B,)



@torch.no_grad()
def _buffers(input_ids: Tensor, total: int, attention_mask: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """Preallocated outputs, written in place, never concatenated: the tokens ``(B, total)`` (the prompt first)
    and the real-token mask (None when there is no padding: the model then takes its faster unmasked path)."""
    B, T = input_ids.shape
    tokens = input_ids.new_empty(B, total)
    tokens[:, :T] = input_ids
    mask = None
    if attention_mask is not None and not bool(attention_mask.all()):
        mask = torch.ones(B, total, dtype=torch.bool, device=input_ids.device)
        mask[:, :T] = attention_mask.bool()
    return tokens, mask


def generate(model: GPT, input_ids: Tensor, max_new_tokens: int, *, do_sample: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             eos_id: int | Sequence[int] | None = None, use_cache: bool = True, seed: int | None = None,
             attention_mask: Tensor | None = None) -> Tensor:
    """Continue ``input_ids (B, T)``; returns ``(B, T + new)``: the prompt followed by the new tokens.

    - ``attention_mask (B, T)``: 1/True for real prompt tokens, 0 for *left* padding (batched prompts of
      different lengths); the model numbers positions by real tokens, so a padded row continues exactly
      as it would alone.
    - Greedy by default; ``do_sample`` draws from ``softmax(logits / temperature)`` restricted to the
      ``top_k`` most likely tokens and then to the ``top_p`` nucleus. ``seed`` makes the draws depend on
      the seed only (a private generator); without it they come from torch's global generator.
    - ``eos_id``: an id, or every id that ends a generation (``tokenizer.eos_ids``: Llama 3.1 has three); a row
      that emitted one keeps emitting the first; generation stops once every row has ended, so the result may
      hold fewer than ``max_new_tokens`` new tokens.
    - ``use_cache``: keep the keys/values of past tokens (the prompt is encoded once, then one token per
      step). With ``attention="linear"`` the model's ``new_cache`` is its recurrent state instead: the prompt
      goes in through the parallel prefix sums, then each token updates the state at a cost that does not
      grow with the context. Once the sequence outgrows ``model.config.max_len``, each step recomputes a
      sliding window of the last ``max_len`` tokens, with or without cache or state (learned absolute
      positions shift as the window moves, so cached keys, or sums over them, cannot be reused). Cached and
      uncached runs give the same tokens.
    """
    B, T = input_ids.shape
    if T == 0:
        raise ValueError("generate needs a prompt of at least one token (a bos token, say)")
    device = input_ids.device
    max_len = model.config.max_len
    total = T + max_new_tokens
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None

    tokens, mask = _buffers(input_ids, total, attention_mask)

    cache = model.new_cache(B, min(total, max_len)) if use_cache and T <= max_len else None
    stops = torch.tensor([eos_id] if isinstance(eos_id, int) else list(eos_id or ()), dtype=torch.long, device=device)
    finished = torch.zeros(B, dtype=torch.bool, device=device) if len(stops) else None
    cur = T  # tokens[:, :cur] are known
    with eval_mode(model):
        for _ in range(max_new_tokens):
            if cache is not None and cur <= max_len:  # feed what the cache has not seen yet
                start = cache.length  # 0 on the first step: the whole prompt at once
                h = model.hidden_states(tokens[:, start:cur], None if mask is None else mask[:, :cur], cache=cache)
            else:  # too long for the model: the last max_len tokens (of every row, pads included)
                lo = max(0, cur - max_len)
                h = model.hidden_states(tokens[:, lo:cur], None if mask is None else mask[:, lo:cur])
            last = h[:, -1]  # (B, C): only the last position's logits are needed
            logits = model.output_logits(last)  # (B, V)
            nxt = next_token(logits, do_sample, temperature, top_k, top_p, generator)  # (B,)
            if finished is not None:
                nxt = nxt.masked_fill(finished, stops[0])
                finished |= torch.isin(nxt, stops)
            tokens[:, cur] = nxt
            cur += 1
            # The only host sync per step, and only when there is an eos to wait for.
            if finished is not None and bool(finished.all()):
                break
    return tokens if cur == total else tokens[:, :cur].contiguous()
