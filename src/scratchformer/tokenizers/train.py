"""A new tokenizer of the kind a run names (``tokenizer=char`` or ``tokenizer=bpe``), trained on its text: the one place
that maps the setting to the class that learns it, imported only when it is the one trained."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from scratchformer.tokenizers.base import Tokenizer

__all__ = ["described", "id_settings", "known_vocab_size", "trainer"]


def trainer(kind: str, *, vocab_size: int, lowercase: bool, with_mask: bool) -> Callable[[Iterable[str]], Tokenizer]:
    """How a tokenizer of ``kind`` is trained: ``trainer(kind, ...)(texts)`` (``with_mask``: reserve ``<mask>``, for
    masked-token pretraining; ``vocab_size`` and ``lowercase``: BPE's)."""
    if kind == "bpe":
        from scratchformer.tokenizers.bpe import BPETokenizer

        return functools.partial(BPETokenizer.train, vocab_size=vocab_size, lowercase=lowercase, with_mask=with_mask)
    from scratchformer.tokenizers.char import CharTokenizer

    return functools.partial(CharTokenizer.train, with_mask=with_mask)


def id_settings(kind: str, *, vocab_size: int, lowercase: bool) -> dict[str, Any]:
    """The settings besides the kind that change the ids a trained tokenizer gives (BPE's size and case)."""
    return {"vocab_size": vocab_size, "lowercase": lowercase} if kind == "bpe" else {}


def known_vocab_size(kind: str, vocab_size: int) -> int | None:
    """The vocabulary a tokenizer of ``kind`` will have where the settings decide it (BPE's ``vocab_size``); None where
    the text does (characters)."""
    return vocab_size if kind == "bpe" else None


def described(kind: str, vocab_size: int) -> str:
    """The tokenizer, for a person: "BPE tokenizer of 8,000 tokens", "character tokenizer"."""
    return f"BPE tokenizer of {vocab_size:,} tokens" if kind == "bpe" else "character tokenizer"
