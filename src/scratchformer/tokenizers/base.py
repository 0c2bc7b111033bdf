"""What every tokenizer shares: the special tokens at fixed ids, the ``Tokenizer`` interface, saving and loading."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from scratchformer.atomic import atomic_write_text
from scratchformer.errors import DataError, listed

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
MASK_TOKEN, MASK_ID = "<mask>", 4  # only in tokenizers made for masked-token pretraining
TOKENIZER_FILE = "tokenizer.json"
WORD_START = "\u2581"  # "▁", SentencePiece's mark for a token that starts a word (token_label)


def special_tokens(with_mask: bool) -> list[str]:
    """The special tokens a new tokenizer reserves, ids 0, 1, ...: the four, and ``<mask>`` (id 4) if asked."""
    return SPECIAL_TOKENS + [MASK_TOKEN] if with_mask else list(SPECIAL_TOKENS)


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet read backwards: the printable character each byte is stored as -> the byte."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), 256)]
    moved = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in kept}, **{chr(256 + i): b for i, b in enumerate(moved)}}


BYTE_OF = _byte_alphabet()


def byte_level_bytes(token: str) -> bytes | None:
    """The bytes of a byte-level BPE token as its vocabulary stores it (``"\u0120the"`` -> ``b" the"``); None if it is
    not one (an added token's text)."""
    if not all(c in BYTE_OF for c in token):
        return None
    return bytes(BYTE_OF[c] for c in token)


class Tokenizer(ABC):
    """Text <-> token ids. Subclasses implement ``_encode``, ``decode``, ``id_to_token``, ``vocab_size``."""

    kind: ClassVar[str]
    pad_id: ClassVar[int] = PAD_ID
    bos_id: ClassVar[int] = BOS_ID
    eos_id: ClassVar[int] = EOS_ID
    unk_id: ClassVar[int] = UNK_ID
    specials: list[str] = SPECIAL_TOKENS  # the special tokens, at ids 0, 1, ...
    has_pad: bool = True  # a pad token of its own (else pad_id is a real token standing in, told apart by a mask)

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
        return frozenset(range(len(self.specials)))

    @property
    def mask_id(self) -> int | None:
        """The id of ``<mask>`` (masked-token pretraining), or None when this tokenizer has none."""
        return MASK_ID if MASK_TOKEN in self.specials else None

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Every id that ends a generation (a pretrained model may have several): here ``<eos>``'s alone."""
        return (self.eos_id,)

    @property
    def chat_template(self) -> str | None:
        """A chat template (Jinja) that came with the tokenizer (a pretrained model's): none here."""
        return None

    @property
    def adds_bos(self) -> bool:
        """Whether ``encode(text)`` starts with ``bos_id`` by itself: not here (``add_bos`` asks for it)."""
        return False

    def added_around(self) -> tuple[list[int], list[int]]:
        """The ids ``encode`` puts before and after a text's own by itself: none here (a pretrained one's may)."""
        return [], []

    def encode_bare(self, text: str) -> list[int]:
        """The ids of ``text`` alone, without what ``encode`` adds around it by itself (``added_around``)."""
        return self._encode(text)

    @property
    def own_bos_id(self) -> int | None:
        """The id of a begin-of-text token of its own: ``bos_id`` here; None where a pretrained model names none."""
        return self.bos_id

    @property
    def unknown_id(self) -> int | None:
        """The id a character outside the vocabulary becomes, or None where every character is written (in bytes)."""
        return None

    @property
    def per_character(self) -> bool:
        """Whether each token is one character, looked up one by one (a list of its tokens' texts can run it)."""
        return False

    @abstractmethod
    def hf_json(self) -> str:
        """This tokenizer as Hugging Face ``tokenizers`` writes it (``tokenizer.json``): the file an export carries,
        which that library reads to give the same ids."""

    def cannot_encode(self, text: str) -> list[str]:
        """The characters of ``text`` this tokenizer has no token for (they would read as ``<unk>``), in order of first
        appearance: none for a byte-level or pretrained tokenizer, which writes every string."""
        return []

    def check_known(self, text: str) -> None:
        """Refuse (``DataError``, one line) a text with characters this tokenizer has no token for, without encoding
        it (a byte-level or pretrained tokenizer writes every text: nothing to look up)."""
        if unknown := self.cannot_encode(text):
            raise DataError(f"the model's vocabulary has no {listed(unknown)} (in {text[:40]!r})")

    def special_text(self, role: str) -> str | None:
        """The text of its ``role`` token (bos, eos, pad, unk), as a chat template writes it (``{{ bos_token }}``);
        None where it has none."""
        return self.id_to_token(getattr(self, f"{role}_id"))

    def token_bytes(self) -> list[bytes | None]:
        """Each id's text as UTF-8 bytes, in id order (what a grammar's mask is computed over,
        ``generation/grammar.py``): None for an id that writes no text (a special token). A byte-level tokenizer's
        token may be part of a character's bytes; here (a tokenizer whose tokens are whole texts), each id decoded
        alone."""
        specials = self.special_ids
        return [None if i in specials else self.decode([i]).encode("utf-8") for i in range(self.vocab_size)]

    def with_characters(self, chars: Sequence[str]) -> Tokenizer:
        """This tokenizer with ``chars`` added at the end of its vocabulary (the ids it had stay): only a
        character-level tokenizer can grow so."""
        raise TypeError(f"a {type(self).__name__} writes every character; it has none to add")

    @abstractmethod
    def _to_json(self) -> dict[str, Any]: ...

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Token ids of ``text``, optionally with ``BOS_ID`` first and ``EOS_ID`` last."""
        return self._wrap(self._encode(text), add_bos, add_eos)

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        """``encode`` for each text."""
        return [self.encode(t, add_bos=add_bos, add_eos=add_eos) for t in texts]

    @property
    def parsed_specials(self) -> tuple[str, ...]:
        """The texts ``encode`` reads as special tokens where a text holds them: none here (``"<eos>"`` in a text is
        five characters); a pretrained tokenizer's own (``<|im_start|>``)."""
        return ()

    def encode_pieces(self, pieces: Sequence[tuple[str, bool]], around: bool = True) -> list[int]:
        """Token ids of a text in pieces, each ``(text, own)``: ``own`` where a template wrote it (its special tokens'
        texts are special tokens), not where a message did (its words are text, whatever they spell: a user cannot
        forge a template's markers). ``encode`` of the whole text where no message holds a ``parsed_specials`` text;
        without ``around``, less what ``encode`` adds around a whole text (Llama 3's bos). Here, where no text is read
        as a special token and ``encode`` adds nothing: ``encode`` of the whole."""
        return self.encode("".join(text for text, _ in pieces))

    def state(self) -> dict[str, Any]:
        """What ``save`` writes: everything that decides the ids (a prepared corpus is keyed by its digest)."""
        return {"kind": self.kind, **self._to_json()}

    def save(self, directory: str | Path) -> Path:
        """Write ``directory/tokenizer.json`` atomically (creating ``directory``); returns its path."""
        return atomic_write_text(Path(directory) / TOKENIZER_FILE, json.dumps(self.state(), ensure_ascii=False))

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
