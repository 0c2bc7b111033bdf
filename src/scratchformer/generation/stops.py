"""An answer's text as its tokens come, and the stop texts looked for in it, without decoding the whole answer again
at every step.

A token does not always make characters of its own: byte-level BPE splits a character into several tokens, and some
tokenizers write a token differently after another one. So each new token is decoded together with the few before it
(from ``prefix`` on) and compared with those few alone (``prefix`` to ``read``); only what the new ones add, once
complete (no trailing ``\\ufffd``, a character still waiting for its last bytes), is appended (as vLLM's
``detokenize_incrementally`` does). A stop text is then looked for where it could have appeared: in the new text and
the last ``longest - 1`` characters before it. Ids past the tokenizer's vocabulary (a model's table is often padded
beyond it, as Qwen3's is) have no text: they are dropped here, the one place that turns tokens into text.

``shown`` is the text safe to send while the answer runs: without an ending that may be the start of a stop text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["TextStop", "cut_at_stop"]

CONTEXT = 6  # tokens decoded before the new ones, so that a token decodes as it does inside the text


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """``text`` up to the first stop text in it (all of it when none is)."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=len(text))
    return text[:cut]


class TextStop:
    """One answer's text, fed a token at a time (``add``); ``stopped`` once a stop text appears (``text`` then ends
    before it)."""

    def __init__(self, tokenizer: Any, texts: Sequence[str] = ()) -> None:
        self.tokenizer, self.texts = tokenizer, tuple(t for t in texts if t)
        self.vocab = tokenizer.vocab_size
        self.longest = max((len(t) for t in self.texts), default=0)
        self.ids: list[int] = []
        self.text = ""
        self.prefix = self.read = 0
        self.stopped = False

    def add(self, token: int) -> str:
        """One more token; returns the text it completed (often "", sometimes several characters)."""
        if self.stopped or not 0 <= token < self.vocab:
            return ""
        self.ids.append(token)
        before = self.tokenizer.decode(self.ids[self.prefix:self.read])
        now = self.tokenizer.decode(self.ids[self.prefix:])
        if len(now) <= len(before) or now.endswith("\ufffd"):
            return ""  # nothing complete yet: wait for the next tokens
        new = now[len(before):]
        start = max(0, len(self.text) - self.longest + 1)
        self.text += new
        self.prefix, self.read = max(0, len(self.ids) - CONTEXT), len(self.ids)
        if self.texts:
            cut = min((i for i in (self.text.find(s, start) for s in self.texts) if i >= 0), default=-1)
            if cut >= 0:
                new = new[:max(0, len(new) - (len(self.text) - cut))]
                self.text, self.stopped = self.text[:cut], True
        return new

    @property
    def shown(self) -> str:
        """The text safe to send while the answer runs: without an ending that may begin a stop text."""
        if self.stopped:
            return self.text
        hold = max((k for s in self.texts for k in range(1, len(s)) if self.text.endswith(s[:k])), default=0)
        return self.text[:len(self.text) - hold]

    def final(self) -> str:
        """The whole answer's text, decoded at once (what a benchmark scores), cut before its first stop text."""
        return cut_at_stop(self.tokenizer.decode(self.ids), self.texts)
