"""Constrained decoding: a grammar's mask of the tokens allowed next, applied to the logits at every step, so that an
answer can only be text the grammar accepts (a JSON schema's, a tool call's).

A grammar reads bytes, a model writes tokens: the mask of a step is every token whose bytes keep the text so far
inside the grammar. The library that computes it is ``llguidance`` (the ``serve`` extra; chosen by measuring it
against ``outlines-core``, ``bench/speed/grammar_mask.py`` and RESULTS.md; ``xgrammar`` would bring ``triton`` and
``transformers`` with it): it walks the vocabulary as a trie of bytes against the grammar's lexer, a few tens of
microseconds a token for a JSON schema, compiles a schema in about a millisecond, and needs no other Python package.

    vocabulary = Vocabulary(tokenizer, n_vocab=model's logits, eos_ids=tokenizer.eos_ids)   # once per engine
    grammar = Grammar.json_schema({"type": "object", ...})                                   # once per request
    matcher = vocabulary.matcher(grammar)                                                     # once per answer
    logits = logits.masked_fill(~matcher.allowed(), -inf); token = ...; matcher.advance(token)

The vocabulary's bytes come from the tokenizer itself (``Tokenizer.token_bytes``): characters, the byte-level BPE
trained here and a folder's byte-level BPE alike. A special token writes no text: it is never allowed, except the
end-of-text ids once the grammar accepts the text so far (then the answer may end there); when the grammar allows
nothing more, the answer ends (``Matcher.stopped``). Separators are fixed (``", "`` and ``": "``, no free
whitespace), so the longest answer a schema allows can be counted (``json_budget.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from scratchformer.extras import require

__all__ = ["JSON_OPTIONS", "Grammar", "GrammarError", "Matcher", "Vocabulary"]

# The JSON a grammar writes: fixed separators, no free whitespace, no \\u escapes (a character is its own bytes)
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": ",
                "json_allowed_escapes": "\"\\nrtbf"}


class GrammarError(ValueError):
    """A grammar the library cannot compile (its message names the part), or one the vocabulary cannot write."""


def _llguidance() -> Any:
    require("llguidance", "serve")
    import llguidance

    return llguidance


@dataclass(frozen=True)
class Grammar:
    """A grammar in llguidance's form (``source``) and what it is, in words (``name``)."""

    source: str
    name: str = "grammar"

    @classmethod
    def json_schema(cls, schema: dict[str, Any] | bool, name: str = "JSON schema") -> Grammar:
        """The JSON texts that fit ``schema`` (the separators fixed: ``JSON_OPTIONS``)."""
        llg = _llguidance()
        try:
            source = llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), defaults=JSON_OPTIONS)
        except ValueError as err:
            raise GrammarError(str(err)) from None
        return cls(source, name)

    @classmethod
    def lark(cls, text: str, name: str = "grammar") -> Grammar:
        """A grammar in llguidance's Lark dialect (which may hold ``%json { schema }``)."""
        return cls(_llguidance().LLMatcher.grammar_from_lark(text), name)


class Vocabulary:
    """A tokenizer's tokens as bytes, as the grammar library reads them (made once: for a 150,000-token vocabulary
    it takes a second). ``n_vocab``: the model's logits (a table padded past the tokenizer's ids: those write
    nothing); ``eos_ids``: the ids that end an answer."""

    def __init__(self, tokenizer: Any, n_vocab: int, eos_ids: tuple[int, ...]) -> None:
        llg = _llguidance()
        own = tokenizer.token_bytes()
        tokens = [b"\xff[" + str(i).encode() + b"]" if b is None or not b else b for i, b in enumerate(own)]
        tokens += [b"\xff[" + str(i).encode() + b"]" for i in range(len(tokens), n_vocab)]
        self.n_vocab, self.eos_ids = n_vocab, tuple(eos_ids)
        self.writes = [b is not None and len(b) > 0 for b in own] + [False] * (n_vocab - len(own))
        self.may = np.array(self.writes, dtype=bool)  # the ids a grammar may pick: those that write text, the ends
        self.may[[i for i in self.eos_ids if i < n_vocab]] = True
        self.tokenizer = tokenizer

        class Wrapped:  # what llguidance's TokenizerWrapper reads
            eos_token_id = self.eos_ids[0]
            bos_token_id = None
            special_token_ids = [i for i, ok in enumerate(self.writes) if not ok]

            def __init__(self) -> None:
                self.tokens = tokens

            def __call__(self, text: bytes | str) -> list[int]:
                text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
                return [i for i in tokenizer.encode(text) if i < n_vocab]

        self.ll = llg.LLTokenizer(llg.TokenizerWrapper(Wrapped()), n_vocab=n_vocab, eos_token=list(self.eos_ids))

    def check(self, grammar: Grammar, texts: str = "") -> None:
        """``GrammarError`` with the library's words if ``grammar`` does not compile for this vocabulary, or if the
        vocabulary cannot write a character of ``texts`` (what every answer of the grammar holds: a character model
        trained without ``{``)."""
        missing = self.tokenizer.cannot_encode(texts)
        if missing:
            shown = " ".join(repr(c) for c in missing[:8])
            raise GrammarError(f"this model's vocabulary cannot write {shown}, which the {grammar.name}'s answers "
                               "need")
        self.matcher(grammar)

    def matcher(self, grammar: Grammar) -> Matcher:
        """A matcher at the start of ``grammar`` (``GrammarError`` if it does not compile)."""
        llg = _llguidance()
        inner = llg.LLMatcher(self.ll, grammar.source, log_level=0)
        if inner.is_error():
            raise GrammarError(_short(inner.get_error()))
        return Matcher(inner, self)


class Matcher:
    """One answer's place in its grammar: the tokens allowed next, and each token taken."""

    def __init__(self, inner: Any, vocabulary: Vocabulary) -> None:
        self.inner, self.vocabulary = inner, vocabulary

    def allowed(self, device: torch.device | str = "cpu") -> Tensor:
        """``(V,)`` bool: the tokens that keep the text inside the grammar (the end-of-text ids once it may end)."""
        bits = np.unpackbits(np.frombuffer(self.inner.compute_bitmask(), dtype=np.uint8),
                             count=self.vocabulary.n_vocab, bitorder="little").view(bool)
        mask = bits & self.vocabulary.may  # (numpy: a torch op on a tensor this small costs more than the mask)
        if not mask.any():  # nothing this vocabulary writes would do: the answer ends here
            mask[list(self.vocabulary.eos_ids)] = True
        return torch.from_numpy(mask).to(device)

    def advance(self, token: int) -> bool:
        """Take ``token``; False if the grammar does not allow it (the matcher is then in error)."""
        return bool(self.inner.consume_token(int(token)))

    @property
    def stopped(self) -> bool:
        """Whether the grammar allows nothing more: the answer is complete."""
        return bool(self.inner.is_stopped())

    @property
    def accepting(self) -> bool:
        """Whether the text so far is a whole answer of the grammar."""
        return bool(self.inner.is_accepting())


def _short(error: str) -> str:
    """The library's error in one line (its first)."""
    return " ".join(error.strip().splitlines()[:1])[:300]
