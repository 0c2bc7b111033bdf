"""A pretrained model's own tokenizer (BERT's WordPiece, Llama's byte-level BPE, ...), with what its folder says of it:
its special tokens, every end-of-generation id, its chat template (``interop/folder_tokenizer.py`` reads them)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from scratchformer.errors import DataError
from scratchformer.tokenizers.base import PAD_ID, UNK_ID, Tokenizer, byte_level_bytes
from scratchformer.tokenizers.bpe import unknown_token_id


class PretrainedTokenizer(Tokenizer):
    """A pretrained model's own tokenizer (BERT's WordPiece, GPT-2's, Llama's or Qwen3's byte-level BPE), read from
    its ``tokenizer.json``.

    Its ids are the pretrained model's, so they do not follow the four fixed ids above. ``pad_id`` is its pad
    token's id (``[PAD]`` or ``<pad>``: 0 for BERT), else the one given (a model's ``pad_token_id``), else 0:
    GPT-2's, Llama 3's and Qwen3's tokenizers have no pad token, and their id 0 is a real token, so a batch's
    padding is told by its mask (``pad_batch``), never by the id (``has_pad`` says whether it has a pad token).
    ``bos_id`` and ``eos_id`` are the model's (its folder's) when given, ``eos_ids`` every id that ends a generation,
    ``config`` its folder's ``tokenizer_config.json`` (the token texts, the chat template), kept with every run made
    from it so that its exports carry them. ``encode`` adds the model's own special tokens (``[CLS] ... [SEP]`` for
    BERT, ``<|begin_of_text|>`` for Llama 3: ``added_around``), as the model was trained with them;
    ``add_bos``/``add_eos`` are not supported. Padding and truncation stored in the file are switched off: batches
    are padded by ``pad_batch`` and long inputs follow the ``truncate`` setting like every other tokenizer.
    """

    kind = "pretrained"

    def __init__(self, hf: HFTokenizer, *, pad_id: int | None = None, bos_id: int | None = None,
                 eos_id: int | None = None, eos_ids: Sequence[int] = (), config: dict[str, Any] | None = None) -> None:
        hf.no_padding()
        hf.no_truncation()
        own = [hf.token_to_id(t) for t in ("[PAD]", "<pad>") if hf.token_to_id(t) is not None]
        self.pad_id = own[0] if own else (pad_id if pad_id is not None else PAD_ID)  # type: ignore[misc]
        self.has_pad = bool(own) or pad_id is not None  # a pad token of its own, not id 0 standing in
        if bos_id is not None:
            self.bos_id = bos_id  # type: ignore[misc]
        if eos_id is not None:
            self.eos_id = eos_id  # type: ignore[misc]
        self._eos_ids = tuple(dict.fromkeys([*eos_ids, *([] if eos_id is None else [eos_id])]))
        self.given: dict[str, Any] = {k: v for k, v in (("pad_id", pad_id), ("bos_id", bos_id), ("eos_id", eos_id))
                                      if v is not None}
        if len(self._eos_ids) > 1:
            self.given["eos_ids"] = list(self._eos_ids)
        self.config = dict(config or {})  # tokenizer_config.json as the model's folder wrote it (chat template in it)
        self.hf = hf
        self.specials = [t.content for _, t in sorted(hf.get_added_tokens_decoder().items()) if t.special]
        self.unk_id = hf.token_to_id("[UNK]") if hf.token_to_id("[UNK]") is not None else UNK_ID  # type: ignore[misc]

    @classmethod
    def from_file(cls, path: str | Path, **ids: Any) -> PretrainedTokenizer:
        """A ``tokenizer.json`` as ``transformers`` writes it; ``ids``: ``pad_id``, ``bos_id``, ``eos_id``, ``eos_ids``
        (a folder's whole tokenizer: ``interop.folder_tokenizer``)."""
        return cls(HFTokenizer.from_file(str(path)), **ids)

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Every id that ends a generation (Llama 3.1's three), in its folder's order, ``eos_id`` among them; none
        where its folder named none (BERT's)."""
        return self._eos_ids

    @property
    def chat_template(self) -> str | None:
        """The folder's chat template (Jinja), the default one where it names several; None where it has none."""
        template = self.config.get("chat_template")
        if isinstance(template, list):  # several named templates
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        return template if isinstance(template, str) and template else None

    def added_around(self) -> tuple[list[int], list[int]]:
        """The ids the tokenizer itself puts before and after a text's own (Llama 3's ``<|begin_of_text|>``; BERT's
        ``[CLS]`` and ``[SEP]``): its post-processor's, as ``encode`` applies it."""
        bare = self.hf.encode("a", add_special_tokens=False).ids
        full = self.hf.encode("a").ids
        for start in range(len(full) - len(bare) + 1):
            if full[start:start + len(bare)] == bare:
                return full[:start], full[start + len(bare):]
        return full, []

    @property
    def adds_bos(self) -> bool:
        return self.added_around()[0] == [self.bos_id]

    def encode_bare(self, text: str) -> list[int]:
        try:
            return self.hf.encode(text, add_special_tokens=False).ids
        except TypeError:
            raise DataError(f"the text holds {not_text(text)}, which is not text") from None

    @property
    def own_bos_id(self) -> int | None:
        return self.given.get("bos_id")

    @property
    def unknown_id(self) -> int | None:
        return unknown_token_id(self.hf)

    def hf_json(self) -> str:
        return self.hf.to_str()

    def special_text(self, role: str) -> str | None:
        """The text of its ``role`` token (bos, eos, pad, unk): as its folder names it, else its id's, else None."""
        named = self.config.get(f"{role}_token")
        if isinstance(named, dict):  # an AddedToken as transformers serialises it
            named = named.get("content")
        if isinstance(named, str):
            return named
        if f"{role}_token" in self.config or (role == "pad" and not self.has_pad):
            return None  # named as none (Qwen3's bos), or no pad of its own
        i = self.given.get(f"{role}_id")
        return self.hf.id_to_token(i) if isinstance(i, int) and 0 <= i < self.vocab_size else None

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    @property
    def special_ids(self) -> frozenset[int]:  # the model's own: [PAD], [UNK], [CLS], [SEP], [MASK] for BERT
        return frozenset(i for i, t in self.hf.get_added_tokens_decoder().items() if t.special)

    @property
    def mask_id(self) -> int | None:
        return self.hf.token_to_id("[MASK]")

    def _encode(self, text: str) -> list[int]:
        try:
            return self.hf.encode(text).ids
        except TypeError:  # a lone surrogate ("\ud800"), which no text holds
            raise DataError(f"the text holds {not_text(text)}, which is not text") from None

    @property
    def parsed_specials(self) -> tuple[str, ...]:
        return tuple(self.specials)

    def encode_pieces(self, pieces: Sequence[tuple[str, bool]], around: bool = True) -> list[int]:
        """The template's pieces split at their special tokens' texts, each a token; the text between two of them
        (the template's and the messages' together, as ``encode`` reads it) encoded with no special token read in it;
        then, with ``around``, what ``encode`` adds around (``added_around``)."""
        marker = self._marker
        ids: list[int] = []
        texts: list[str] = []  # since the last special token

        def flush() -> None:
            if texts and (text := "".join(texts)):
                try:
                    ids.extend(self._plain.encode(text, add_special_tokens=False).ids)
                except TypeError:
                    raise DataError(f"the text holds {not_text(text)}, which is not text") from None
            texts.clear()

        for text, own in pieces:
            parts = marker.split(text) if own and self.specials else [text]
            for i, part in enumerate(parts):
                if i % 2:  # a special token's text, written by the template
                    flush()
                    ids.append(self.hf.token_to_id(part))
                else:
                    texts.append(part)
        flush()
        before, after = self.added_around() if around else ([], [])
        if before and ids[:len(before)] == before:  # written by the template itself (Llama 3's ``{{ bos_token }}``)
            before = []  # once, as ``transformers``' ``apply_chat_template`` gives it
        return before + ids + after

    @functools.cached_property
    def _marker(self) -> re.Pattern[str]:
        """A pattern that splits a text at its special tokens' texts (longest first), made once."""
        return re.compile("(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")")

    @property
    def _plain(self) -> HFTokenizer:
        """A copy of the tokenizer that reads no special token in a text (``encode_special_tokens``)."""
        if getattr(self, "_plain_hf", None) is None:
            plain = HFTokenizer.from_str(self.hf.to_str())
            plain.encode_special_tokens = True
            self._plain_hf = plain
        return self._plain_hf

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        if add_bos or add_eos:
            raise ValueError("a pretrained tokenizer adds its own special tokens; add_bos/add_eos are not supported")
        return self._encode(text)

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        if add_bos or add_eos:
            raise ValueError("a pretrained tokenizer adds its own special tokens; add_bos/add_eos are not supported")
        try:
            return [e.ids for e in self.hf.encode_batch(list(texts))]
        except TypeError:
            raise DataError(f"the text holds {not_text(''.join(texts))}, which is not text") from None

    def decode(self, ids: Sequence[int], *, skip_special: bool = True) -> str:
        return self.hf.decode([self._check_id(i) for i in ids], skip_special_tokens=skip_special)

    def id_to_token(self, i: int) -> str:
        return self.hf.id_to_token(self._check_id(i))

    def token_bytes(self) -> list[bytes | None]:
        """Each id's bytes: a byte-level BPE's (GPT-2, Llama 3, Qwen3) read from its byte symbols; an added token that
        is not special (Qwen3's ``<tool_call>``) its text; another tokenizer's each id decoded alone."""
        if type(self.hf.decoder).__name__ != "ByteLevel":
            return super().token_bytes()
        added = {i: t for i, t in self.hf.get_added_tokens_decoder().items()}
        out: list[bytes | None] = []
        for i in range(self.vocab_size):
            token = added.get(i)
            if token is not None:
                out.append(None if token.special else token.content.encode("utf-8"))
            else:
                out.append(byte_level_bytes(self.hf.id_to_token(i) or ""))
        return out

    def token_label(self, i: int) -> str:
        """The token's text; a byte-level BPE's (GPT-2, Llama 3, Qwen3) decoded from its byte alphabet ("Ġhe" ->
        " he"), unless it is part of a character's bytes."""
        if type(self.hf.decoder).__name__ == "ByteLevel":
            text = self.hf.decode([self._check_id(i)], skip_special_tokens=False)
            if text and "\ufffd" not in text:
                return text
        return self.id_to_token(i)

    def _to_json(self) -> dict[str, Any]:
        return {"hf": json.loads(self.hf.to_str()), **({"ids": self.given} if self.given else {}),
                **({"config": self.config} if self.config else {})}


def not_text(text: str) -> str:
    """What in ``text`` is not text, for a message: its first lone surrogate."""
    bad = next((c for c in text if 0xD800 <= ord(c) <= 0xDFFF), "")
    return f"a lone surrogate ({bad!a})" if bad else "something"
