"""Reading text files strictly.

Text is always UTF-8, decoded strictly: a wrong encoding is reported (with the byte offset of the first
bad byte) instead of being silently replaced, because mojibake in a training corpus is invisible until
the model has learned it. Files ending in ``.gz`` are decompressed transparently. A leading UTF-8 byte
order mark (as written by some Windows editors) is dropped.
"""

from __future__ import annotations

from pathlib import Path

from scratchformer.data.streams import text_chunks

__all__ = ["read_lines", "read_text"]


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
