"""Tokenizers: characters or byte-level BPE, with the same four special tokens at fixed ids.

Every tokenizer reserves ids 0..3 for ``<pad>``, ``<bos>``, ``<eos>`` and ``<unk>``, so models, losses
(``ignore_index=PAD_ID``) and decoding loops can rely on the constants below whatever the tokenizer.
Special tokens are never produced from text: encoding the string ``"<eos>"`` gives the ids of its
characters or pieces, not ``EOS_ID``; they are added only through ``add_bos`` / ``add_eos``.

- ``CharTokenizer``: one token per character seen in training (Tiny Shakespeare: 65 + 4 = 69), the
  char-rnn / nanoGPT setup. Characters not seen in training encode to ``UNK_ID``.
- ``PretrainedTokenizer``: a pretrained model's own tokenizer (BERT's WordPiece), for fine-tuning.
- ``BPETokenizer``: byte-pair encoding (Sennrich et al., 2016), the subword scheme of the paper's
  translation experiments, trained and run by Hugging Face ``tokenizers``. We use GPT-2's byte-level
  variant: text is NFKC-normalized (optionally lower-cased), split into words by the GPT-2 regex and
  mapped to bytes, so every string encodes without ``<unk>`` and decodes back exactly (for text already
  in NFKC form, which ordinary sentences, German umlauts included, are). The paper used a 37,000-token
  vocabulary shared between English and German (§5.1).

A tokenizer is saved as ``tokenizer.json`` in a directory (a checkpoint directory, typically), written
atomically; the JSON records its ``kind`` so that ``load_tokenizer`` rebuilds the right class.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from scratchformer.data.errors import DataError
from scratchformer.data.files import atomic_write_text

__all__ = [
    "BOS_ID", "EOS_ID", "PAD_ID", "SPECIAL_TOKENS", "UNK_ID", "BPETokenizer", "CharTokenizer", "PretrainedTokenizer",
    "Tokenizer",
    "load_tokenizer",
]

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
TOKENIZER_FILE = "tokenizer.json"
WORD_START = "\u2581"  # "▁", SentencePiece's mark for a token that starts a word (token_label)


class Tokenizer(ABC):
    """Text <-> token ids. Subclasses implement ``_encode``, ``decode``, ``id_to_token``, ``vocab_size``."""

    kind: ClassVar[str]
    pad_id: ClassVar[int] = PAD_ID
    bos_id: ClassVar[int] = BOS_ID
    eos_id: ClassVar[int] = EOS_ID
    unk_id: ClassVar[int] = UNK_ID

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of ids, special tokens included: every id is in ``range(vocab_size)``."""

    @abstractmethod
    def _encode(self, text: str) -> list[int]: ...

    @abstractmethod
    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        """Text of ``ids`` (a list, or a 1-D tensor); special tokens dropped if ``skip_special``, else shown
        as ``<pad>`` etc. Decoding does not stop at ``<eos>``: cut the ids first if that is wanted."""

    @abstractmethod
    def id_to_token(self, i: int) -> str:
        """The token string of id ``i``."""

    def token_label(self, i: int) -> str:
        """Id ``i`` as a person reads it, for plots: the token's text (``id_to_token`` by default)."""
        return self.id_to_token(i)

    @property
    def special_ids(self) -> frozenset[int]:
        """The ids of the special tokens (``<pad>``, ``<bos>``, ...), which are no text."""
        return frozenset(range(len(SPECIAL_TOKENS)))

    @abstractmethod
    def _to_json(self) -> dict[str, Any]: ...

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids of ``text``, optionally with ``BOS_ID`` first and ``EOS_ID`` last."""
        return self._wrap(self._encode(text), add_bos, add_eos)

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        """``encode`` for each text."""
        return [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]

    def save(self, directory: str | Path) -> Path:
        """Write ``directory/tokenizer.json`` atomically (creating ``directory``); returns its path."""
        state = {"kind": self.kind, **self._to_json()}
        return atomic_write_text(Path(directory) / TOKENIZER_FILE, json.dumps(state, ensure_ascii=False))

    @staticmethod
    def _wrap(ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        return [BOS_ID] * add_bos + ids + [EOS_ID] * add_eos

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise IndexError(f"token id {i} is outside the vocabulary (size {self.vocab_size})")
        return i

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


class CharTokenizer(Tokenizer):
    """One token per character: ids 0..3 are the specials, then the characters in the given order."""

    kind = "char"

    def __init__(self, chars: Iterable[str]) -> None:
        chars = list(chars)
        if any(not isinstance(c, str) or len(c) != 1 for c in chars) or len(set(chars)) != len(chars):
            raise ValueError("CharTokenizer needs distinct single characters")
        self.chars = chars
        self._itos = SPECIAL_TOKENS + chars
        self._stoi = {c: i for i, c in enumerate(chars, start=len(SPECIAL_TOKENS))}

    @classmethod
    def train(cls, texts: Iterable[str]) -> CharTokenizer:
        """The vocabulary of every character in ``texts``, sorted by code point."""
        seen: set[str] = set()
        for text in texts:
            seen.update(text)
        if not seen:
            raise DataError("no characters to build a character vocabulary from: the training text is empty")
        return cls(sorted(seen))

    @property
    def vocab_size(self) -> int:
        return len(self._itos)

    def _encode(self, text: str) -> list[int]:
        stoi = self._stoi
        return [stoi.get(c, UNK_ID) for c in text]

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        n_special = len(SPECIAL_TOKENS)
        ids = [self._check_id(i) for i in ids]
        return "".join(self._itos[i] for i in ids if not (skip_special and i < n_special))

    def id_to_token(self, i: int) -> str:
        return self._itos[self._check_id(i)]

    def _to_json(self) -> dict[str, Any]:
        return {"chars": self.chars}


class BPETokenizer(Tokenizer):
    """Byte-level BPE run by a Hugging Face ``tokenizers.Tokenizer`` (available as ``.hf``)."""

    kind = "bpe"

    def __init__(self, hf: HFTokenizer) -> None:
        for i, token in enumerate(SPECIAL_TOKENS):
            if hf.token_to_id(token) != i:
                raise ValueError(f"BPETokenizer needs {token!r} at id {i}, found id {hf.token_to_id(token)}")
        # Text that happens to spell "<eos>" is text: only add_bos/add_eos insert special ids.
        # (A runtime setting that tokenizer.json does not store, so set on every construction.)
        hf.encode_special_tokens = True
        self.hf = hf

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2,
              lowercase: bool = False) -> BPETokenizer:
        """Learn ``vocab_size`` tokens (specials and the 256 byte symbols included) from ``texts``;
        merges of pairs seen fewer than ``min_frequency`` times are not learned."""
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        minimum = len(SPECIAL_TOKENS) + len(alphabet)
        if vocab_size < minimum:
            raise DataError(f"vocab_size={vocab_size} is too small for byte-level BPE (at least {minimum}: "
                            f"{len(SPECIAL_TOKENS)} special tokens + {len(alphabet)} byte symbols)")
        hf = HFTokenizer(models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID]))
        hf.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()] if lowercase
                                             else [normalizers.NFKC()])
        # No prefix space: decode(encode(s)) == s exactly, without a leading space to strip.
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        # Specials first, so the trainer gives them ids 0..3; the full byte alphabet, so nothing is <unk>.
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=SPECIAL_TOKENS, initial_alphabet=alphabet,
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

    def token_label(self, i: int) -> str:
        """The token's text with a leading space shown as ``▁`` (SentencePiece's word-start mark): ``"▁the"``
        rather than the byte-level ``"Ġthe"``. A piece that is only part of a UTF-8 character keeps its
        byte-level form."""
        if i < len(SPECIAL_TOKENS):
            return SPECIAL_TOKENS[i]
        text = self.hf.decode([self._check_id(i)], skip_special_tokens=False)
        if not text or "\ufffd" in text:
            return self.id_to_token(i)
        return WORD_START + text[1:] if text.startswith(" ") else text

    def _to_json(self) -> dict[str, Any]:
        return {"hf": json.loads(self.hf.to_str())}


class PretrainedTokenizer(Tokenizer):
    """A pretrained model's own tokenizer (e.g. BERT's WordPiece), read from its ``tokenizer.json``.

    Its ids are the pretrained model's, so they do not follow the four fixed ids above except ``<pad>``:
    the tokenizer must pad with id 0 (BERT's ``[PAD]`` is 0). ``encode`` adds the model's own special
    tokens (``[CLS] ... [SEP]`` for BERT), as the model was trained with them; ``add_bos``/``add_eos``
    are not supported. Padding and truncation stored in the file are switched off: batches are padded by
    ``pad_batch`` and long inputs follow the ``truncate`` setting like every other tokenizer.
    """

    kind = "pretrained"

    def __init__(self, hf: HFTokenizer) -> None:
        hf.no_padding()
        hf.no_truncation()
        pad = hf.token_to_id("[PAD]") if hf.token_to_id("[PAD]") is not None else hf.token_to_id("<pad>")
        if pad != PAD_ID:
            raise DataError(f"this pretrained tokenizer pads with id {pad}; scratchformer needs padding id {PAD_ID}")
        self.hf = hf
        self.unk_id = hf.token_to_id("[UNK]") if hf.token_to_id("[UNK]") is not None else UNK_ID  # type: ignore[misc]

    @classmethod
    def from_file(cls, path: str | Path) -> PretrainedTokenizer:
        return cls(HFTokenizer.from_file(str(path)))

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    @property
    def special_ids(self) -> frozenset[int]:  # the model's own: [PAD], [UNK], [CLS], [SEP], [MASK] for BERT
        return frozenset(i for i, t in self.hf.get_added_tokens_decoder().items() if t.special)

    def _encode(self, text: str) -> list[int]:
        return self.hf.encode(text).ids

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if add_bos or add_eos:
            raise ValueError("a pretrained tokenizer adds its own special tokens; add_bos/add_eos are not supported")
        return self._encode(text)

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        if add_bos or add_eos:
            raise ValueError("a pretrained tokenizer adds its own special tokens; add_bos/add_eos are not supported")
        return [e.ids for e in self.hf.encode_batch(list(texts))]

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        return self.hf.decode([self._check_id(i) for i in ids], skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        return self.hf.id_to_token(self._check_id(i))

    def _to_json(self) -> dict[str, Any]:
        return {"hf": json.loads(self.hf.to_str())}


class _Counted:
    """An iterable over texts that counts characters on the way, to detect an empty corpus."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts, self.n_chars = texts, 0

    def __iter__(self) -> Iterator[str]:
        for text in self.texts:
            self.n_chars += len(text)
            yield text


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """The tokenizer saved in ``directory/tokenizer.json``; ``DataError`` if it is missing or invalid."""
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        raise DataError(f"no such file: {path} (no tokenizer saved in {directory})")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        kind = state["kind"]
        if kind == "char":
            return CharTokenizer(state["chars"])
        if kind == "bpe":
            return BPETokenizer(HFTokenizer.from_str(json.dumps(state["hf"])))
        if kind == "pretrained":
            return PretrainedTokenizer(HFTokenizer.from_str(json.dumps(state["hf"])))
        raise ValueError(f"unknown tokenizer kind {kind!r}")
    except Exception as err:  # JSON, key, type and tokenizers (Rust) errors all mean "corrupt"
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"{path} is not a valid tokenizer file ({detail})") from None
