"""Padding and length-bucketed batching for variable-length sequences.

Batch-first, with the project's mask convention: ``True`` marks a real token (may be attended to),
``False`` padding. Right padding is the default; left padding (``left=True``) keeps the last real token
of every row at the same position, which batched decoding with a decoder-only model needs.

Random batches of sentences waste much of their compute on padding, because each batch is as long as
its longest member. ``bucket_batches`` groups sequences of similar length, the way fairseq and
torchtext's ``BucketIterator`` do, while keeping the order random: shuffle all indices, cut them into
large chunks (``batch_size * bucket_size_multiplier``), sort each chunk by length, cut the chunks into
batches, and shuffle the order of the batches. A fixed (seed, epoch) always gives the same batches, so a
resumed run sees exactly the data it would have seen.

Inference over many inputs (``classify --input``, ``translate --input``, ``evaluate``) has no order to keep
random: ``sorted_batches`` sorts all of them by length and cuts batches by a token budget, so a batch of
short texts holds many rows and a batch of long ones few, and almost nothing is padding. The caller puts
the results back in input order.

Training on a fixed set of rows walks it epoch after epoch (``EpochBatches``): step -> the rows of its batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

__all__ = ["BatchSettings", "BucketedEpoch", "EpochBatches", "bucket_batches", "pad_batch", "sorted_batches"]


class BatchSettings(Protocol):
    """What a training batch is made of (a ``TrainConfig`` has it): rows, or padded tokens; the run's seed."""

    batch_size: int
    max_tokens: int
    seed: int


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = 0, *,
              left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to the longest sequence: ``(ids, mask)``, ``(B, T)`` long and bool, ``mask`` True = real token."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)  # (B,)
    width = int(lengths.max()) if len(seqs) else 0
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # (B, T)
    positions = torch.arange(width)  # (T,)
    if left:
        mask = positions[None, :] >= (width - lengths)[:, None]  # (B, T)
    else:
        mask = positions[None, :] < lengths[:, None]  # (B, T)
    for row, seq in enumerate(seqs):
        if len(seq):
            start = width - len(seq) if left else 0
            ids[row, start:start + len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return ids, mask


def bucket_batches(lengths: Sequence[int], batch_size: int | None = None, *, max_tokens: int | None = None,
                   seed: int, epoch: int, shuffle: bool = True, bucket_size_multiplier: int = 100) -> list[list[int]]:
    """Indices ``0..len(lengths)-1``, each exactly once, grouped into batches of similar length.

    A batch holds at most ``batch_size`` sequences and, if ``max_tokens`` is given, at most ``max_tokens``
    padded tokens (``len(batch) * longest``); at least one of the two is required. A single sequence
    longer than ``max_tokens`` gets a batch of its own rather than being dropped. With
    ``shuffle=False`` the indices are taken in order and the batches are not reordered (for evaluation;
    batches are still sorted by length within each chunk). Deterministic given ``(seed, epoch)``.
    """
    batches = BucketedEpoch.make(lengths, batch_size, max_tokens=max_tokens, seed=seed, epoch=epoch, shuffle=shuffle,
                                 bucket_size_multiplier=bucket_size_multiplier)
    return [batches[k].tolist() for k in range(len(batches))]


def sorted_batches(lengths: Sequence[int], max_tokens: int, max_rows: int | None = None) -> list[list[int]]:
    """Indices ``0..len(lengths)-1``, each once, sorted by length (ties in input order) and cut into
    consecutive batches of at most ``max_tokens`` padded tokens (``rows * longest``; a sequence longer than
    that gets a batch of its own) and at most ``max_rows`` rows. Deterministic: no randomness at all."""
    if max_tokens < 1 or (max_rows is not None and max_rows < 1):
        raise ValueError(f"max_tokens={max_tokens} and max_rows={max_rows} must be positive")
    lengths_arr = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(lengths_arr, kind="stable")
    starts = _cut(lengths_arr[order], max_rows, max_tokens)
    stops = np.append(starts[1:], len(order))
    return [order[a:b].tolist() for a, b in zip(starts, stops)]


class BucketedEpoch:
    """``bucket_batches``'s batches of one epoch held as arrays (a few bytes a row, not Python lists): batch
    ``k`` is ``order[starts[k]:stops[k]]``. What training on millions of rows keeps in memory."""

    def __init__(self, order: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> None:
        self.order, self.starts, self.stops = order, starts, stops

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, k: int) -> np.ndarray:
        return self.order[self.starts[k]:self.stops[k]]

    @classmethod
    def make(cls, lengths: Sequence[int] | np.ndarray, batch_size: int | None = None, *, max_tokens: int | None = None,
             seed: int, epoch: int, shuffle: bool = True, bucket_size_multiplier: int = 100) -> BucketedEpoch:
        """The batches of ``bucket_batches`` (same arguments, same batches)."""
        if batch_size is None and max_tokens is None:
            raise ValueError("bucket_batches needs batch_size, max_tokens, or both")
        if (batch_size is not None and batch_size < 1) or (max_tokens is not None and max_tokens < 1):
            raise ValueError(f"batch_size={batch_size} and max_tokens={max_tokens} must be positive")
        lengths_arr = np.asarray(lengths, dtype=np.int64)
        n = len(lengths_arr)
        if n == 0:
            return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        # Sequences per batch used to size the chunks: given, or what max_tokens holds at the mean length.
        nominal = batch_size or max(1, max_tokens // max(1, round(float(lengths_arr.mean()))))
        chunk = nominal * bucket_size_multiplier
        rng = np.random.default_rng([seed, epoch])  # mixes (seed, epoch) into one well-spread stream

        order = rng.permutation(n) if shuffle else np.arange(n)
        starts: list[np.ndarray] = []
        for start in range(0, n, chunk):
            part = order[start:start + chunk]
            order[start:start + chunk] = part = part[np.argsort(lengths_arr[part], kind="stable")]
            starts.append(start + _cut(lengths_arr[part], batch_size, max_tokens))
        first = np.concatenate(starts)
        last = np.append(first[1:], n)
        if shuffle:
            perm = rng.permutation(len(first))
            first, last = first[perm], last[perm]
        return cls(order, first, last)


def _cut(lengths: np.ndarray, batch_size: int | None, max_tokens: int | None) -> np.ndarray:
    """Where each batch starts in a run of ascending lengths: a batch takes the next sequences while it holds
    at most ``batch_size`` of them and ``count * longest <= max_tokens`` (the longest is the last, lengths
    ascend), and always at least one."""
    m = len(lengths)
    if max_tokens is None:
        return np.arange(0, m, batch_size, dtype=np.int64)
    starts, i = [], 0
    while i < m:
        starts.append(i)
        # count * lengths[i + count - 1] never decreases as count grows: the first count too big by binary search
        most = min(m - i, batch_size or m, max_tokens // max(int(lengths[i]), 1) + 1)
        padded = np.arange(1, most + 1) * lengths[i:i + most]
        i += max(1, int(np.searchsorted(padded, max_tokens, side="right")))
    return np.asarray(starts, dtype=np.int64)


class EpochBatches:
    """Length-bucketed batches of a fixed training set, epoch after epoch: step -> row positions.

    Epoch ``e`` is shuffled with ``(seed, e)``; the batches of one epoch are counted to find where the next
    begins, so any step maps to its batch without replaying the run. An epoch is held as arrays
    (``BucketedEpoch``: 8 bytes a row), so millions of rows cost megabytes, not Python lists.
    """

    def __init__(self, lengths: np.ndarray | Sequence[int], cfg: BatchSettings) -> None:
        self.lengths, self.cfg = np.asarray(lengths, dtype=np.int64), cfg
        self._epoch: tuple[int, int, BucketedEpoch] | None = None  # (epoch, its first step, batches)

    def _make(self, epoch: int) -> BucketedEpoch:
        if self.cfg.max_tokens:
            return BucketedEpoch.make(self.lengths, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, epoch=epoch)
        return BucketedEpoch.make(self.lengths, self.cfg.batch_size, seed=self.cfg.seed, epoch=epoch)

    def __call__(self, step: int) -> np.ndarray:
        if self._epoch is None or step < self._epoch[1]:
            self._epoch = (0, 0, self._make(0))
        epoch, first, batches = self._epoch
        while step >= first + len(batches):
            epoch, first = epoch + 1, first + len(batches)
            batches = self._make(epoch)
        self._epoch = (epoch, first, batches)
        return batches[step - first]
