"""Reading text files strictly, and writing files atomically.

Text is always UTF-8, decoded strictly: a wrong encoding is reported (with the byte offset of the first
bad byte) instead of being silently replaced, because mojibake in a training corpus is invisible until
the model has learned it. Files ending in ``.gz`` are decompressed transparently. A leading UTF-8 byte
order mark (as written by some Windows editors) is dropped.

Writes go to a temporary file in the destination folder and are moved into place with ``os.replace``,
so a crash never leaves a half-written file under the final name.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from scratchformer.data.streams import text_chunks

__all__ = ["atomic_write_text", "read_lines", "read_text"]


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


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and ``os.replace``; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A unique name opened with "x" (not mkstemp) so the file gets the usual umask permissions, not 0600.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
