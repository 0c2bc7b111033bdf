"""Evaluation metrics: BLEU and chrF (sacreBLEU), accuracy and macro-F1, perplexity, exact match; and the answer a
text gives to a problem, as lm-evaluation-harness's GSM8K task finds and compares it (``extract_answer``,
``same_answer``: GSM8K's benchmark and the rewards of ``task=grpo`` score answers alike)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence


def perplexity(mean_loss: float) -> float:
    return math.exp(mean_loss) if mean_loss < 50 else float("inf")


def exact_match(predictions: Sequence[Sequence[int] | str], references: Sequence[Sequence[int] | str]) -> float:
    if not references:
        return 0.0
    return sum(list(p) == list(r) for p, r in zip(predictions, references)) / len(references)


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return sum(int(p == y) for p, y in zip(predictions, labels)) / max(1, len(labels))


def macro_f1(predictions: Sequence[int], labels: Sequence[int], n_classes: int) -> float:
    scores = []
    for c in range(n_classes):
        tp = sum(1 for p, y in zip(predictions, labels) if p == c and y == c)
        fp = sum(1 for p, y in zip(predictions, labels) if p == c and y != c)
        fn = sum(1 for p, y in zip(predictions, labels) if p != c and y == c)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(scores) / max(1, n_classes)


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    """Corpus BLEU of detokenized text with sacreBLEU's defaults (13a tokenizer): (score, signature)."""
    import sacrebleu

    metric = sacrebleu.metrics.BLEU()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return score.score, str(metric.get_signature())


def chrf(hypotheses: Sequence[str], references: Sequence[str]) -> tuple[float, str]:
    import sacrebleu

    metric = sacrebleu.metrics.CHRF()
    score = metric.corpus_score(list(hypotheses), [list(references)])
    return score.score, str(metric.get_signature())


def closer_by_chrf(hypotheses: Sequence[str], first: Sequence[str], second: Sequence[str]) -> float:
    """The share of ``hypotheses`` whose sentence chrF (sacreBLEU's defaults) against ``first`` is higher than against
    ``second`` (ties count as not closer): which of two references each output resembles more."""
    import sacrebleu

    metric = sacrebleu.metrics.CHRF()
    wins = sum(metric.sentence_score(h, [a]).score > metric.sentence_score(h, [b]).score
               for h, a, b in zip(hypotheses, first, second))
    return wins / max(1, len(hypotheses))


INVALID = "[invalid]"  # what a filter returns when it finds no number
# the harness's gsm8k filters: name -> (pattern, which match: the first or the last)
ANSWER_FILTERS = {"strict-match": (re.compile(r"#### (\-?[0-9\.\,]+)"), 0),
                  "flexible-extract": (re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)"), -1)}
IGNORED = (",", "\\$", "(?s).*#### ", "\\.$")  # the task's regexes_to_ignore, in order


def extract_answer(text: str, name: str = "flexible-extract") -> str:
    """The answer the filter ``name`` finds in a text (the harness's ``regex`` then ``take_first``): strict-match the
    number after "#### ", flexible-extract the last number anywhere; ``INVALID`` when there is none."""
    pattern, which = ANSWER_FILTERS[name]
    found = pattern.findall(text)
    if not found:
        return INVALID
    match = found[which]
    if isinstance(match, tuple):  # several groups: the first that matched
        match = next((m for m in match if m), INVALID)
    return match.strip()


def _normalise(text: str) -> str:
    for pattern in IGNORED:
        text = re.sub(pattern, "", text)
    return text.lower()


def same_answer(prediction: str, reference: str) -> float:
    """1.0 if an extracted answer equals the reference's (its number after "#### ") once both are normalised: commas,
    "$", the working before "#### " and a final "." removed, case ignored."""
    return float(_normalise(prediction) == _normalise(reference))
