"""A pretrained model's own tokenizer (BERT's WordPiece, say), for fine-tuning it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

from scratchformer.errors import DataError
from scratchformer.tokenizers.base import PAD_ID, UNK_ID, Tokenizer


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
        self.specials = [t.content for _, t in sorted(hf.get_added_tokens_decoder().items()) if t.special]
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

    @property
    def mask_id(self) -> int | None:
        return self.hf.token_to_id("[MASK]")

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
