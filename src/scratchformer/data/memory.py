"""Rows held in memory, read as a prepared corpus's rows are (``corpus.views.RowSet``): the built-in tasks'
held-out strings and a folder's images are small, so they are kept as lists rather than prepared on disk.

A row has named fields: token ids (``source``, ``target``), or anything else a task reads (``image``: a file or
its pixels); ``FIELD.text`` holds what a person reads for it (the string, the image's name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from scratchformer.data.batching import BatchSettings, EpochBatches

__all__ = ["MemoryRows"]


class MemoryRows:
    """Rows held as one list per field, all of the same length."""

    def __init__(self, fields: dict[str, list[Any]]) -> None:
        self.fields = fields

    def __len__(self) -> int:
        return len(next(iter(self.fields.values())))

    def head(self, n: int) -> MemoryRows:
        """The first ``n`` rows (``train_limit``, ``eval_limit``)."""
        return MemoryRows({name: values[:n] for name, values in self.fields.items()})

    def extent(self, unit: str) -> str:
        """Its size in words (``unit``: what a row is, examples or images)."""
        return f"{len(self):,} {unit}"

    def lengths(self, field: str) -> np.ndarray:
        """The length in tokens of each row's ``field``, in order."""
        return np.array([len(ids) for ids in self.fields[field]], dtype=np.int64)

    def values(self, field: str, positions: Sequence[int] | np.ndarray) -> list[Any]:
        """The ``field`` of the rows at ``positions``."""
        return [self.fields[field][int(i)] for i in positions]

    def ids(self, field: str, positions: Sequence[int] | np.ndarray) -> list[list[int]]:
        """The token ids of the rows at ``positions``."""
        return self.values(field, positions)

    def texts(self, field: str, positions: Sequence[int] | np.ndarray) -> list[str]:
        """What a person reads for the rows at ``positions``."""
        return self.values(f"{field}.text", positions)

    def batches(self, lengths: np.ndarray, cfg: BatchSettings) -> Callable[[int], np.ndarray]:
        """Training: step -> the positions of its rows (``EpochBatches`` over the rows' ``lengths``)."""
        return EpochBatches(lengths, cfg)
