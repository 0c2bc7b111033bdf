"""One token per character seen in training: the char-rnn / nanoGPT setup."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from scratchformer.errors import DataError
from scratchformer.tokenizers.base import BOS_ID, EOS_ID, SPECIAL_TOKENS, UNK_ID, Tokenizer, special_tokens


class CharTokenizer(Tokenizer):
    """One token per character: the special tokens first (ids 0..3, and 4 for ``<mask>`` when asked), then
    the characters in the given order. A character not seen in training encodes to ``UNK_ID``."""

    kind = "char"

    def __init__(self, chars: Iterable[str], *, specials: Sequence[str] = SPECIAL_TOKENS) -> None:
        chars = list(chars)
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer needs distinct single characters")
        if list(specials[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"CharTokenizer needs the special tokens {SPECIAL_TOKENS} first, got {list(specials)}")
        self.chars, self.specials = chars, list(specials)
        self._itos = self.specials + chars
        self._stoi = {c: i for i, c in enumerate(chars, start=len(self.specials))}
        self._table: np.ndarray | None = None  # code point -> id, made on first use by encode_arrays

    @classmethod
    def train(cls, texts: Iterable[str], *, with_mask: bool = False) -> CharTokenizer:
        """The vocabulary of every character in ``texts``, sorted by code point."""
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        if not seen:
            raise DataError("no characters to build a character vocabulary from: the training text is empty")
        return cls(sorted(seen), specials=special_tokens(with_mask))

    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    def _encode(self, text: str) -> list[int]:
        stoi = self._stoi
        return [stoi.get(c, UNK_ID) for c in text]

    def encode_arrays(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[np.ndarray]:
        """``encode_batch`` as NumPy arrays, looked up all at once: what preparing a large corpus uses (a
        Python loop over the characters of a gigabyte takes minutes)."""
        if self._table is None:  # one entry per code point up to the largest known (at most 1.1M: 4.5 MB)
            points = [ord(c) for c in self.chars]
            self._table = np.full(max(points, default=0) + 2, UNK_ID, dtype=np.int32)
            self._table[points] = np.arange(len(self.specials), len(self._itos), dtype=np.int32)
        points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.intp)
        np.minimum(points, len(self._table) - 1, out=points)  # beyond the table: the last entry, <unk>
        ids = self._table.take(points)
        parts = np.split(ids, np.cumsum([len(t) for t in texts])[:-1]) if texts else []
        if add_bos or add_eos:
            parts = [np.concatenate([[BOS_ID]] * add_bos + [p] + [[EOS_ID]] * add_eos).astype(np.int64)
                     for p in parts]
        return parts

    def token_bytes(self) -> list[bytes | None]:
        return [None] * len(self.specials) + [c.encode("utf-8") for c in self.chars]

    def cannot_encode(self, text: str) -> list[str]:
        return list(dict.fromkeys(c for c in text if c not in self._stoi))

    def with_characters(self, chars: Sequence[str]) -> CharTokenizer:
        return CharTokenizer([*self.chars, *(c for c in dict.fromkeys(chars) if c not in self._stoi)],
                             specials=self.specials)

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        n_special = len(self.specials)
        ids = [self._check_id(i) for i in ids]
        return "".join(self._itos[i] for i in ids if not (skip_special and i < n_special))

    def id_to_token(self, i: int) -> str:
        return self._itos[self._check_id(i)]

    @property
    def unknown_id(self) -> int | None:
        return self.unk_id

    @property
    def per_character(self) -> bool:
        return True

    def hf_json(self) -> str:
        """Characters as a Hugging Face ``tokenizers.Tokenizer``: a BPE model without merges splits text into
        characters and looks each up (an unseen one is ``<unk>``, one per character, as here)."""
        from tokenizers import AddedToken, decoders, models
        from tokenizers import Tokenizer as Backend

        vocab = {token: i for i, token in enumerate(self._itos)}
        backend = Backend(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS[UNK_ID], fuse_unk=False))
        backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in self.specials])
        backend.decoder = decoders.Fuse()  # join the characters (the default decoder puts spaces between tokens)
        return backend.to_str()

    def _to_json(self) -> dict[str, Any]:
        return {"chars": self.chars, "specials": self.specials}
