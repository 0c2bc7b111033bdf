"""A split of a prepared corpus, as a task reads it: a range of its token stream, or a set of its rows.

``TokenStream`` is language modelling's view: tokens ``[start, stop)`` of the stream, from which a batch is
``B`` windows of ``block + 1`` consecutive tokens at random offsets (nanoGPT's ``get_batch``): the input is
a window's first ``block`` tokens, the target the same window shifted by one. Only the windows are read.

``RowSet`` is the view of every other task: some rows of the corpus (a split chosen by ``data.splits`` from
the index alone), read a batch at a time. Lengths come from the offsets index, so length-bucketed batching
never touches the token files. Rows held in memory (``data.memory.MemoryRows``) and the built-in tasks' fresh
rows (``data.synthetic.FreshRows``) are read the same way.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from scratchformer.data.batching import BatchSettings, EpochBatches
from scratchformer.data.corpus.store import PreparedCorpus
from scratchformer.errors import DataError

__all__ = ["RowSet", "TokenStream"]


class TokenStream:
    """Tokens ``[start, stop)`` of a corpus's ``text`` field. ``name`` is used in error messages only."""

    def __init__(self, corpus: PreparedCorpus, start: int = 0, stop: int | None = None, name: str = "text") -> None:
        self.corpus, self.field = corpus, corpus.fields["text"]
        self.start, self.stop = start, self.field.n_items if stop is None else stop
        self.name = name

    def __len__(self) -> int:
        return self.stop - self.start

    def head(self, n: int) -> TokenStream:
        """The first ``n`` tokens (``train_limit``)."""
        return TokenStream(self.corpus, self.start, min(self.stop, self.start + n), self.name)

    def read(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Tokens ``[start, stop)`` of this view as a ``LongTensor``."""
        stop = len(self) if stop is None else min(stop, len(self))
        return torch.from_numpy(self.field.data.read(self.start + start, self.start + stop).astype(np.int64))

    def get_batch(self, batch_size: int, block_size: int,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows: ``x = ids[i:i+block]``, ``y = ids[i+1:i+block+1]``, both ``(B, block)`` long tensors.

        Offsets come from ``generator`` only, so a run is reproducible and resumable from its state."""
        n = len(self)
        if n < block_size + 1:
            raise DataError(f"{self.name} has {n} tokens, fewer than block_size + 1 = {block_size + 1}; "
                            f"use more text or a smaller block_size")
        starts = torch.randint(n - block_size, (batch_size,), generator=generator)  # (B,)
        window = starts[:, None] + torch.arange(block_size + 1)  # (B, block+1) positions
        chunk = torch.from_numpy(self.field.data.take(self.start + window.numpy()).astype(np.int64))  # (B, block+1)
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def extent(self, unit: str) -> str:
        """Its size in words (``unit``: what is counted, tokens)."""
        return f"{self.stop - self.start:,} {unit}"

    def __repr__(self) -> str:
        return f"TokenStream({self.name!r}, {len(self):,} tokens)"


class RowSet:
    """Rows ``rows`` (row numbers, in file order) of a corpus."""

    def __init__(self, corpus: PreparedCorpus, rows: np.ndarray | None = None, name: str = "rows") -> None:
        self.corpus, self.name = corpus, name
        first = next(iter(corpus.fields.values()))
        self.rows = np.arange(first.n_rows, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)

    def head(self, n: int) -> RowSet:
        """The first ``n`` rows (``train_limit``, ``eval_limit``)."""
        return RowSet(self.corpus, self.rows[:n], self.name)

    def extent(self, unit: str) -> str:
        """Its size in words (``unit``: what a row is, examples)."""
        return f"{len(self):,} {unit}"

    def lengths(self, field: str) -> np.ndarray:
        """The length in tokens of each row of this set, in order."""
        return self.corpus.fields[field].lengths()[self.rows]

    def ids(self, field: str, positions: np.ndarray | list[int]) -> list[list[int]]:
        """The token ids of the rows at ``positions`` of this set."""
        return [row.tolist() for row in self.corpus.fields[field].rows(self.rows[np.asarray(positions, np.int64)])]

    def texts(self, field: str, positions: np.ndarray | list[int]) -> list[str]:
        """The raw text of the rows at ``positions`` of this set, as it was in the file (stripped)."""
        return self.corpus.fields[f"{field}.text"].texts(self.rows[np.asarray(positions, np.int64)])

    def batches(self, lengths: np.ndarray, cfg: BatchSettings) -> Callable[[int], np.ndarray]:
        """Training: step -> the positions of its rows (``EpochBatches`` over the rows' ``lengths``)."""
        return EpochBatches(lengths, cfg)
