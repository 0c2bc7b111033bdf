"""Loading a saved tokenizer: ``tokenizer.json`` records its ``kind``, and the class of that kind rebuilds it."""

from __future__ import annotations

import json
from pathlib import Path

from scratchformer.errors import DataError
from scratchformer.tokenizers.base import TOKENIZER_FILE, Tokenizer

__all__ = ["load_tokenizer"]


def load_tokenizer(directory: str | Path) -> Tokenizer:
    """The tokenizer saved in ``directory/tokenizer.json``; ``DataError`` if it is missing or invalid."""
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        raise DataError(f"no such file: {path} (no tokenizer saved in {directory})")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        kind = state["kind"]
        if kind == "char":
            from scratchformer.tokenizers.char import CharTokenizer

            return CharTokenizer(state["chars"], specials=state["specials"])
        if kind not in ("bpe", "pretrained"):
            raise ValueError(f"unknown tokenizer kind {kind!r}")
        from tokenizers import Tokenizer as HFTokenizer

        from scratchformer.tokenizers.bpe import BPETokenizer
        from scratchformer.tokenizers.pretrained import PretrainedTokenizer

        hf = HFTokenizer.from_str(json.dumps(state["hf"]))
        if kind == "bpe":
            return BPETokenizer(hf)
        return PretrainedTokenizer(hf, **state.get("ids", {}), config=state.get("config"))
    except Exception as err:  # JSON, key, type and tokenizers (Rust) errors all mean "corrupt"
        detail = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"{path} is not a valid tokenizer file ({detail})") from None
