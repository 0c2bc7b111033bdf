"""How each answer of the decoding engine picks its tokens and when it ends: its generator (seeded from the request's
seed and its index), the token it picks from its logits (the argmax, or a draw with its request's settings, as
``generate`` draws for a batch of one), and the stop rule each new token is checked against (a stop id, a stop text,
the budget)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from scratchformer.generation.requests import Choice, Request, choice_seed
from scratchformer.generation.sampling import next_token
from scratchformer.generation.stops import TextStop

__all__ = ["fail", "new_choice", "pick", "take"]


def new_choice(request: Request, index: int, device: torch.device, tokenizer: object | None,
               vocabulary: Any = None) -> Choice:
    """Answer ``index`` of ``request``: its own generator when it samples, its incremental text when there is a
    tokenizer, its matcher when the request has a grammar (``vocabulary``: the engine's ``grammar.Vocabulary``)."""
    choice = Choice(index)
    if request.grammar is not None:
        choice.matcher = vocabulary.matcher(request.grammar)
    s = request.sampling
    if not s.greedy:
        choice.generator = torch.Generator(device=device)
        if s.seed is None:
            choice.generator.seed()
        else:
            choice.generator.manual_seed(choice_seed(s.seed, index))
    if tokenizer is not None:
        choice.detok = TextStop(tokenizer, request.stop.texts)
    return choice


def pick(logits: Tensor, answers: list[tuple[Request, Choice]]) -> list[int]:
    """Each row's next token: the argmax, or a draw with its request's settings and its own generator; under a
    grammar, among the tokens it allows alone. Where asked, each token's log-probability is kept."""
    rows = [i for i, (_, choice) in enumerate(answers) if choice.matcher is not None]
    if rows:
        allowed = torch.ones_like(logits, dtype=torch.bool)
        for i in rows:
            allowed[i] = answers[i][1].matcher.allowed(logits.device)
        logits = logits.masked_fill(~allowed, float("-inf"))
    chosen = logits.argmax(-1).tolist()
    for i, (request, choice) in enumerate(answers):
        s = request.sampling
        if not s.greedy:
            chosen[i] = int(next_token(logits[i:i + 1], True, s.temperature, s.top_k, s.top_p, choice.generator)[0])
    asked = [i for i, (request, _) in enumerate(answers) if request.logprobs is not None]
    if asked:
        logp = logits[asked].float().log_softmax(-1)  # (k, V): the model's, before temperature and top-p
        for row, i in enumerate(asked):
            request, choice = answers[i]
            top = logp[row].topk(request.logprobs) if request.logprobs else None
            alternatives = [] if top is None else list(zip(top.indices.tolist(), top.values.tolist()))
            choice.logprobs.append((chosen[i], float(logp[row, chosen[i]]), alternatives))
    return chosen


def take(request: Request, choice: Choice, token: int) -> None:
    """A new token for ``choice``: kept, or the end of the answer (a stop id, a stop text, its grammar's end, the
    budget)."""
    if token in request.stop.ids:
        choice.stop_id = token
        return _finish(choice, "stop")
    choice.tokens.append(token)
    # the grammar's end (a token it refuses cannot come: the mask forbids it)
    ended = choice.matcher is not None and (not choice.matcher.advance(token) or choice.matcher.stopped)
    if choice.detok is not None:
        choice.detok.add(token)
        choice.text = choice.detok.shown
        if choice.detok.stopped:
            return _finish(choice, "stop")
    if ended:
        return _finish(choice, "stop")
    if len(choice.tokens) >= request.max_new_tokens:
        _finish(choice, "length")


def _finish(choice: Choice, reason: str) -> None:
    choice.finish_reason = reason
    if choice.detok is not None:
        choice.text = choice.detok.final()


def fail(request: Request, err: Exception) -> None:
    """End every answer of ``request`` with an error; what failed is kept in ``request.error``."""
    request.error = f"{type(err).__name__}: {err}"
    for choice in request.choices:
        choice.finish_reason = "error"
