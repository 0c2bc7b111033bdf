"""Built-in sequence-to-sequence tasks: copy, reverse and sort random strings.

These are the classic sanity checks for an encoder-decoder (and, with source and target concatenated,
for a decoder-only model): nothing to download, exact-match accuracy is the metric, and a correct
Transformer must reach 100 %. A model with a broken mask or broken cross-attention cannot.

A source is a random string over the first ``n_symbols`` characters of ``ALPHABET``, its length uniform
in ``[min_len, max_len]``. The target is the source itself (``copy``), reversed (``reverse``) or sorted
by position in ``ALPHABET`` (``sort``; with more than 26 symbols that puts letters before digits, unlike
code-point order).

To measure generalisation rather than memorisation, a test set and a validation set of distinct sources
are drawn first from ``seed``; ``train_pairs`` rejects and redraws any source that is in either, so no
held-out source is ever seen in training. Everything uses its own ``random.Random``, never global state,
so the same arguments always give the same pairs.
"""

from __future__ import annotations

import random

from scratchformer.errors import DataError

__all__ = ["ALPHABET", "TASKS", "SyntheticTask"]

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
TASKS = ("copy", "reverse", "sort")


class SyntheticTask:
    """A seeded copy / reverse / sort task with fixed, disjoint test and validation sets."""

    def __init__(self, name: str, n_symbols: int = 10, min_len: int = 4, max_len: int = 16, seed: int = 0,
                 n_test: int = 1000) -> None:
        if name not in TASKS:
            raise DataError(f"unknown synthetic task {name!r}; choose one of {', '.join(TASKS)}")
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
        self.alphabet = ALPHABET[:n_symbols]
        rng = random.Random(seed)
        # Test first, then validation, from one stream: each set depends only on the seed.
        self._test = self._distinct_sources(rng, n_test, exclude=set())
        self._val = self._distinct_sources(rng, n_test, exclude=set(self._test))
        self._held_out = set(self._test) | set(self._val)

    def target(self, source: str) -> str:
        """The correct output for ``source``."""
        if self.name == "copy":
            return source
        if self.name == "reverse":
            return source[::-1]
        return "".join(sorted(source, key=ALPHABET.index))

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
