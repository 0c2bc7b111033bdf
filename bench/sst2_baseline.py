"""The SST-2 baseline of issue 5, TF-IDF + logistic regression, measured here; and where it beats the Transformer.

    pip install scikit-learn                     # only for this script
    SCRATCHFORMER_DATA=../shared/data python bench/sst2_baseline.py
    SCRATCHFORMER_DATA=../shared/data python bench/sst2_baseline.py --runs runs/sst2-seeds/sst2-seed*

Word unigrams and bigrams, sublinear TF-IDF, L2-regularised logistic regression (C = 10), fitted on
``train`` and scored on ``test``; then fitted again on the training part of ``sst2_tuning.py``'s split and
scored on its 800 held-out sentences, by sentence length. ``--runs`` adds the same breakdown for
``sst2_seeds.py`` runs (each run's held-out probabilities, and all of them voting).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from scratchformer.data import load_sst2
from sst2_tuning import held_out_split

BUCKETS = [(15, 20), (20, 25), (25, 30), (30, 100)]  # words


def fit_score(train: tuple[list[str], list[int]], test: tuple[list[str], list[int]]) -> torch.Tensor:
    """Class probabilities of the test texts, from TF-IDF + logistic regression fitted on train."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    model = LogisticRegression(C=10.0, max_iter=3000).fit(vectorizer.fit_transform(train[0]), train[1])
    return torch.tensor(model.predict_proba(vectorizer.transform(test[0])))


def report(name: str, probs: torch.Tensor, labels: list[int], lengths: list[int]) -> None:
    right = probs.argmax(-1) == torch.tensor(labels)
    n = torch.tensor(lengths)
    parts = [f"{lo}-{hi - 1} words {100 * right[(n >= lo) & (n < hi)].float().mean():.1f} %" if hi < 100 else
             f"{lo}+ words {100 * right[n >= lo].float().mean():.1f} %" for lo, hi in BUCKETS]
    print(f"{name}: {100 * right.float().mean():.2f} % ({', '.join(parts)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="sst2_seeds.py run directories")
    args = parser.parse_args()
    data = load_sst2()
    test_probs = fit_score(data["train"], data["test"])
    accuracy = (test_probs.argmax(-1) == torch.tensor(data["test"][1])).float().mean()
    print(f"TF-IDF + logistic regression, trained on train ({len(data['train'][0]):,} examples): "
          f"test {100 * accuracy:.2f} % ({len(data['test'][0])} sentences)")
    texts, labels = data["train"]
    keep, held = held_out_split(texts, labels)
    held_texts, held_labels = [texts[i] for i in held], [labels[i] for i in held]
    lengths = [len(t.split()) for t in held_texts]
    counts = ", ".join(f"{sum(lo <= n < hi for n in lengths)} of {lo}{f'-{hi - 1}' if hi < 100 else '+'}"
                       for lo, hi in BUCKETS)
    print(f"on the {len(held)} held-out sentences (trained on the other {len(keep):,} examples), by length "
          f"in words ({counts}):")
    report("TF-IDF + logistic regression", fit_score(([texts[i] for i in keep], [labels[i] for i in keep]),
                                                     (held_texts, held_labels)), held_labels, lengths)
    runs = [json.loads((run / "held_out_probs.json").read_text()) for run in args.runs]
    for run, saved in zip(args.runs, runs):
        assert saved["labels"] == held_labels, f"{run} was scored on another split"
        report(run.name, torch.tensor(saved["probs"]), held_labels, lengths)
    if len(runs) > 1:
        report(f"the {len(runs)} voting", sum(torch.tensor(s["probs"]) for s in runs) / len(runs), held_labels,
               lengths)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
