"""Parallel sentence pairs (source, target) for sequence-to-sequence training.

Two layouts are common and both are accepted, compressed with gzip or not:

- one TSV file, ``source<TAB>target`` on every line;
- two files aligned line by line (``train.de`` + ``train.en``, as Multi30k and WMT ship them).

Misalignment is the silent killer of translation data (one missing line shifts every pair after it), so
a TSV line without exactly one tab, or two files of different lengths, is an error naming the file and
line. Pairs where either side is empty after stripping whitespace are dropped (and counted in a note),
since neither an empty source nor an empty target teaches anything. A TSV's first row that names its
columns (``de<TAB>en``, ``source<TAB>target``; see ``headers.py``) is a header and is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import zip_longest
from pathlib import Path

from scratchformer.data.headers import is_header
from scratchformer.data.streams import Progress, iter_lines
from scratchformer.errors import DataError

__all__ = ["FORMAT", "iter_pairs", "read_parallel"]

FORMAT = "source<TAB>target lines, or two line-aligned files (source, target)"


def read_parallel(paths: Sequence[str | Path], notes: list[str] | None = None) -> list[tuple[str, str]]:
    """(source, target) pairs from one TSV file or two line-aligned files; whitespace around each side stripped.

    ``notes``: a list that receives a line for what was skipped (a header row, pairs with an empty side)."""
    return list(iter_pairs(paths, notes))


def iter_pairs(paths: Sequence[str | Path], notes: list[str] | None = None,
               progress: Progress | None = None) -> Iterator[tuple[str, str]]:
    """``read_parallel`` as a stream, in bounded memory: the pairs one by one. Problems found at the end (no
    pair at all, files of different lengths) are raised when the stream is exhausted."""
    paths = [Path(p) for p in paths]
    notes = [] if notes is None else notes
    if len(paths) == 1:
        raw, where = _tsv_pairs(paths[0], notes, progress), str(paths[0])
    elif len(paths) == 2:
        raw, where = _aligned_pairs(paths[0], paths[1], progress), f"{paths[0]} + {paths[1]}"
    else:
        raise DataError(f"expected one TSV file or two line-aligned files, got {len(paths)} paths")
    total = kept = 0
    for source, target in raw:
        total += 1
        source, target = source.strip(), target.strip()
        if source and target:
            kept += 1
            yield source, target
    if not kept:
        raise DataError(f"{where} contains no sentence pair with both sides non-empty")
    if kept < total:
        notes.append(f"{where}: skipped {total - kept} of {total} pairs with an empty side")


def _tsv_pairs(path: Path, notes: list[str], progress: Progress | None) -> Iterator[tuple[str, str]]:
    first = True
    for number, line in enumerate(iter_lines(path, progress), start=1):
        if not line.strip():
            continue  # blank lines (often a trailing one) carry no pair
        n_tabs = line.count("\t")
        if n_tabs != 1:
            raise DataError(f"{path}, line {number}: expected source<TAB>target, found {n_tabs} tabs "
                            f"(the format is {FORMAT})")
        source, target = line.split("\t")
        if first and is_header((source, target), ("text", "text")):
            notes.append(f"{path}: skipped the header row {source!r}, {target!r}")
        else:
            yield source, target
        first = False


def _aligned_pairs(first: Path, second: Path, progress: Progress | None) -> Iterator[tuple[str, str]]:
    counts = [0, 0]
    for source, target in zip_longest(iter_lines(first, progress), iter_lines(second, progress)):
        counts[0] += source is not None
        counts[1] += target is not None
        if source is not None and target is not None:
            yield source, target
    if counts[0] != counts[1]:
        raise DataError(f"{first} has {counts[0]} lines but {second} has {counts[1]}; "
                        f"parallel files must be aligned line by line")
