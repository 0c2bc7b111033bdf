"""A multiple-choice benchmark's metrics, as lm-evaluation-harness 0.4.13 computes and names them.

- ``acc``: the choice of highest log-likelihood is the right one (the first of equals, as ``np.argmax``).
- ``acc_norm``: the same, each log-likelihood divided by its choice's length in characters (``len(choice)``,
  without the space before it): a long ending is not penalised for having more tokens to be wrong about.
- ``..._stderr``: the standard error of the mean, the sample standard deviation over sqrt(n) (``mean_stderr``);
  none for a single question, as the harness's "N/A".
- a group of tasks (MMLU and its four groups): the mean over its questions (each subject weighted by its size),
  and the pooled standard error of its subjects (``pooled_sample_stderr``); MMLU's groups read the subjects,
  not each other, as the harness's ``Group.aggregate`` reads its leaf tasks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["item_scores", "pooled", "summary"]


def item_scores(lls: Sequence[float], choices: Sequence[str], answer: int) -> dict[str, float]:
    """``acc`` and ``acc_norm`` of one question (0.0 or 1.0), from its choices' log-likelihoods."""
    best = max(range(len(lls)), key=lambda i: (lls[i], -i))
    normed = [ll / len(c) for ll, c in zip(lls, choices)]
    best_norm = max(range(len(lls)), key=lambda i: (normed[i], -i))
    return {"acc": float(best == answer), "acc_norm": float(best_norm == answer)}


def _stderr(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mu = sum(values) / n
    return math.sqrt(sum((x - mu) ** 2 for x in values) / (n - 1)) / math.sqrt(n)


def summary(rows: Sequence[dict[str, float]], metrics: Sequence[str]) -> dict[str, Any]:
    """``{metric, metric_stderr, ..., n}`` of per-question scores."""
    out: dict[str, Any] = {}
    for m in metrics:
        values = [r[m] for r in rows]
        out[m] = sum(values) / len(values)
        out[f"{m}_stderr"] = _stderr(values)
    return {**out, "n": len(rows)}


def pooled(parts: Sequence[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """A group's ``summary`` from its subjects' summaries: the size-weighted mean and the pooled standard error
    (``sqrt(sum((n_i - 1) n_i se_i^2) / (sum n_i - k) / sum n_i)``), None when a subject has none."""
    sizes = [p["n"] for p in parts]
    total = sum(sizes)
    out: dict[str, Any] = {}
    for m in metrics:
        out[m] = sum(p[m] * n for p, n in zip(parts, sizes)) / total
        errors = [p[f"{m}_stderr"] for p in parts]
        if any(e is None for e in errors) or total == len(parts):
            out[f"{m}_stderr"] = None
        else:
            variance = sum((n - 1) * e ** 2 * n for n, e in zip(sizes, errors)) / (total - len(parts))
            out[f"{m}_stderr"] = math.sqrt(variance / total)
    return {**out, "n": total}
