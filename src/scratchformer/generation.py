"""Decoding strategies: functions that take a model (the model maps tokens to logits, nothing else).

- ``generate``: GPT continuation, greedy or sampled (temperature, top-k, top-p), with a KV cache,
  batched prompts of different lengths (left padding) and a sliding window past ``max_len``.
- ``greedy_translate``: seq2seq greedy decoding, batched; the encoder runs once, the cross-attention
  keys/values are projected once, and the decoder keeps a KV cache.
- ``beam_search``: seq2seq beam search with the setup of the paper (§6.1): beam size 4, length penalty
  alpha = 0.6, at most (input length + 50) output tokens. Batched over sentences *and* beams.
- ``translate``: greedy for ``beam_size=1``, beam search otherwise.

The length penalty is the one of GNMT (Wu et al., 2016), which the paper cites for alpha::

    lp(Y) = ((5 + |Y|) / 6) ** alpha          score(Y) = log P(Y | X) / lp(Y)

where ``|Y|`` counts the scored tokens: the output tokens plus ``<eos>`` when the hypothesis ended with
it. alpha = 0 ranks by plain log-probability; a larger alpha favours longer outputs.

Masks are boolean with ``True`` = real token (may be attended to), as everywhere in scratchformer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from scratchformer.models import GPT, Seq2SeqTransformer

# ============================================================================================ helpers


@contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    """Decode without dropout, then give the model back in the mode it came in (mid-training samples)."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def _filter_logits(logits: Tensor, top_k: int | None, top_p: float | None) -> Tensor:
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


def _next_token(logits: Tensor, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
                generator: torch.Generator | None) -> Tensor:
    """``(B, V)`` logits of the last position -> ``(B,)`` next token ids."""
    if not do_sample:
        return logits.argmax(-1)
    logits = _filter_logits(logits.float() / max(temperature, 1e-8), top_k, top_p)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]


def gnmt_length_penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT's ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` for a length or a tensor of lengths."""
    return ((5 + length) / 6) ** alpha


def _default_limits(src_mask: Tensor, max_new_tokens: int | None, max_len: int) -> Tensor:
    """Per-sentence output budgets ``(B,)``: input length + 50 (§6.1) unless given, never past ``max_len``
    (the decoder reads bos + all but the last output token, so ``max_len`` outputs fit)."""
    if max_new_tokens is None:
        limits = src_mask.sum(1) + 50
    else:
        limits = torch.full((src_mask.size(0),), max_new_tokens, device=src_mask.device)
    return limits.clamp(max=max_len).long()


# ================================================================================================ GPT


@torch.no_grad()
def generate(model: GPT, input_ids: Tensor, max_new_tokens: int, *, do_sample: bool = False,
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             eos_id: int | None = None, use_cache: bool = True, seed: int | None = None,
             attention_mask: Tensor | None = None) -> Tensor:
    """Continue ``input_ids (B, T)``; returns ``(B, T + new)``: the prompt followed by the new tokens.

    - ``attention_mask (B, T)``: 1/True for real prompt tokens, 0 for *left* padding (batched prompts of
      different lengths); the model numbers positions by real tokens, so a padded row continues exactly
      as it would alone.
    - Greedy by default; ``do_sample`` draws from ``softmax(logits / temperature)`` restricted to the
      ``top_k`` most likely tokens and then to the ``top_p`` nucleus. ``seed`` makes the draws depend on
      the seed only (a private generator); without it they come from torch's global generator.
    - ``eos_id``: a row that emitted it keeps emitting it; generation stops once every row has ended,
      so the result may hold fewer than ``max_new_tokens`` new tokens.
    - ``use_cache``: keep the keys/values of past tokens (the prompt is encoded once, then one token per
      step). Once the sequence outgrows ``model.config.max_len``, each step recomputes a sliding window
      of the last ``max_len`` tokens, with or without cache (learned absolute positions shift as the
      window moves, so cached keys cannot be reused). Cached and uncached runs give the same tokens.
    """
    B, T = input_ids.shape
    if T == 0:
        raise ValueError("generate needs a prompt of at least one token (a bos token, say)")
    device = input_ids.device
    max_len = model.config.max_len
    total = T + max_new_tokens
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None

    # Preallocated outputs: tokens and the real-token mask are written in place, never concatenated.
    tokens = input_ids.new_empty(B, total)
    tokens[:, :T] = input_ids
    mask = None  # None = no padding: the model then takes its unmasked (faster) attention path
    if attention_mask is not None and not bool(attention_mask.all()):
        mask = torch.ones(B, total, dtype=torch.bool, device=device)
        mask[:, :T] = attention_mask.bool()

    cache = model.new_cache(B, min(total, max_len)) if use_cache and T <= max_len else None
    finished = torch.zeros(B, dtype=torch.bool, device=device) if eos_id is not None else None
    cur = T  # tokens[:, :cur] are known
    with _eval_mode(model):
        # Only the last position's logits are needed: project its hidden state alone, with the (V, C)
        # output matrix transposed once per call to (C, V), a layout whose matrix-vector product runs
        # about 2x faster on CPU (batch-1 decoding is bound by reading this matrix).
        out_t = model.output_weight().t().contiguous()  # (C, V)
        for _ in range(max_new_tokens):
            if cache is not None and cur <= max_len:  # feed what the cache has not seen yet
                start = cache.length  # 0 on the first step: the whole prompt at once
                h = model.hidden_states(tokens[:, start:cur], None if mask is None else mask[:, :cur], cache=cache)
            else:  # too long for the model: the last max_len tokens (of every row, pads included)
                lo = max(0, cur - max_len)
                h = model.hidden_states(tokens[:, lo:cur], None if mask is None else mask[:, lo:cur])
            logits = h[:, -1] @ out_t  # (B, V)
            nxt = _next_token(logits, do_sample, temperature, top_k, top_p, generator)  # (B,)
            if finished is not None:
                nxt = nxt.masked_fill(finished, eos_id)
                finished |= nxt == eos_id
            tokens[:, cur] = nxt
            cur += 1
            # The only host sync per step, and only when there is an eos to wait for.
            if finished is not None and bool(finished.all()):
                break
    return tokens if cur == total else tokens[:, :cur].contiguous()


# ======================================================================================= seq2seq: greedy


def _cut_at_eos(row: list[int], eos_id: int) -> list[int]:
    return row[:row.index(eos_id)] if eos_id in row else row


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
    limits = _default_limits(src_mask, max_new_tokens, model.config.max_len)  # (B,)
    steps = int(limits.max()) if B else 0
    out = torch.full((B, steps), eos_id, dtype=torch.long, device=device)
    with _eval_mode(model):
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
    return [_cut_at_eos(row[:n], eos_id) for row, n in zip(out.tolist(), limits.tolist())]


# ================================================================================== seq2seq: beam search


@dataclass(frozen=True)
class Hypothesis:
    """A finished beam-search output.

    ``tokens``: without bos and eos. ``log_prob``: ``log P(Y | X)``, summed over the scored tokens (the
    tokens plus eos when the hypothesis ended with one). ``score``: ``log_prob / lp(|Y|)``, what beam
    search maximises.
    """

    tokens: list[int]
    log_prob: float
    score: float


@torch.no_grad()
def beam_search_hypotheses(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
                           beam_size: int = 4, length_penalty: float = 0.6, max_new_tokens: int | None = None,
                           min_new_tokens: int = 0) -> list[Hypothesis]:
    """Beam search over a batch of sources ``src (B, S)``; the best hypothesis of each sentence.

    See ``beam_search`` for the arguments. The algorithm, per step, for N sentences x K beams at once:

    1. the decoder turns the last token of each of the N K live beams into next-token log-probabilities;
       each beam's running sum plus each token gives K V candidates per sentence, of which the best 2K
       are kept (at most K of them end with eos, so at least K can go on);
    2. a candidate ending with eos that ranks among the best K is a finished hypothesis, and so is each
       of the best K candidates at the sentence's length limit; the best finished one is remembered;
    3. the best K candidates not ending with eos become the new beams; the decoder cache is reordered
       to follow them (cache rows are beams);
    4. a sentence is done at its length limit, or as soon as no live beam can reach a better score than
       its best finished hypothesis (log-probabilities only fall as tokens are added, so a beam's best
       possible score is its sum divided by the largest length penalty still reachable). That returns
       exactly what running every beam to the limit would return, sooner. Done sentences leave the
       batch.
    """
    B, K = src.size(0), beam_size
    if K < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    device = src.device
    src_mask = src_mask.bool()
    alpha = length_penalty
    limits = _default_limits(src_mask, max_new_tokens, model.config.max_len)  # (B,), per sentence
    results: list[Hypothesis | None] = [None] * B
    for b in (limits <= 0).nonzero()[:, 0].tolist():
        results[b] = Hypothesis([], 0.0, 0.0)
    steps = int(limits.max()) if B else 0
    if steps <= 0:
        return [h if h is not None else Hypothesis([], 0.0, 0.0) for h in results]

    with _eval_mode(model):
        memory = model.encode(src, src_mask)  # (B, S, C): once per sentence, not per beam
        cache = model.new_cache(B, steps)
        # Step 1 is the same for the K beams of a sentence (they all hold just bos), so it runs on B rows;
        # it also projects the cross-attention keys/values once per sentence. Then everything is copied
        # to B K rows, sentence-major: row n K + k is beam k of sentence n.
        logits = model.decode(torch.full((B, 1), bos_id, dtype=torch.long, device=device), memory, src_mask,
                              cache=cache)[:, -1]  # (B, V)
        expand = torch.arange(B, device=device).repeat_interleave(K)  # (B K,)
        cache.reorder(expand)
        memory, src_mask, logits = memory[expand], src_mask[expand], logits[expand]
        V = logits.size(-1)

        sentence = torch.arange(B, device=device)  # original index of each sentence still decoding
        scores = torch.full((B, K), float("-inf"), device=device)  # running log P of the live beams
        scores[:, 0] = 0.0  # one real beam at the start; the copies must not be picked K times
        seqs = torch.empty(B * K, 0, dtype=torch.long, device=device)  # (N K, t) tokens of the live beams
        best_score = torch.full((B,), float("-inf"), device=device)  # best finished hypothesis so far
        best_logp = torch.full((B,), float("-inf"), device=device)
        best_len = torch.zeros(B, dtype=torch.long, device=device)
        best_seq = torch.full((B, steps), eos_id, dtype=torch.long, device=device)
        rank_in_beam = torch.arange(2 * K, device=device) < K  # (2K,)

        for t in range(1, steps + 1):  # t = length of the hypotheses after this step
            N = scores.size(0)
            logp = logits.float().log_softmax(-1)  # (N K, V)
            if t <= min_new_tokens:
                logp[:, eos_id] = float("-inf")
            cand = (scores.view(N * K, 1) + logp).view(N, K * V)  # sum of log-probs of every extension
            top_s, top_i = cand.topk(2 * K, dim=1)  # (N, 2K), best first
            beam, tok = top_i // V, top_i % V  # which beam of the sentence, which token
            is_eos = tok == eos_id

            # Finished candidates; all have |Y| = t, so one length penalty for the step.
            ends = rank_in_beam & (is_eos | (limits == t)[:, None]) & top_s.isfinite()
            fin = torch.where(ends, top_s / gnmt_length_penalty(t, alpha), float("-inf"))  # (N, 2K)
            f_score, f_j = fin.max(1)  # (N,) best finished candidate of this step
            better = f_score > best_score
            f_beam, f_tok = beam.gather(1, f_j[:, None])[:, 0], tok.gather(1, f_j[:, None])[:, 0]
            f_seq = torch.cat([seqs[torch.arange(N, device=device) * K + f_beam], f_tok[:, None]], 1)  # (N, t)
            best_seq[:, :t] = torch.where(better[:, None], f_seq, best_seq[:, :t])
            best_len = torch.where(better, t - (f_tok == eos_id).long(), best_len)
            best_logp = torch.where(better, top_s.gather(1, f_j[:, None])[:, 0], best_logp)
            best_score = torch.maximum(best_score, f_score)

            # The new live beams: the best K candidates that do not end with eos.
            scores, j = top_s.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (N, K)
            rows = (torch.arange(N, device=device)[:, None] * K + beam.gather(1, j)).view(-1)  # (N K,) parents
            seqs = torch.cat([seqs[rows], tok.gather(1, j).view(-1, 1)], 1)  # (N K, t)

            # Done: at the limit, or no live beam can still beat the best finished hypothesis. A sum s <= 0
            # divided by lp(L) is largest for the largest lp(L), at one end of the reachable lengths.
            best_live = scores[:, 0]
            bound = torch.maximum(best_live / gnmt_length_penalty(t + 1, alpha),
                                  best_live / gnmt_length_penalty(limits.float(), alpha))
            done = (limits <= t) | (best_score >= bound)  # (N,)
            if bool(done.any()):
                for n in done.nonzero()[:, 0].tolist():
                    length = int(best_len[n])
                    results[int(sentence[n])] = Hypothesis(best_seq[n, :length].tolist(), float(best_logp[n]),
                                                           float(best_score[n]))
                if bool(done.all()):
                    break
                keep = (~done).nonzero()[:, 0]  # (N',) sentences that go on
                keep_rows = (keep[:, None] * K + torch.arange(K, device=device)).view(-1)  # (N' K,)
                rows = rows[keep_rows]
                # Sentences leave the batch: every cache entry, cross-attention included, loses their rows.
                cache.reorder(rows)
                memory, src_mask = memory[rows], src_mask[rows]
                seqs = seqs[keep_rows]
                scores, limits, sentence = scores[keep], limits[keep], sentence[keep]
                best_score, best_logp, best_len = best_score[keep], best_logp[keep], best_len[keep]
                best_seq = best_seq[keep]
            else:
                # Beams never move to another sentence, so the cross-attention keys/values (the same for
                # all K beams of a sentence) stay where they are: only self-attention caches follow.
                for layer_cache in cache.self_attn:
                    layer_cache.reorder(rows)
            logits = model.decode(seqs[:, -1:], memory, src_mask, cache=cache)[:, -1]  # (N K, V)

    return [h if h is not None else Hypothesis([], 0.0, 0.0) for h in results]


@torch.no_grad()
def beam_search(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
                beam_size: int = 4, length_penalty: float = 0.6, max_new_tokens: int | None = None,
                min_new_tokens: int = 0) -> list[list[int]]:
    """Beam search (§6.1 of the paper: beam 4, alpha 0.6) -> the best token list per sentence (no bos/eos).

    - ``src (B, S)`` token ids, ``src_mask (B, S)`` True for real tokens. The encoder runs once per
      sentence; the B K beams go through the decoder together with a KV cache.
    - ``length_penalty``: alpha of ``lp(Y) = ((5 + |Y|) / 6) ** alpha``; hypotheses are ranked by
      ``log P(Y | X) / lp(Y)``. With alpha = 0 and ``beam_size=1`` this is greedy decoding.
    - ``max_new_tokens``: the most output tokens (eos included); by default each sentence's input length
      + 50, as in the paper; always capped by the model's ``max_len``. A sentence whose beams all reach
      the limit without eos returns its best unfinished beam.
    - ``min_new_tokens``: eos is forbidden before this many tokens (``min_new_tokens == max_new_tokens``
      forces the output length, e.g. for benchmarks).

    ``beam_search_hypotheses`` returns the same with the log-probability and score of each output.
    """
    hyps = beam_search_hypotheses(model, src, src_mask, bos_id=bos_id, eos_id=eos_id, beam_size=beam_size,
                                  length_penalty=length_penalty, max_new_tokens=max_new_tokens,
                                  min_new_tokens=min_new_tokens)
    return [h.tokens for h in hyps]


def translate(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
              beam_size: int = 1, length_penalty: float = 0.6, max_new_tokens: int | None = None) -> list[list[int]]:
    """Translate a batch: greedy decoding for ``beam_size=1``, beam search otherwise (see those)."""
    if beam_size == 1:
        return greedy_translate(model, src, src_mask, bos_id=bos_id, eos_id=eos_id, max_new_tokens=max_new_tokens)
    return beam_search(model, src, src_mask, bos_id=bos_id, eos_id=eos_id, beam_size=beam_size,
                       length_penalty=length_penalty, max_new_tokens=max_new_tokens)
