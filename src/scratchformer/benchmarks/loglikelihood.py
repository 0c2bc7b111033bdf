"""The log-likelihood of each choice of a question, given its prompt: the number a multiple-choice benchmark is
scored by, computed as lm-evaluation-harness computes it, with less work.

Tokens, as the harness makes them (``_encode_pair`` in ``lm_eval/api/model.py``): the prompt's trailing spaces move
to the front of the continuation; ``prompt + continuation`` is encoded whole and the prompt alone; the
continuation's tokens are those of the whole past the prompt's length. Each is encoded as the tokenizer does by
default (a Llama 3 tokenizer adds its begin-of-text token; GPT-2's and this library's add none). The model reads
``(prompt + continuation)[:-1]``; a pair longer than the window (``max_len + 1`` tokens) loses its prompt's first
tokens, as the harness's ``(context + continuation)[-(max_length + 1):]`` does.

The work shared: a question's choices share its prompt, so the prompt is read once, its keys and values kept in the
KV cache, and the choices continue from that cache, in groups of similar lengths so that little is padded (a
question whose prompt had to be cut is scored choice by choice, each cut on its own). Questions are sorted by prompt
length and batched by a token budget, and the vocabulary's logits are computed only where a continuation's token is
predicted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch
from scratchformer.families import family
from scratchformer.models import GPT
from scratchformer.tokenizers import Tokenizer

__all__ = ["Request", "encode_pairs", "loglikelihoods", "scores_text"]

LOGIT_ROWS = 256  # positions turned into vocabulary log-probabilities at once (bounds the memory of a big V)


def scores_text(model: nn.Module) -> bool:
    """Whether ``model`` gives a probability to every next token of a text, so that a benchmark can score it: a
    model of a family whose output is the next token (the family registry: a GPT run, a LoRA run on one, a Llama,
    Qwen3 or GPT-2 folder). A classifier (encoder or GPT), an image model or an encoder-decoder cannot."""
    return family(model.config.arch).generates


@dataclass(frozen=True)
class Request:
    """A prompt's tokens and the tokens of each continuation of it, to be scored together."""

    context: list[int]
    continuations: list[list[int]]


def encode_pairs(tokenizer: Tokenizer, context: str, continuations: Sequence[str]) -> tuple[list[int], list[list[int]]]:
    """The harness's ``_encode_pair`` for one prompt and each of its continuations: ``(prompt ids, [continuation
    ids])``. An empty prompt is the begin-of-text token, as the harness's ``prefix_token_id``."""
    if not context:
        conts = [tokenizer.encode_bare(c) for c in continuations]
        return [tokenizer.bos_id], conts
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuations = [context[-n_spaces:] + c for c in continuations]
        context = context[:-n_spaces]
    prompt, *wholes = tokenizer.encode_batch([context] + [context + c for c in continuations])
    return prompt, [whole[len(prompt):] for whole in wholes]


def fit(context: list[int], continuations: list[list[int]], window: int) -> list[Request]:
    """One request if every ``prompt + continuation`` fits ``window + 1`` tokens; else one per continuation, each
    prompt cut from the left to fit (the harness's truncation). Continuations longer than ``window`` are refused
    by the caller."""
    if len(context) + max(map(len, continuations)) <= window + 1:
        return [Request(context, continuations)]
    return [Request((context + c)[-(window + 1):][:-len(c)], [c]) for c in continuations]


@torch.no_grad()
def loglikelihoods(model: GPT, requests: Sequence[Request], *, max_tokens: int = 4096,
                   progress: Callable[[list[int]], object] | None = None) -> list[list[tuple[float, bool]]]:
    """``(log-likelihood, is_greedy)`` of each continuation of each request, in order: the sum of the
    log-probabilities of its tokens, and whether each of them is the model's most likely next token.
    ``progress(indices)``: told the requests of each batch once they are scored."""
    out: list[list[tuple[float, bool]]] = [[] for _ in requests]
    for batch in _batches(requests, max_tokens, model.config.max_len):
        for i, scores in zip(batch, _score_batch(model, [requests[i] for i in batch], max_tokens)):
            out[i] = scores
        if progress is not None:
            progress(batch)
    return out


def _batches(requests: Sequence[Request], max_tokens: int, window: int) -> list[list[int]]:
    """Indices sorted by prompt length, longest first (a batch's prompts are padded to its longest), cut so that a
    batch's cache (rows x (longest prompt + longest continuation)) holds at most ``max_tokens`` positions and its
    longest prompt and continuation fit the window together. (Its choices continue in groups, each with its own
    copy of its prompts' keys and values, under the same budget: ``_similar_lengths``.)"""
    def sizes(r: Request) -> tuple[int, int]:
        return len(r.context), max(len(c) for c in r.continuations) - 1

    order = sorted(range(len(requests)), key=lambda i: (-sizes(requests[i])[0], -sizes(requests[i])[1], i))
    batches: list[list[int]] = []
    rows = longest_prompt = longest_cont = 0
    for i in order:
        prompt, cont = sizes(requests[i])
        p, c, r = max(longest_prompt, prompt), max(longest_cont, cont), rows + 1
        if batches and r * (p + c) <= max_tokens and p + c <= window:
            batches[-1].append(i)
        else:
            batches.append([i])
            r, p, c = 1, prompt, cont
        rows, longest_prompt, longest_cont = r, p, c
    return batches


def _score_batch(model: GPT, batch: list[Request], max_tokens: int) -> list[list[tuple[float, bool]]]:
    """One pass over the batch's prompts (left-padded, into the cache), one over all their continuations."""
    device = model.output_weight().device
    ids, mask = (t.to(device) for t in pad_batch([r.context for r in batch], left=True))  # (B, Tc) each
    rest = [c[:-1] for r in batch for c in r.continuations]  # what the model reads after the prompt
    width = max(map(len, rest))
    cache = model.new_cache(len(batch), ids.size(1) + width)
    last = model.hidden_states(ids, mask, cache=cache)[:, -1]  # (B, C): each prompt's last token predicts...
    targets = [c for r in batch for c in r.continuations]
    owner = torch.tensor([q for q, r in enumerate(batch) for _ in r.continuations], device=device)  # (K,)
    heads = torch.tensor([c[0] for c in targets], device=device)  # ...each continuation's first token
    logp = torch.cat([_log_probs(model, h) for h in last.split(LOGIT_ROWS)])  # (B, V), once per prompt
    first, hits = logp[owner, heads], logp.argmax(-1)[owner] == heads  # (K,) each
    per_token = [[first[k:k + 1]] for k in range(len(targets))]  # each continuation's tokens' log-probabilities
    greedy = [[hits[k:k + 1]] for k in range(len(targets))]
    if width:  # the choices that continue past their first token, in groups of similar lengths (little padding)
        order = sorted((k for k in range(len(rest)) if rest[k]), key=lambda k: -len(rest[k]))
        for group in _similar_lengths(order, [len(r) for r in rest], ids.size(1), max_tokens):
            rows = owner[torch.tensor(group, device=device)]
            cont, real = (t.to(device) for t in pad_batch([rest[k] for k in group]))  # (G, W) right-padded
            hidden = model.hidden_states(cont, torch.cat([mask[rows], torch.ones_like(real)], 1),
                                         cache=cache.rows(rows))  # each prompt's keys and values, per choice
            nexts = torch.tensor([t for k in group for t in targets[k][1:]], device=device)  # (N,)
            logp, more = _pick(model, hidden[real], nexts)  # (N,): every real position predicts its next token
            counts = real.sum(1).tolist()
            for k, a, b in zip(group, logp.split(counts), more.split(counts)):
                per_token[k].append(a)
                greedy[k].append(b)
    # summed as the harness sums them (a float32 tensor of the continuation's tokens), so that the two round alike
    pairs = [(float(torch.cat(p).sum()), bool(torch.cat(g).all())) for p, g in zip(per_token, greedy)]
    out, k = [], 0
    for r in batch:
        out.append(pairs[k:k + len(r.continuations)])
        k += len(r.continuations)
    return out


def _similar_lengths(order: list[int], lengths: list[int], prompt: int, max_tokens: int,
                     ratio: float = 0.75) -> list[list[int]]:
    """``order`` (indices, longest first) cut into groups whose shortest is at least ``ratio`` of their longest and
    whose caches (rows x (``prompt`` + longest)) hold at most ``max_tokens`` positions: a group is padded to its
    longest, so this bounds the positions read for nothing (HellaSwag's endings, 5 to 60 tokens, would otherwise
    all be padded to the longest of the batch: twice the work)."""
    groups: list[list[int]] = []
    for k in order:
        first = lengths[groups[-1][0]] if groups else 0
        if groups and lengths[k] >= ratio * first and (len(groups[-1]) + 1) * (prompt + first) <= max_tokens:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


def _pick(model: GPT, hidden: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """``(N, C)`` hidden states and ``(N,)`` next tokens -> each token's float32 log-probability ``(N,)`` and whether
    it is the most likely one ``(N,)``; the ``(N, V)`` vocabulary a slice of rows at a time."""
    logps, hits = [], []
    for h, t in zip(hidden.split(LOGIT_ROWS), targets.split(LOGIT_ROWS)):
        logits = model.output_logits(h).float()  # (n, V): log p = logit - logsumexp(logits), without
        logps.append(logits.gather(1, t[:, None])[:, 0] - torch.logsumexp(logits, -1))  # writing all of log p
        hits.append(logits.argmax(-1) == t)
    return torch.cat(logps), torch.cat(hits)


def _log_probs(model: GPT, hidden: Tensor) -> Tensor:
    """``(n, C)`` -> ``(n, V)`` float32 log-probabilities of the next token (the output layer, a log-softmax)."""
    return F.log_softmax(model.output_logits(hidden).float(), -1)
