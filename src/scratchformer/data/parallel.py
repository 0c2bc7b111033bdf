"""Parallel sentence pairs (source, target) for sequence-to-sequence training.

Two layouts are common and both are accepted, compressed with gzip or not:

- one TSV file, ``source<TAB>target`` on every line;
- two files aligned line by line (``train.de`` + ``train.en``, as Multi30k and WMT ship them).

Misalignment is the silent killer of translation data (one missing line shifts every pair after it), so
a TSV line without exactly one tab, or two files of different lengths, is an error naming the file and
line. Pairs where either side is empty after stripping whitespace are dropped (and counted in a log
message), since neither an empty source nor an empty target teaches anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from .errors import DataError
from .files import read_lines

__all__ = ["read_parallel"]

log = logging.getLogger(__name__)


def read_parallel(paths: Sequence[str | Path]) -> list[tuple[str, str]]:
    """(source, target) pairs from one TSV file or two line-aligned files; whitespace around each side stripped."""
    paths = [Path(p) for p in paths]
    if len(paths) == 1:
        raw = _read_tsv_pairs(paths[0])
        where = str(paths[0])
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
        log.info("%s: skipped %d of %d pairs with an empty side", where, len(pairs) - len(kept), len(pairs))
    return kept


def _read_tsv_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue  # blank lines (often a trailing one) carry no pair
        n_tabs = line.count("\t")
        if n_tabs != 1:
            raise DataError(f"{path}, line {number}: expected source<TAB>target, found {n_tabs} tabs")
        source, target = line.split("\t")
        pairs.append((source, target))
    return pairs
