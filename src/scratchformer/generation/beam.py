"""Seq2seq beam search with the setup of the paper (§6.1): beam size 4, length penalty alpha = 0.6, at most
(input length + 50) output tokens. Batched over sentences *and* beams.

The length penalty is the one of GNMT (Wu et al., 2016), which the paper cites for alpha::

    lp(Y) = ((5 + |Y|) / 6) ** alpha          score(Y) = log P(Y | X) / lp(Y)

where ``|Y|`` counts the scored tokens: the output tokens plus ``<eos>`` when the hypothesis ended with
it. alpha = 0 ranks by plain log-probability; a larger alpha favours longer outputs.

The algorithm, per step, for N sentences x K beams at once (``beam_search_hypotheses``, its steps in
``_Search``):

1. the decoder turns the last token of each of the N K live beams into next-token log-probabilities;
   each beam's running sum plus each token gives K V candidates per sentence, of which the best 2K are
   kept (at most K of them end with eos, so at least K can go on);
2. a candidate ending with eos that ranks among the best K is a finished hypothesis, and so is each of
   the best K candidates at the sentence's length limit; the best finished one is remembered;
3. the best K candidates not ending with eos become the new beams; the decoder cache is reordered to
   follow them (cache rows are beams);
4. a sentence is done at its length limit, or as soon as no live beam can reach a better score than its
   best finished hypothesis (log-probabilities only fall as tokens are added, so a beam's best possible
   score is its sum divided by the largest length penalty still reachable). That returns exactly what
   running every beam to the limit would return, sooner. Done sentences leave the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from scratchformer.generation.common import default_limits
from scratchformer.generation.greedy import greedy_translate
from scratchformer.models import Seq2SeqTransformer, eval_mode


def gnmt_length_penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """GNMT's ``lp(Y) = ((5 + |Y|) / 6) ** alpha`` for a length or a tensor of lengths."""
    return ((5 + length) / 6) ** alpha


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


@dataclass
class _Search:
    """The state of a batched beam search: N sentences still decoding, K beams each, as rows ``n K + k``."""

    K: int
    alpha: float
    sentence: Tensor  # (N,) original index of each sentence still decoding
    limits: Tensor  # (N,) its output budget
    memory: Tensor  # (N K, S, C) the encoder output, one copy per beam
    src_mask: Tensor  # (N K, S)
    scores: Tensor  # (N, K) running log P of the live beams
    seqs: Tensor  # (N K, t) tokens of the live beams
    best_score: Tensor  # (N,) the best finished hypothesis so far: its score, log P, length and tokens
    best_logp: Tensor
    best_len: Tensor
    best_seq: Tensor  # (N, steps)

    @classmethod
    def start(cls, memory: Tensor, src_mask: Tensor, limits: Tensor, K: int, alpha: float, steps: int,
              eos_id: int) -> _Search:
        B, device = memory.size(0), memory.device
        expand = torch.arange(B, device=device).repeat_interleave(K)  # (B K,): row n K + k is beam k of n
        scores = torch.full((B, K), float("-inf"), device=device)
        scores[:, 0] = 0.0  # one real beam at the start; the copies must not be picked K times
        return cls(K, alpha, torch.arange(B, device=device), limits, memory[expand], src_mask[expand], scores,
                   torch.empty(B * K, 0, dtype=torch.long, device=device),
                   torch.full((B,), float("-inf"), device=device), torch.full((B,), float("-inf"), device=device),
                   torch.zeros(B, dtype=torch.long, device=device),
                   torch.full((B, steps), eos_id, dtype=torch.long, device=device))

    def extend(self, logits: Tensor, t: int, eos_id: int, min_new_tokens: int) -> Tensor:
        """Steps 1-3 for outputs of length ``t`` from ``logits (N K, V)``; returns the parent row of each new
        beam, ``(N K,)``."""
        N, K = self.scores.size(0), self.K
        V = logits.size(-1)
        device = logits.device
        logp = logits.float().log_softmax(-1)  # (N K, V)
        if t <= min_new_tokens:
            logp[:, eos_id] = float("-inf")
        cand = (self.scores.view(N * K, 1) + logp).view(N, K * V)  # sum of log-probs of every extension
        top_s, top_i = cand.topk(2 * K, dim=1)  # (N, 2K), best first
        beam, tok = top_i // V, top_i % V  # which beam of the sentence, which token
        is_eos = tok == eos_id

        # Finished candidates; all have |Y| = t, so one length penalty for the step.
        in_beam = torch.arange(2 * K, device=device) < K  # (2K,)
        ends = in_beam & (is_eos | (self.limits == t)[:, None]) & top_s.isfinite()
        fin = torch.where(ends, top_s / gnmt_length_penalty(t, self.alpha), float("-inf"))  # (N, 2K)
        f_score, f_j = fin.max(1)  # (N,) best finished candidate of this step
        better = f_score > self.best_score
        f_beam, f_tok = beam.gather(1, f_j[:, None])[:, 0], tok.gather(1, f_j[:, None])[:, 0]
        f_seq = torch.cat([self.seqs[torch.arange(N, device=device) * K + f_beam], f_tok[:, None]], 1)  # (N, t)
        self.best_seq[:, :t] = torch.where(better[:, None], f_seq, self.best_seq[:, :t])
        self.best_len = torch.where(better, t - (f_tok == eos_id).long(), self.best_len)
        self.best_logp = torch.where(better, top_s.gather(1, f_j[:, None])[:, 0], self.best_logp)
        self.best_score = torch.maximum(self.best_score, f_score)

        # The new live beams: the best K candidates that do not end with eos.
        self.scores, j = top_s.masked_fill(is_eos, float("-inf")).topk(K, dim=1)  # (N, K)
        rows = (torch.arange(N, device=device)[:, None] * K + beam.gather(1, j)).view(-1)  # (N K,) parents
        self.seqs = torch.cat([self.seqs[rows], tok.gather(1, j).view(-1, 1)], 1)  # (N K, t)
        return rows

    def done(self, t: int) -> Tensor:
        """Step 4: ``(N,)``, at the limit or unable to beat the best finished hypothesis. A sum s <= 0
        divided by lp(L) is largest for the largest lp(L), at one end of the reachable lengths."""
        best_live = self.scores[:, 0]
        bound = torch.maximum(best_live / gnmt_length_penalty(t + 1, self.alpha),
                              best_live / gnmt_length_penalty(self.limits.float(), self.alpha))
        return (self.limits <= t) | (self.best_score >= bound)

    def collect(self, done: Tensor, results: list[Hypothesis | None]) -> None:
        """The best hypothesis of each done sentence, into ``results`` at its original index."""
        for n in done.nonzero()[:, 0].tolist():
            length = int(self.best_len[n])
            results[int(self.sentence[n])] = Hypothesis(self.best_seq[n, :length].tolist(), float(self.best_logp[n]),
                                                        float(self.best_score[n]))

    def drop(self, done: Tensor, rows: Tensor) -> Tensor:
        """Done sentences leave the batch; returns the parent rows of the beams that go on."""
        keep = (~done).nonzero()[:, 0]  # (N',) sentences that go on
        keep_rows = (keep[:, None] * self.K + torch.arange(self.K, device=keep.device)).view(-1)  # (N' K,)
        rows = rows[keep_rows]
        self.memory, self.src_mask, self.seqs = self.memory[rows], self.src_mask[rows], self.seqs[keep_rows]
        self.scores, self.limits, self.sentence = self.scores[keep], self.limits[keep], self.sentence[keep]
        self.best_score, self.best_logp = self.best_score[keep], self.best_logp[keep]
        self.best_len, self.best_seq = self.best_len[keep], self.best_seq[keep]
        return rows


@torch.no_grad()
def beam_search_hypotheses(model: Seq2SeqTransformer, src: Tensor, src_mask: Tensor, *, bos_id: int, eos_id: int,
                           beam_size: int = 4, length_penalty: float = 0.6, max_new_tokens: int | None = None,
                           min_new_tokens: int = 0) -> list[Hypothesis]:
    """Beam search over a batch of sources ``src (B, S)``; the best hypothesis of each sentence.

    See ``beam_search`` for the arguments and the module docstring for the algorithm.
    """
    B, K = src.size(0), beam_size
    if K < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    src_mask = src_mask.bool()
    limits = default_limits(src_mask, max_new_tokens, model.config.max_len)  # (B,), per sentence
    results: list[Hypothesis | None] = [Hypothesis([], 0.0, 0.0) if n <= 0 else None for n in limits.tolist()]
    steps = int(limits.max()) if B else 0
    if steps <= 0:
        return [h if h is not None else Hypothesis([], 0.0, 0.0) for h in results]

    with eval_mode(model):
        memory = model.encode(src, src_mask)  # (B, S, C): once per sentence, not per beam
        cache = model.new_cache(B, steps)
        # Step 1 is the same for the K beams of a sentence (they all hold just bos), so it runs on B rows;
        # it also projects the cross-attention keys/values once per sentence. Then everything is copied
        # to B K rows, sentence-major.
        bos = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
        logits = model.decode(bos, memory, src_mask, cache=cache)[:, -1]  # (B, V)
        cache.reorder(torch.arange(B, device=src.device).repeat_interleave(K))
        search = _Search.start(memory, src_mask, limits, K, length_penalty, steps, eos_id)
        logits = logits.repeat_interleave(K, dim=0)  # (B K, V)
        for t in range(1, steps + 1):  # t = length of the hypotheses after this step
            rows = search.extend(logits, t, eos_id, min_new_tokens)
            done = search.done(t)
            if bool(done.any()):
                search.collect(done, results)
                if bool(done.all()):
                    break
                cache.reorder(search.drop(done, rows))  # every cache entry loses the done sentences' rows
            else:
                # Beams never move to another sentence, so the cross-attention keys/values (the same for
                # all K beams of a sentence) stay where they are: only self-attention caches follow.
                for layer_cache in cache.self_attn:
                    layer_cache.reorder(rows)
            logits = model.decode(search.seqs[:, -1:], search.memory, search.src_mask, cache=cache)[:, -1]

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
