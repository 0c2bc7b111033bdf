"""How well does logistic regression on the raw pixels do on the `digits-vit` preset's split?

The baseline of the `digits-vit` preset: logistic regression on the raw pixels, on the same split.

    pip install -e ".[images]"         # scikit-learn (and Pillow)
    python bench/baselines/digits_baseline.py

The digits are read exactly as ``scratchformer train --preset digits-vit`` reads them (``data.images.load_digits``:
scikit-learn's 1,797 8 x 8 digits, the fixed stratified split 1,295 train / 143 validation / 359 test, pixels
scaled to [0, 1]). Each image is its 64 pixel values; an L2-regularised multinomial logistic regression is
fitted on the training split for each C of a small grid, C is chosen on the validation split, and the chosen
model is scored once on the test split, as the ViT is. The time is the whole script after the imports (every
fit of the grid included), on one thread.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy loads: one thread, as the timing says

from scratchformer.extras import MissingExtra, require  # noqa: E402 - after the thread setting

GRID = (0.01, 0.1, 1.0, 10.0, 100.0)


def main() -> int:
    try:
        require("sklearn", "images")
    except MissingExtra as err:
        print(f"digits_baseline: {err}", file=sys.stderr)
        return 2
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from scratchformer.data.images import as_input, load_digits

    start = time.perf_counter()
    splits = {name: (np.stack([as_input(x).flatten().numpy() for x, _ in rows]), np.array([y for _, y in rows]))
              for name, rows in load_digits().items()}
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = splits["train"], splits["val"], splits["test"]
    models = {c: LogisticRegression(C=c, max_iter=10_000).fit(x_train, y_train) for c in GRID}
    scores = {c: float((m.predict(x_val) == y_val).mean()) for c, m in models.items()}
    best = max(GRID, key=lambda c: (scores[c], -c))
    test = float((models[best].predict(x_test) == y_test).mean())
    seconds = time.perf_counter() - start
    print(f"logistic regression on the 64 raw pixels, {len(y_train):,} training images; C chosen on {len(y_val)} "
          "validation images: " + ", ".join(f"C={c:g} {100 * a:.2f} %" for c, a in scores.items()))
    print(f"test accuracy (C={best:g}, {len(y_test)} images): {100 * test:.2f} % "
          f"({int(round((1 - test) * len(y_test)))} wrong); {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
