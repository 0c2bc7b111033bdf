"""Byte-level BPE (Sennrich et al., 2016, as GPT-2 runs it), trained and run by Hugging Face ``tokenizers``.

Sennrich et al.'s BPE starts from characters; this is GPT-2's byte-level variant: text is NFKC-normalized
(optionally lower-cased), split into words by the GPT-2 regex and mapped to bytes, so every string encodes
without ``<unk>`` and decodes back exactly (for text already in NFKC form, which ordinary sentences, German
umlauts included, are). The paper used a 37,000-token vocabulary shared between English and German (§5.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from scratchformer.errors import DataError
from scratchformer.tokenizers.base import (
    MASK_TOKEN,
    SPECIAL_TOKENS,
    UNK_ID,
    WORD_START,
    Tokenizer,
    byte_level_bytes,
    special_tokens,
)


class BPETokenizer(Tokenizer):
    """Byte-level BPE run by a Hugging Face ``tokenizers.Tokenizer`` (available as ``.hf``)."""

    kind = "bpe"

    def __init__(self, hf: HFTokenizer) -> None:
        self.specials = special_tokens(with_mask=hf.token_to_id(MASK_TOKEN) is not None)
        for i, token in enumerate(self.specials):
            if hf.token_to_id(token) != i:
                raise ValueError(f"BPETokenizer needs {token!r} at id {i}, found id {hf.token_to_id(token)}")
        # Text that happens to spell "<eos>" is text: only add_bos/add_eos insert special ids.
        # (A runtime setting that tokenizer.json does not store, so set on every construction.)
        hf.encode_special_tokens = True
        self.hf = hf

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2, lowercase: bool = False,
              with_mask: bool = False) -> BPETokenizer:
        """Learn ``vocab_size`` tokens (specials and the 256 byte symbols included) from ``texts``;
        merges of pairs seen fewer than ``min_frequency`` times are not learned."""
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        specials = special_tokens(with_mask)
        minimum = len(specials) + len(alphabet)
        if vocab_size < minimum:
            raise DataError(f"vocab_size={vocab_size} is too small for byte-level BPE (at least {minimum}: "
                            f"{len(specials)} special tokens + {len(alphabet)} byte symbols)")
        hf = HFTokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
        hf.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()] if lowercase
                                             else [normalizers.NFKC()])
        # No prefix space: decode(encode(s)) == s exactly, without a leading space to strip.
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        # Specials first, so the trainer gives them ids 0..3 (4); the full byte alphabet, so nothing is <unk>.
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=specials, initial_alphabet=alphabet,
                                      show_progress=False)
        counted = _Counted(texts)
        hf.train_from_iterator(counted, trainer=trainer)
        if counted.n_chars == 0:
            raise DataError("no text to train a BPE tokenizer on: the training text is empty")
        return cls(hf)

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def _encode(self, text: str) -> list[int]:
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        # One call into Rust for the whole batch (parallel there) instead of one per text.
        encodings = self.hf.encode_batch(list(texts), add_special_tokens=False)
        return [self._wrap(e.ids, add_bos, add_eos) for e in encodings]

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        return self.hf.decode([self._check_id(i) for i in ids], skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        """The token as the BPE vocabulary stores it: byte-level symbols, e.g. ``"Ġthe"`` for " the"."""
        return self.hf.id_to_token(self._check_id(i))

    def token_bytes(self) -> list[bytes | None]:
        """Each token's bytes, read from its byte-level symbols (a piece of a character is its bytes alone)."""
        n = len(self.specials)
        return [None if i < n else byte_level_bytes(self.hf.id_to_token(i)) for i in range(self.vocab_size)]

    def token_label(self, i: int) -> str:
        """The token's text with a leading space shown as ``▁`` (SentencePiece's word-start mark): ``"▁the"``
        rather than the byte-level ``"Ġthe"``. A piece that is only part of a UTF-8 character keeps its
        byte-level form."""
        if i < len(self.specials):
            return self.specials[i]
        text = self.hf.decode([self._check_id(i)], skip_special_tokens=False)
        if not text or "\ufffd" in text:
            return self.id_to_token(i)
        return WORD_START + text[1:] if text.startswith(" ") else text

    @property
    def unknown_id(self) -> int | None:
        return unknown_token_id(self.hf)

    def hf_json(self) -> str:
        return self.hf.to_str()

    def _to_json(self) -> dict[str, Any]:
        return {"hf": json.loads(self.hf.to_str())}


def unknown_token_id(hf: HFTokenizer) -> int | None:
    """The id of the unknown token of a Hugging Face tokenizer's model, None where it has none (byte-level BPE writes
    every character in bytes)."""
    token = getattr(hf.model, "unk_token", None)
    return hf.token_to_id(token) if token else None


class _Counted:
    """An iterable over texts that counts characters on the way, to detect an empty corpus."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts, self.n_chars = texts, 0

    def __iter__(self) -> Iterator[str]:
        for text in self.texts:
            self.n_chars += len(text)
            yield text
