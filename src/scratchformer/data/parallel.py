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

from collections.abc import Sequence
from pathlib import Path

from scratchformer.data.errors import DataError
from scratchformer.data.files import read_lines
from scratchformer.data.headers import is_header

__all__ = ["FORMAT", "read_parallel"]

FORMAT = "source<TAB>target lines, or two line-aligned files (source, target)"


def read_parallel(paths: Sequence[str | Path], notes: list[str] | None = None) -> list[tuple[str, str]]:
    """(source, target) pairs from one TSV file or two line-aligned files; whitespace around each side stripped.

    ``notes``: a list that receives a line for what was skipped (a header row, pairs with an empty side)."""
    paths = [Path(p) for p in paths]
    notes = [] if notes is None else notes
    if len(paths) == 1:
        raw = _read_tsv_pairs(paths[0])
        where = str(paths[0])
        if raw and is_header(raw[0], ("text", "text")):
            notes.append(f"{where}: skipped the header row {raw[0][0]!r}, {raw[0][1]!r}")
            raw = raw[1:]
    elif len(paths) == 2:
        sources, targets = read_lines(paths[0]), read_lines(paths[1])
        if len(sources) != len(targets):
            raise DataError(f"{paths[0]} has {len(sources)} lines but {paths[1]} has {len(targets)}; "
                            f"parallel files must be aligned line by line")
        raw = list(zip(sources, targets))
        where = f"{paths[0]} + {paths[1]}"
    else:
        raise DataError(f"expected one TSV file or two line-aligned files, got {len(paths)} paths")
    pairs = [(s.strip(), t.strip()) for s, t in raw]
    kept = [(s, t) for s, t in pairs if s and t]
    if not kept:
        raise DataError(f"{where} contains no sentence pair with both sides non-empty")
    if len(kept) < len(pairs):
        notes.append(f"{where}: skipped {len(pairs) - len(kept)} of {len(pairs)} pairs with an empty side")
    return kept


def _read_tsv_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue  # blank lines (often a trailing one) carry no pair
        n_tabs = line.count("\t")
        if n_tabs != 1:
            raise DataError(f"{path}, line {number}: expected source<TAB>target, found {n_tabs} tabs "
                            f"(the format is {FORMAT})")
        source, target = line.split("\t")
        pairs.append((source, target))
    return pairs
