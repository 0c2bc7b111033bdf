"""Which recent answers the engine keeps for prefix reuse, and which one a new prompt begins with.

A chat's next turn sends the whole conversation again: the first turn's prompt, its answer, then a new message. Its
first tokens were read a moment ago, and their keys and values are what they were then (a causal model's position t
never sees later tokens). So when an answer ends, the engine keeps its row's keys and values (the prompt and the
answer, as far as its cache reached) in one of ``slots`` kept rows of the pool (``KVPool.keep``), and when a prompt
arrives, the kept row it shares the longest beginning with (``find``: at least ``MIN_TOKENS``, and never the whole
prompt, whose last position must be read to give the first token's logits) is copied into the new row
(``KVPool.restore``) and only the rest of the prompt is read (as llama.cpp's ``--cache-prompt`` and vLLM's prefix
caching do; vLLM shares blocks of 16 tokens, here a kept row is copied). The least recently used kept row is the one
given up for a new one. The greedy tokens are the same with and without: the keys are the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIN_TOKENS", "Prefixes"]

MIN_TOKENS = 8  # a shorter shared beginning is read again: copying saves nothing worth the bookkeeping


@dataclass
class Kept:
    tokens: tuple[int, ...]
    slot: int
    used: int  # when it was last kept or found (a counter): the smallest is given up first


class Prefixes:
    """The index of the pool's kept rows: ``keep(tokens)`` gives the slot to copy an ended answer's row into,
    ``find(prompt)`` the slot and length of the longest kept beginning of ``prompt``."""

    def __init__(self, slots: int) -> None:
        self.slots, self.kept, self.clock = slots, [], 0

    def find(self, prompt: list[int]) -> tuple[int, int] | None:
        """``(slot, length)`` of the kept row ``prompt`` shares the longest beginning with (at most all but its last
        token), or None for none of at least ``MIN_TOKENS``."""
        best, length = None, 0
        for kept in self.kept:
            n = _shared(kept.tokens, prompt, len(prompt) - 1)
            if n > length:
                best, length = kept, n
        if best is None or length < MIN_TOKENS:
            return None
        self.clock += 1
        best.used = self.clock
        return best.slot, length

    def keep(self, tokens: list[int]) -> int:
        """The slot for an ended answer's ``tokens`` (the prompt and the answer, as far as its row holds them): one
        whose tokens begin these (a longer conversation replaces its start), a free one, or the least used."""
        self.clock += 1
        for kept in self.kept:
            if _shared(kept.tokens, tokens, len(kept.tokens)) == len(kept.tokens):
                kept.tokens, kept.used = tuple(tokens), self.clock
                return kept.slot
        if len(self.kept) < self.slots:
            self.kept.append(Kept(tuple(tokens), len(self.kept), self.clock))
            return self.kept[-1].slot
        oldest = min(self.kept, key=lambda k: k.used)
        oldest.tokens, oldest.used = tuple(tokens), self.clock
        return oldest.slot

    def clear(self) -> None:
        self.kept = []


def _shared(a: tuple[int, ...] | list[int], b: list[int], most: int) -> int:
    """How many first tokens ``a`` and ``b`` share (at most ``most``)."""
    n = 0
    for x, y in zip(a, b[:most]):
        if x != y:
            break
        n += 1
    return n
