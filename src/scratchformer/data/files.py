"""Reading text files strictly, and a file's sha256.

Text is always UTF-8, decoded strictly: a wrong encoding is reported (with the byte offset of the first
bad byte) instead of being silently replaced, because mojibake in a training corpus is invisible until
the model has learned it. Files ending in ``.gz`` are decompressed transparently. A leading UTF-8 byte
order mark (as written by some Windows editors) is dropped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from scratchformer.data.streams import text_chunks
from scratchformer.errors import DataError

__all__ = ["read_lines", "read_text", "sha256_of"]


def sha256_of(path: str | Path, progress: Callable[[int], None] | None = None) -> str:
    """The sha256 of every byte of ``path`` (hex), read in blocks (``progress`` is told each block's size);
    ``DataError`` where it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 22):
                digest.update(block)
                if progress is not None:
                    progress(len(block))
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None
    return digest.hexdigest()


def read_text(path: str | Path) -> str:
    """The whole file as a string: UTF-8 (strict), ``.gz`` decompressed.

    Raises ``DataError`` if the file is missing, empty (or only whitespace), or not valid UTF-8. (The same
    reading as ``streams.text_chunks``, which gives a file of any size in bounded pieces.)
    """
    return "".join(text_chunks(path))


def read_lines(path: str | Path) -> list[str]:
    """The file's lines without their line endings (``\\n`` or ``\\r\\n``); same rules as ``read_text``.

    Only ``\\n`` ends a line: unlike ``str.splitlines`` this never splits on rarer separators (form feed,
    U+2028, ...) that can occur inside a sentence, which would break the alignment of parallel files.
    """
    text = read_text(path)
    lines = text.split("\n")
    if lines[-1] == "":  # the final newline ends the last line; it does not start a new one
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
