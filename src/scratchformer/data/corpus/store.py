"""A prepared corpus on disk, read back: flat token-id files, an offsets index, a manifest that vouches for both.

One directory per prepared source (see ``__init__`` for the layout). Each *field* (``text``; or ``source``
and ``target`` for translation) is two files, as in nanoGPT's ``train.bin`` and fairseq's ``.bin``/``.idx``
pairs: ``FIELD.bin``, every row's token ids one after the other (``uint16`` when the vocabulary fits, else
``uint32``, little-endian), and ``FIELD.idx``, ``int64`` offsets, where row ``i`` is
``bin[idx[i]:idx[i + 1]]`` (for language modelling the rows are documents). The raw UTF-8 text of each row
(kept for BLEU references and samples) is a field of bytes, ``FIELD.text.bin`` / ``FIELD.text.idx``.

Nothing is loaded whole: ``FlatArray`` maps the file for the length of one read and unmaps it afterwards, as
nanoGPT's ``get_batch`` re-creates its ``np.memmap`` for every batch, so the pages a long run touches are
never counted against the process. Every process of a distributed run maps the same files; the operating
system's page cache holds them once.

``PreparedCorpus.open`` checks the manifest, every file's size and (unless told not to) its CRC-32: a
truncated or corrupt corpus raises ``CorruptCorpus`` instead of training on garbage.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FORMAT_VERSION", "MANIFEST", "CorruptCorpus", "Field", "FlatArray", "PreparedCorpus", "id_dtype"]

FORMAT_VERSION = 1
MANIFEST = "manifest.json"  # written last: a directory without it was never finished
OFFSET_DTYPE = np.dtype("<i8")


class CorruptCorpus(Exception):
    """A prepared corpus that cannot be trusted (truncated, corrupt, or of another format version)."""


def id_dtype(vocab_size: int) -> np.dtype:
    """``uint16`` when every id fits (vocabulary up to 65,536), else ``uint32``; never a type that would wrap."""
    if vocab_size <= 1 << 16:
        return np.dtype("<u2")
    if vocab_size <= 1 << 32:
        return np.dtype("<u4")
    raise ValueError(f"a vocabulary of {vocab_size:,} ids does not fit 32-bit token ids")


class FlatArray:
    """A read-only flat array in a file, mapped only for the length of each read."""

    def __init__(self, path: Path, dtype: np.dtype, length: int) -> None:
        self.path, self.dtype, self.length = path, np.dtype(dtype), int(length)

    def __len__(self) -> int:
        return self.length

    def _mapped(self) -> np.ndarray:
        if self.length == 0:
            return np.zeros(0, self.dtype)
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.length,))

    def read(self, start: int, stop: int) -> np.ndarray:
        """A copy of ``[start, stop)``."""
        return np.array(self._mapped()[start:stop])

    def take(self, index: np.ndarray) -> np.ndarray:
        """A copy of the elements at ``index`` (any shape)."""
        return np.array(self._mapped()[index])

    def spans(self, starts: Sequence[int], stops: Sequence[int]) -> list[np.ndarray]:
        """Copies of ``[start, stop)`` for each pair, from one mapping."""
        mapped = self._mapped()
        return [np.array(mapped[a:b]) for a, b in zip(starts, stops)]


class Field:
    """One field of a corpus: rows of token ids (or bytes), through the offsets index."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype, rows: int, items: int) -> None:
        self.name, self.n_rows, self.n_items = name, int(rows), int(items)
        self.data = FlatArray(directory / f"{name}.bin", dtype, items)
        self.offsets = FlatArray(directory / f"{name}.idx", OFFSET_DTYPE, rows + 1)
        self._lengths: np.ndarray | None = None

    def lengths(self) -> np.ndarray:
        """Every row's length, ``int32`` (computed once, block by block; 4 bytes a row)."""
        if self._lengths is None:
            out = np.empty(self.n_rows, np.int32)
            for start in range(0, self.n_rows, 1 << 22):
                stop = min(self.n_rows, start + (1 << 22))
                out[start:stop] = np.diff(self.offsets.read(start, stop + 1))
            self._lengths = out
        return self._lengths

    def rows(self, index: Sequence[int] | np.ndarray) -> list[np.ndarray]:
        """The rows at ``index`` (row numbers), in that order."""
        index = np.asarray(index, dtype=np.int64)
        starts, stops = self.offsets.take(index), self.offsets.take(index + 1)
        return self.data.spans(starts.tolist(), stops.tolist())

    def texts(self, index: Sequence[int] | np.ndarray) -> list[str]:
        """Rows of a raw-text field (``uint8``) as strings."""
        return [row.tobytes().decode("utf-8") for row in self.rows(index)]


class PreparedCorpus:
    """A finished corpus directory: its manifest and its fields."""

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.path, self.manifest = directory, manifest
        self.kind: str = manifest["kind"]  # text | pairs | labelled | lines
        self.vocab_size: int = manifest["vocab_size"]
        self.id_type: str = np.dtype(manifest["id_dtype"]).name  # uint16 | uint32
        self.notes: list[str] = list(manifest.get("notes", []))  # what reading the files found (skipped rows, ...)
        self.fields: dict[str, Field] = {}
        for name, spec in manifest["fields"].items():
            self.fields[name] = Field(directory, name, np.dtype(spec["dtype"]), spec["rows"], spec["items"])

    @classmethod
    def open(cls, directory: str | Path, *, verify: bool = True) -> PreparedCorpus:
        """The corpus in ``directory``; ``CorruptCorpus`` (saying what is wrong) unless it reads back whole.
        ``verify=False`` checks sizes only (another process has just checked the checksums)."""
        directory = Path(directory)
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CorruptCorpus(f"{directory} has no {MANIFEST} (its preparation never finished)") from None
        except (OSError, ValueError) as err:
            raise CorruptCorpus(f"{directory / MANIFEST} is unreadable ({type(err).__name__})") from None
        if manifest.get("format") != FORMAT_VERSION:
            raise CorruptCorpus(f"{directory} has format {manifest.get('format')}, this version reads {FORMAT_VERSION}")
        for name, expected in manifest["files"].items():
            _check_file(directory / name, expected, verify)
        return cls(directory, manifest)

    def labels(self) -> np.ndarray:
        """Classification: each row's label code (an index into ``manifest["labels"]["names"]``)."""
        rows = self.manifest["labels"]["rows"]
        return FlatArray(self.path / "labels.bin", np.dtype("<u4"), rows).read(0, rows)

    def n_bytes(self) -> int:
        """Bytes on disk, all files."""
        return sum(f["bytes"] for f in self.manifest["files"].values())


def _check_file(path: Path, expected: dict[str, int], verify: bool) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        raise CorruptCorpus(f"{path.name} is missing") from None
    if size != expected["bytes"]:
        raise CorruptCorpus(f"{path.name} has {size:,} bytes, expected {expected['bytes']:,}")
    if verify and crc32_of(path) != expected["crc32"]:
        raise CorruptCorpus(f"{path.name} does not match its checksum")


def crc32_of(path: Path, block: int = 1 << 24) -> int:
    crc = 0
    buffer = bytearray(block)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            crc = zlib.crc32(view[:n], crc)
    return crc
