"""How well does a bag of words (TF-IDF + logistic regression) classify labelled data, split as training splits it?

A bag-of-words baseline for any labelled data: TF-IDF + logistic regression, on the same splits as training.

    pip install -e ".[baseline]"       # scikit-learn, only for this script
    python bench/baselines/bow_baseline.py --data train.tsv --test test.tsv
    python bench/baselines/bow_baseline.py --data train.tsv --val val.tsv --test test.tsv --seed 0

The files are read and split exactly as ``scratchformer train task=classify --data ... --test ...`` reads
and splits them (the same seeded, stratified validation sample when no --val is given). Word unigrams and
bigrams, sublinear TF-IDF, L2-regularised logistic regression; C is chosen on the validation split from
a small grid, then the model is scored once on the test split. Compare the accuracy with the test accuracy a
``train`` run prints: a Transformer trained from scratch that does not beat this is not using word order.
"""

from __future__ import annotations

import argparse
import sys

from scratchformer.data.roles import DataFiles
from scratchformer.extras import MissingExtra, require
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks import build_task

GRID = (0.3, 1.0, 3.0, 10.0, 30.0)


def fit(texts: list[str], labels: list[int], c: float):  # noqa: ANN201 - a scikit-learn pipeline
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    return make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True),
                         LogisticRegression(C=c, max_iter=5000)).fit(texts, labels)


def accuracy(model, rows: list[tuple[str, int]]) -> float:  # noqa: ANN001
    predicted = model.predict([t for t, _ in rows])
    return float(sum(int(p == y) for p, (_, y) in zip(predicted, rows)) / max(1, len(rows)))


def read_splits(files: DataFiles, val_fraction: float, seed: int) -> list[list[tuple[str, int]]]:
    """(text, label id) rows of train, val and test, chosen by the code ``train`` uses (a character tokenizer
    makes the prepared corpus; only its stored texts and labels are read back)."""
    cfg = TrainConfig(task="classify", tokenizer="char", val_fraction=val_fraction, seed=seed)
    task = build_task(cfg, ModelConfig(arch="encoder"), files, log=lambda line: None)
    return [list(zip(task.rows[split].texts("text", range(task.split_size(split))), task.truth(split)))
            for split in ("train", "val", "test")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="training file (.tsv/.csv of text, label)")
    parser.add_argument("--val", nargs="+", default=(), help="validation file (default: carved out of --data)")
    parser.add_argument("--test", nargs="+", required=True, help="test file")
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        require("sklearn", "baseline")
    except MissingExtra as err:
        print(f"bow_baseline: {err}", file=sys.stderr)
        return 2
    train, val, test = read_splits(DataFiles.of(args.data, args.val, args.test), args.val_fraction, args.seed)
    scores = {c: accuracy(fit([t for t, _ in train], [y for _, y in train], c), val) for c in GRID}
    best = max(GRID, key=lambda c: (scores[c], -c))
    model = fit([t for t, _ in train], [y for _, y in train], best)
    print(f"TF-IDF (word 1-2 grams) + logistic regression on {len(train):,} training examples; C chosen on "
          f"{len(val):,} validation examples: " + ", ".join(f"C={c:g} {100 * a:.2f} %" for c, a in scores.items()))
    print(f"test accuracy (C={best:g}, {len(test):,} examples): {100 * accuracy(model, test):.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
