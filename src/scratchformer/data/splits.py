"""Validation data carved out of training data: a seeded random (stratified) sample of rows, or the end of a text.

For rows (sentence pairs, labelled texts, lines) the sample is random, so a file sorted by label or by length
still validates on every class and every length; stratified by label for classification, so each class keeps
its share. For language modelling, the last part of the text, one contiguous block (nanoGPT's convention):
no validation sentence is then a neighbour of a training one.
"""

from __future__ import annotations

from collections.abc import Sequence

from scratchformer.data.errors import DataError


def carve_rows(n: int, fraction: float, seed: int, labels: Sequence[int] | None = None) -> tuple[list[int], list[int]]:
    """A seeded random ``(train, val)`` split of ``range(n)``: ``val`` holds ``fraction`` of the rows (at least
    one, and never all), stratified by ``labels`` when given. Both lists are sorted."""
    import numpy as np

    if n < 2:
        raise DataError(f"{n} example(s) cannot be split into training and validation data; give more, or --val FILE")
    rng = np.random.default_rng([seed, 20170612])  # 2017-06-12: the paper's arXiv date, a fixed salt
    groups = [np.arange(n)] if labels is None else [np.flatnonzero(np.asarray(labels) == c)
                                                    for c in sorted(set(labels))]
    val: list[int] = []
    for members in groups:
        k = int(round(fraction * len(members)))
        val.extend(rng.permutation(members)[:k].tolist())
    if not val:
        val = [int(rng.integers(n))]
    if len(val) >= n:
        val = val[: n - 1]
    chosen = set(val)
    return [i for i in range(n) if i not in chosen], sorted(val)


def carve_text(text: str, fraction: float) -> tuple[str, str]:
    """``(train, val)``: the last ``fraction`` of ``text``, by position, is held out."""
    n_train = int(len(text) * (1.0 - fraction))
    return text[:n_train], text[n_train:]
