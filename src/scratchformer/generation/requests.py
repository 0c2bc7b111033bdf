"""What the decoding engine is asked (``Request``) and what it answers (each ``Choice``), in the words of the API it
serves: how to pick tokens (``Sampling``), when an answer ends (``Stop``), how many answers (``n``).

    Request(prompt=[ids], max_new_tokens=64, sampling=Sampling(temperature=0.8, seed=1), stop=Stop({eos}, ("\\n\\n",)),
            n=4)
    -> request.choices[i].tokens, .text, .finish_reason ("stop", "length", "cancelled", "error")

Under a ``grammar`` (``grammar.py``) each answer picks only among the tokens its grammar allows, and ends where the
grammar does; with ``logprobs=k`` each answer keeps, for each token, its log-probability and the ``k`` most likely
alternatives: the model's log-softmax before temperature, top-k and top-p, over the allowed tokens under a grammar.

Choice i of a request with a ``seed`` draws from its own generator, seeded from the seed and i (``choice_seed``):
the n answers differ from each other, and the whole response is the same every time. Choice 0's seed is the seed
itself, so one answer with a seed is what ``generate(..., seed=seed)`` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Choice", "Request", "Sampling", "Stop", "choice_seed"]


@dataclass(frozen=True)
class Sampling:
    """How a choice picks its tokens: greedy at ``temperature == 0``, else sampled from ``softmax(logits /
    temperature)`` within ``top_k`` and the ``top_p`` nucleus, drawn with a generator seeded by ``seed``."""

    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


@dataclass(frozen=True)
class Stop:
    """When an answer ends: at one of the token ids ``ids`` (every end-of-text id of the model; not kept), at one of
    the ``texts`` (the answer's text is cut before it), or after ``Request.max_new_tokens`` tokens."""

    ids: frozenset[int] = frozenset()
    texts: tuple[str, ...] = ()


def choice_seed(seed: int, index: int) -> int:
    """The seed of choice ``index`` of a request seeded with ``seed``: the seed itself for the first, a distinct one
    (a splitmix of the two) for each other."""
    if index == 0:
        return seed
    z = (seed + 0x9E3779B97F4A7C15 * index) % (1 << 64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
    return (z ^ (z >> 31)) % (1 << 63)


@dataclass(eq=False)
class Choice:
    """One answer being decoded: its tokens (no stop id), its text (``text``: what is safe to show so far, the whole
    answer once it ends), why it ended (None while it runs), its cache row while live, its generator."""

    index: int
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str | None = None
    row: int = -1
    generator: torch.Generator | None = None
    detok: Any = None  # its incremental text (``stops.TextStop``), when the engine has a tokenizer
    stop_id: int | None = None  # the stop id that ended it, if one did (not in ``tokens``)
    matcher: Any = None  # its place in the request's grammar (``grammar.Matcher``), when it has one
    # each token's log-probability and the most likely alternatives, when the request asks (``Request.logprobs``)
    logprobs: list[tuple[int, float, list[tuple[int, float]]]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


@dataclass(eq=False)
class Request:
    """A prompt to answer ``n`` times. ``on_update(request)`` is called by the stepping thread after each step that
    gave any of its choices a token or ended one. ``cancelled``: set by ``Engine.cancel`` (a client went away)."""

    prompt: list[int]
    max_new_tokens: int
    sampling: Sampling = Sampling()
    stop: Stop = Stop()
    n: int = 1
    on_update: Callable[[Request], None] | None = None
    choices: list[Choice] = field(default_factory=list)
    cancelled: bool = False
    error: str | None = None  # what failed, when a step failed for this request
    cached_tokens: int = 0  # the prompt's first tokens read from a kept answer's cache (prefix reuse), not again
    grammar: Any = None  # a ``grammar.Grammar`` every answer must fit (its mask applied at each step), or None
    logprobs: int | None = None  # keep each token's log-probability and this many alternatives (0 to 20), or not

    @property
    def done(self) -> bool:
        return bool(self.choices) and all(c.done for c in self.choices)

    @property
    def generated(self) -> int:
        return sum(len(c.tokens) for c in self.choices)
