"""Built-in sequence-to-sequence tasks: copy, reverse and sort random strings.

These are the classic sanity checks for an encoder-decoder (and, with source and target concatenated,
for a decoder-only model): nothing to download, exact-match accuracy is the metric, and a correct
Transformer must reach 100 %. A model with a broken mask or broken cross-attention cannot.

A source is a random string over the first ``n_symbols`` characters of ``ALPHABET``, its length uniform
in ``[min_len, max_len]``. Its target follows the task's rule, which the task registry declares (``copy``: the
source itself, ``reverse``: reversed, ``sort``: sorted by position in ``ALPHABET``, which with more than 26
symbols puts letters before digits, unlike code-point order).

To measure generalisation rather than memorisation, a test set and a validation set of distinct sources
are drawn first from ``seed``; ``train_pairs`` rejects and redraws any source that is in either, so no
held-out source is ever seen in training. Everything uses its own ``random.Random``, never global state,
so the same arguments always give the same pairs.

A task reads them as it reads any data (``synthetic_data`` -> ``TaskData``): the held-out sets as rows in
memory, the training strings as ``FreshRows``, rows drawn fresh for every step.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from scratchformer.data.batching import BatchSettings
from scratchformer.data.memory import MemoryRows
from scratchformer.data.prepared import tokenizer_trainer
from scratchformer.data.roles import roles
from scratchformer.data.task_data import DataRequest, TaskData
from scratchformer.errors import DataError
from scratchformer.registry import ALPHABET, synthetic_targets
from scratchformer.tokenizers import Tokenizer

__all__ = ["TASKS", "FreshRows", "SyntheticTask", "synthetic_data"]

TASKS = tuple(synthetic_targets())  # the built-in tasks, as the registry declares them


class SyntheticTask:
    """A seeded built-in task (its target rule from the registry) with fixed, disjoint test and validation sets."""

    def __init__(self, name: str, n_symbols: int = 10, min_len: int = 4, max_len: int = 16, seed: int = 0,
                 n_test: int = 1000) -> None:
        targets = synthetic_targets()
        if name not in targets:
            raise DataError(f"unknown synthetic task {name!r}; choose one of {', '.join(targets)}")
        if not 1 <= n_symbols <= len(ALPHABET):
            raise DataError(f"n_symbols={n_symbols} must be between 1 and {len(ALPHABET)}")
        if not 1 <= min_len <= max_len:
            raise DataError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
        if n_test < 1:
            raise DataError(f"n_test={n_test} must be at least 1")
        n_sources = sum(n_symbols**length for length in range(min_len, max_len + 1))
        # Held-out sets may use at most half of all possible sources, so training keeps the other half
        # and rejection sampling needs about two draws per pair at worst.
        if 4 * n_test > n_sources:
            raise DataError(f"task {name!r} has only {n_sources} distinct sources (n_symbols={n_symbols}, "
                            f"lengths {min_len}..{max_len}): too few for two held-out sets of n_test={n_test}")
        self.name, self.n_symbols, self.min_len, self.max_len = name, n_symbols, min_len, max_len
        self.seed, self.n_test = seed, n_test
        self.target: Callable[[str], str] = targets[name]  # the correct output for a source
        self.alphabet = ALPHABET[:n_symbols]
        rng = random.Random(seed)
        # Test first, then validation, from one stream: each set depends only on the seed.
        self._test = self._distinct_sources(rng, n_test, exclude=set())
        self._val = self._distinct_sources(rng, n_test, exclude=set(self._test))
        self._held_out = set(self._test) | set(self._val)

    def test_pairs(self) -> list[tuple[str, str]]:
        """The fixed held-out test set: ``n_test`` (source, target) pairs with distinct sources."""
        return [(s, self.target(s)) for s in self._test]

    def val_pairs(self) -> list[tuple[str, str]]:
        """A second held-out set of ``n_test`` pairs, disjoint from the test set and from all training pairs."""
        return [(s, self.target(s)) for s in self._val]

    def train_pairs(self, n: int, seed: int) -> list[tuple[str, str]]:
        """``n`` training pairs drawn with replacement from ``seed``; never a test or validation source."""
        # A string seed is hashed with SHA-512 by ``random``: stable across runs and processes.
        rng = random.Random(f"{self.name}:{self.seed}:{seed}")
        pairs = []
        while len(pairs) < n:
            source = self._draw(rng)
            if source not in self._held_out:
                pairs.append((source, self.target(source)))
        return pairs

    def _draw(self, rng: random.Random) -> str:
        length = rng.randint(self.min_len, self.max_len)
        return "".join(rng.choices(self.alphabet, k=length))

    def _distinct_sources(self, rng: random.Random, n: int, exclude: set[str]) -> list[str]:
        seen, out = set(exclude), []
        while len(out) < n:
            source = self._draw(rng)
            if source not in seen:
                seen.add(source)
                out.append(source)
        return out

    def __repr__(self) -> str:
        return (f"SyntheticTask({self.name!r}, n_symbols={self.n_symbols}, min_len={self.min_len}, "
                f"max_len={self.max_len}, seed={self.seed}, n_test={self.n_test})")


class FreshRows:
    """The training rows of a built-in task: endless, drawn fresh for every step, never a held-out string.

    Step ``s`` reads rows ``s * B`` to ``s * B + B - 1`` (``B``: the batch size), the ``B`` pairs drawn for it
    from ``(seed, s)``, so a resumed run reads the same strings. Read as any rows are (``source`` and ``target``
    ids, their texts); it holds none, so it has no length, its ``lengths`` are empty and ``head`` is itself."""

    def __init__(self, task: SyntheticTask, tokenizer: Tokenizer, batch_size: int, seed: int) -> None:
        self.task, self.tokenizer, self.batch_size, self.seed = task, tokenizer, batch_size, seed
        self._drawn: tuple[int, list[tuple[str, str]]] = (-1, [])  # the last step's pairs

    def _pairs(self, positions: np.ndarray | list[int]) -> list[tuple[str, str]]:
        out = []
        for p in map(int, positions):
            step, i = divmod(p, self.batch_size)
            if self._drawn[0] != step:
                self._drawn = (step, self.task.train_pairs(self.batch_size, seed=self.seed * 1_000_003 + step))
            out.append(self._drawn[1][i])
        return out

    def head(self, n: int) -> FreshRows:
        return self

    def lengths(self, field: str) -> np.ndarray:
        return np.zeros(0, dtype=np.int64)

    def texts(self, field: str, positions: np.ndarray | list[int]) -> list[str]:
        column = ("source", "target").index(field)
        return [pair[column] for pair in self._pairs(positions)]

    def ids(self, field: str, positions: np.ndarray | list[int]) -> list[list[int]]:
        return self.tokenizer.encode_batch(self.texts(field, positions), add_eos=field == "source")

    def batches(self, lengths: np.ndarray, cfg: BatchSettings) -> Callable[[int], np.ndarray]:
        """Training: step -> its rows (all ``B`` of them, whatever ``max_tokens`` says)."""
        return lambda step: np.arange(step * self.batch_size, (step + 1) * self.batch_size)

    def extent(self, unit: str) -> str:
        return "unlimited"


def synthetic_data(req: DataRequest) -> TaskData:
    """A built-in task's data: fresh training rows, the held-out sets in memory, and the tokenizer (a checkpoint's,
    or one trained on the task's symbols)."""
    cfg = req.cfg
    roles(req.task, req.files)  # refuses files: the task makes its own data
    task = SyntheticTask(req.task.name, n_symbols=cfg.n_symbols, min_len=cfg.min_seq_len, max_len=cfg.max_seq_len,
                         seed=cfg.seed, n_test=cfg.n_test)
    tokenizer = req.tokenizer or tokenizer_trainer(cfg, req.task.mask_token)(["".join(sorted(task.alphabet))])
    views = {"train": FreshRows(task, tokenizer, cfg.batch_size, cfg.seed),
             "val": _rows(task.val_pairs(), tokenizer), "test": _rows(task.test_pairs(), tokenizer)}
    n = cfg.n_test
    origin = {"train": "fresh random strings at every step (never a held-out one)",
              "val": f"{n:,} held-out strings", "test": f"{n:,} other held-out strings"}
    return TaskData(tokenizer, views, origin)


def _rows(pairs: list[tuple[str, str]], tokenizer: Tokenizer) -> MemoryRows:
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    return MemoryRows({"source": tokenizer.encode_batch(sources, add_eos=True),
                       "target": tokenizer.encode_batch(targets), "source.text": sources, "target.text": targets})
