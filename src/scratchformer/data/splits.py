"""Validation data carved out of training data: a seeded random (stratified) sample of rows, or the end of a text.

For rows (sentence pairs, labelled texts, lines) the sample is random, so a file sorted by label or by length
still validates on every class and every length; stratified by label for classification, so each class keeps
its share. For language modelling, the last part of the token stream, one contiguous block (nanoGPT's
convention): no validation sentence is then a neighbour of a training one. A folder of documents holds out
its last whole documents instead when they come close to that share (``carve_documents``).

Everything works on row numbers and token positions of a prepared corpus's index, never on the text, so a
file of any size is split without being read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scratchformer.errors import DataError

__all__ = ["carve_documents", "carve_indices", "carve_part", "carve_rows", "carve_tokens"]


def carve_indices(n: int, fraction: float, seed: int,
                  labels: Sequence[int] | np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random ``(train, val)`` split of ``range(n)`` as sorted ``int64`` arrays: ``val`` holds
    ``fraction`` of the rows (at least one, and never all), stratified by ``labels`` when given."""
    if n < 2:
        raise DataError(f"{n} example(s) cannot be split into training and validation data; give more, or --val FILE")
    rng = np.random.default_rng([seed, 20170612])  # 2017-06-12: the paper's arXiv date, a fixed salt
    if labels is None:
        groups = [np.arange(n)]
    else:
        labels = np.asarray(labels)
        groups = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    parts = []
    for members in groups:
        k = int(round(fraction * len(members)))
        parts.append(rng.permutation(members)[:k])
    val = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    if not len(val):
        val = np.array([int(rng.integers(n))])
    if len(val) >= n:
        val = val[: n - 1]
    val = np.sort(val.astype(np.int64))
    keep = np.ones(n, dtype=bool)
    keep[val] = False
    return np.flatnonzero(keep), val


def carve_part(part: str, n: int, fraction: float, seed: int,
               labels: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """The row numbers of one part of ``n`` rows (``data.plan.SplitSpec.part``): ``all`` of them, or the ``rest``
    or the ``held_out`` part of ``carve_indices``."""
    if part == "all":
        return np.arange(n, dtype=np.int64)
    rest, held_out = carve_indices(n, fraction, seed, labels)
    return rest if part == "rest" else held_out


def carve_rows(n: int, fraction: float, seed: int, labels: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """``carve_indices`` as lists (for small data held in memory: the digits' fixed split, the bag-of-words
    baseline)."""
    train, val = carve_indices(n, fraction, seed, labels)
    return train.tolist(), val.tolist()


def carve_tokens(n_tokens: int, fraction: float) -> int:
    """Where the held-out last ``fraction`` of a token stream starts."""
    return int(n_tokens * (1.0 - fraction))


def carve_documents(doc_offsets: np.ndarray, fraction: float) -> int | None:
    """The token position where the last whole documents holding about ``fraction`` of the tokens start: the
    shortest such tail of at least ``fraction``, if it holds at most twice that and leaves a document for
    training; otherwise None (then the caller holds out the last ``fraction`` of the tokens instead)."""
    total = int(doc_offsets[-1])
    for start in doc_offsets[-2:0:-1]:  # document starts, last first, never the first document
        share = (total - int(start)) / max(total, 1)
        if share >= fraction:
            return int(start) if share <= 2 * fraction else None
    return None
