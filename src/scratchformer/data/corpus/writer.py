"""Writing a prepared corpus so that no reader ever sees half of one.

Everything is written into a temporary directory beside the final one (``.KEY.tmp-HOST-PID-RANDOM``), each
file's size and CRC-32 counted on the way; ``commit`` flushes the files to disk, writes ``manifest.json``
last (the completion marker: it lists every file with its size and checksum) and renames the directory into
place in one step. A preparation killed at any point leaves only a temporary directory, which no reader
opens and a later preparation deletes. Any error inside ``with CorpusWriter(...)`` deletes the temporary
directory; a full disk becomes one ``DataError`` line (the user's own files are only ever read).

Token ids are checked before they are narrowed to the id type: an id outside the vocabulary is an error,
never a silently wrapped ``uint16`` (llm.c once trained on exactly such ids with a 128k vocabulary).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import uuid
import zlib
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from scratchformer.data.corpus.store import FORMAT_VERSION, MANIFEST, OFFSET_DTYPE, PreparedCorpus, id_dtype
from scratchformer.errors import DataError

__all__ = ["CorpusWriter", "temp_name_prefix"]

TEXT_DTYPE = np.dtype("u1")
LABEL_DTYPE = np.dtype("<u4")


def temp_name_prefix(final: Path) -> str:
    """The start of the name of every temporary directory that may become ``final``."""
    return f".{final.name}.tmp-"


def _write_bytes(f: BinaryIO, data: bytes | memoryview) -> None:
    """The one place bytes reach the disk (a test injects ENOSPC here)."""
    f.write(data)


class _File:
    """One output file: bytes written and their CRC-32, counted as they go."""

    def __init__(self, path: Path, first: np.ndarray | None = None) -> None:
        self.path, self.first = path, first  # first: what the file starts with (an index's offset 0)
        self.f = open(path, "xb", buffering=1 << 20)  # noqa: SIM115 - closed by finish() or the writer
        self.bytes = self.crc = 0

    def write(self, array: np.ndarray) -> None:
        if self.first is not None:
            array, self.first = np.concatenate([self.first, array]), None
        data = memoryview(np.ascontiguousarray(array)).cast("B")
        self.crc = zlib.crc32(data, self.crc)
        _write_bytes(self.f, data)
        self.bytes += len(data)

    def finish(self) -> dict[str, int]:
        if self.first is not None:
            self.write(self.first[:0])
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()
        return {"bytes": self.bytes, "crc32": self.crc}


class _FieldOut:
    """A field being written: the flat data file and its offsets index."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype) -> None:
        self.dtype, self.items, self.rows = dtype, 0, 0
        self.data = _File(directory / f"{name}.bin")
        self.index = _File(directory / f"{name}.idx", first=np.zeros(1, OFFSET_DTYPE))  # then each row's end

    def extend(self, values: np.ndarray) -> None:
        self.data.write(values.astype(self.dtype, copy=False))
        self.items += len(values)

    def end_rows(self, lengths: np.ndarray) -> None:
        if len(lengths):
            self.index.write((self.items - int(lengths.sum()) + np.cumsum(lengths)).astype(OFFSET_DTYPE))
            self.rows += len(lengths)

    def spec(self) -> dict[str, Any]:
        return {"dtype": self.dtype.str, "rows": self.rows, "items": self.items}


class CorpusWriter:
    """``with CorpusWriter(final_dir, vocab_size) as w: w.add_rows(...); ...; corpus = w.commit(manifest)``."""

    def __init__(self, final: Path, vocab_size: int, needed: int | None = None) -> None:
        """``needed``: about how many bytes the corpus will take (said if the disk fills up)."""
        self.final, self.vocab_size, self.dtype = Path(final), int(vocab_size), id_dtype(vocab_size)
        self.needed = needed
        host = socket.gethostname().replace("-", "_")
        self.tmp = self.final.parent / f"{temp_name_prefix(self.final)}{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.fields: dict[str, _FieldOut] = {}
        self.labels: _File | None = None
        self.n_labels = 0

    def __enter__(self) -> CorpusWriter:
        try:
            self.tmp.mkdir(parents=True)
        except OSError as err:
            raise _disk_error(err, self.tmp, self.needed) from None
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: Any) -> None:
        if kind is not None:
            self.discard()
            if isinstance(err, OSError):
                raise _disk_error(err, self.final.parent, self.needed) from None

    def discard(self) -> None:
        for out in self._files():
            out.f.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _field(self, name: str, dtype: np.dtype) -> _FieldOut:
        if name not in self.fields:
            self.fields[name] = _FieldOut(self.tmp, name, dtype)
        return self.fields[name]

    def _ids(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Rows (lists of ids, or NumPy arrays) as one flat array and their lengths, checked."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        if rows and isinstance(rows[0], np.ndarray):
            flat = np.concatenate(rows).astype(np.int64, copy=False)
        else:
            flat = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
        if flat.size and (flat.min() < 0 or flat.max() >= self.vocab_size):
            bad = int(flat.max() if flat.max() >= self.vocab_size else flat.min())
            raise ValueError(f"token id {bad} is outside the vocabulary of {self.vocab_size:,} ids; not written")
        return flat, lengths

    def add_rows(self, field: str, rows: Sequence[Sequence[int]]) -> None:
        """Rows of token ids, each one row of the index."""
        flat, lengths = self._ids(rows)
        out = self._field(field, self.dtype)
        out.extend(flat)
        out.end_rows(lengths)

    def extend(self, field: str, rows: Sequence[Sequence[int]]) -> None:
        """Token ids appended to the current row (a language-modelling document); ``end_row`` closes it. (The
        field's files written here directly: this is the inner loop of preparing a text.)"""
        flat, _ = self._ids(rows)
        out = self.fields.get(field) or self.fields.setdefault(field, _FieldOut(self.tmp, field, self.dtype))
        out.data.write(flat.astype(out.dtype, copy=False))
        out.items += len(flat)

    def end_row(self, field: str) -> None:
        out = self._field(field, self.dtype)
        out.index.write(np.array([out.items], OFFSET_DTYPE))
        out.rows += 1

    def add_texts(self, field: str, texts: Sequence[str]) -> None:
        """The raw UTF-8 text of rows, as field ``FIELD.text``."""
        encoded = [t.encode("utf-8") for t in texts]
        out = self._field(f"{field}.text", TEXT_DTYPE)
        out.extend(np.frombuffer(b"".join(encoded), dtype=TEXT_DTYPE))
        out.end_rows(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))

    def add_labels(self, codes: Sequence[int]) -> None:
        if self.labels is None:
            self.labels = _File(self.tmp / "labels.bin")
        self.labels.write(np.asarray(codes, dtype=LABEL_DTYPE))
        self.n_labels += len(codes)

    def _files(self) -> list[_File]:
        files = [f for out in self.fields.values() for f in (out.data, out.index)]
        return files + ([self.labels] if self.labels is not None else [])

    def commit(self, manifest: dict[str, Any]) -> PreparedCorpus:
        """Flush, write the manifest last, rename into place; returns the corpus. If another process finished
        the same corpus first, its copy is kept and this one deleted."""
        files = {out.path.name: out.finish() for out in self._files()}
        manifest = {**manifest, "format": FORMAT_VERSION, "vocab_size": self.vocab_size, "id_dtype": self.dtype.str,
                    "fields": {name: out.spec() for name, out in self.fields.items()}, "files": files}
        if self.labels is not None:
            manifest["labels"] = {**manifest.get("labels", {}), "rows": self.n_labels}
        with open(self.tmp / MANIFEST, "x", encoding="utf-8") as f:
            f.write(json.dumps(manifest, indent=1))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.rename(self.tmp, self.final)
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            shutil.rmtree(self.tmp, ignore_errors=True)  # a concurrent preparation of the same corpus won
            return PreparedCorpus.open(self.final)
        _fsync_dir(self.final.parent)
        return PreparedCorpus(self.final, manifest)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _disk_error(err: OSError, where: Path, needed: int | None = None) -> DataError:
    from scratchformer.atomic import failed_write
    from scratchformer.data.corpus.cache import ENV_VAR

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        space = str(failed_write(err, "", where, needed)).partition("(")[2].rstrip(")")  # "it needs about ..."
        return DataError(f"no space left on the disk of {where} while writing a prepared corpus ({space}; the "
                         f"partial files were deleted; your data files are untouched); free some space or set "
                         f"{ENV_VAR} to a folder on a larger disk")
    return DataError(f"cannot write a prepared corpus in {where}: {err.strerror or err}")
