"""Reading a file as a stream of text: bounded memory whatever the file's size.

The same rules as ``files.read_text`` (strict UTF-8 with the byte offset of the first bad byte, ``.gz``
decompressed transparently, a leading byte order mark dropped, an empty or whitespace-only file refused),
but the text arrives in chunks of about a megabyte, so a corpus of any size can be tokenized in one pass.
``progress`` callbacks receive the bytes of the file on disk consumed so far (compressed bytes for ``.gz``),
which is what a progress bar with MB/s and a time left needs.

A line ends at ``\\n`` only (a ``\\r`` before it is dropped), as ``files.read_lines`` reads: rarer separators
(form feed, U+2028) can occur inside a sentence and must not break the alignment of parallel files.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from scratchformer.errors import DataError

__all__ = ["CHUNK_BYTES", "Progress", "iter_lines", "text_chunks"]

CHUNK_BYTES = 1 << 20
Progress = Callable[[int], None]  # called with the number of bytes of the file consumed since the last call


def text_chunks(path: str | Path, progress: Progress | None = None, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """The text of ``path`` in chunks of about ``chunk_bytes``; raises ``DataError`` as ``read_text`` does."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no such file: {path}")
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None
    stream: BinaryIO = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw  # type: ignore[assignment]
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    fed = done = 0  # bytes of (decompressed) text given to the decoder; bytes of the file reported
    first, seen_text = True, False
    with raw, stream:
        while True:
            try:
                data = stream.read(chunk_bytes)
                pending = len(decoder.getstate()[0])  # bytes of a character cut by the previous chunk
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as err:  # err.start counts from the pending bytes; in a .gz, of its text
                raise DataError(f"{path} is not valid UTF-8 (byte offset {fed - pending + err.start})") from None
            except (gzip.BadGzipFile, EOFError, zlib.error) as err:
                raise DataError(f"{path} is not a valid gzip file ({err})") from None
            except OSError as err:
                raise DataError(f"cannot read {path}: {err.strerror or err}") from None
            fed += len(data)
            if progress is not None:
                progress(raw.tell() - done)
                done = raw.tell()
            if first and text:
                text, first = text.removeprefix("\ufeff"), False
            if text:
                seen_text = seen_text or not text.isspace()
                yield text
            if not data:
                break
    if fed == 0:
        raise DataError(f"{path} is empty")
    if not seen_text:
        raise DataError(f"{path} is empty (only whitespace)")


def iter_lines(path: str | Path, progress: Progress | None = None, *, keepends: bool = False) -> Iterator[str]:
    """The lines of ``path``, split at ``\\n`` only; without their endings (``\\r\\n`` or ``\\n``) unless
    ``keepends`` (then each line keeps its ``\\n``, as ``csv`` needs for quoted fields that span lines)."""
    rest = ""
    for chunk in text_chunks(path, progress):
        lines = (rest + chunk).split("\n")
        rest = lines.pop()
        for line in lines:
            yield line + "\n" if keepends else line.removesuffix("\r")
    if rest:  # the last line has no final newline
        yield rest if keepends else rest.removesuffix("\r")
