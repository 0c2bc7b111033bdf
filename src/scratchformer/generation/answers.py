"""How each answer of the decoding engine picks its tokens and when it ends: its generator (seeded from the request's
seed and its index), the token it picks from its logits (the argmax, or a draw with its request's settings, as
``generate`` draws for a batch of one), and the stop rule each new token is checked against (a stop id, a stop text,
the budget)."""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.generation.requests import Choice, Request, choice_seed
from scratchformer.generation.sampling import next_token
from scratchformer.generation.stops import TextStop

__all__ = ["new_choice", "pick", "take"]


def new_choice(request: Request, index: int, device: torch.device, tokenizer: object | None) -> Choice:
    """Answer ``index`` of ``request``: its own generator when it samples, its incremental text when there is a
    tokenizer."""
    choice = Choice(index)
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
    """Each row's next token: the argmax, or a draw with its request's settings and its own generator."""
    chosen = logits.argmax(-1).tolist()
    for i, (request, choice) in enumerate(answers):
        s = request.sampling
        if not s.greedy:
            chosen[i] = int(next_token(logits[i:i + 1], True, s.temperature, s.top_k, s.top_p, choice.generator)[0])
    return chosen


def take(request: Request, choice: Choice, token: int) -> None:
    """A new token for ``choice``: kept, or the end of the answer (a stop id, a stop text, the budget)."""
    if token in request.stop.ids:
        choice.stop_id = token
        return _finish(choice, "stop")
    choice.tokens.append(token)
    if choice.detok is not None:
        choice.detok.add(token)
        choice.text = choice.detok.shown
        if choice.detok.stopped:
            return _finish(choice, "stop")
    if len(choice.tokens) >= request.max_new_tokens:
        _finish(choice, "length")


def _finish(choice: Choice, reason: str) -> None:
    choice.finish_reason = reason
    if choice.detok is not None:
        choice.text = choice.detok.final()
