"""Solutions to the exercises of page 10, "Training" (docs/10-training.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` and ``paper_train.py`` from ``src/scratchformer/``, nothing else: run
it in the repository (``python docs/solutions/10_training.py``) or beside them in a folder of your own
(``python 10_training.py``).
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402
import paper_train  # noqa: E402


def _train(steps: int, warmup: bool) -> float:
    """The copy task for ``steps`` steps with equation 3, or with the same peak rate from the first step and the
    same decay after it; the mean loss of the last 50 steps."""
    torch.manual_seed(0)
    rng = random.Random(0)
    d_model = paper_train.MODEL["d_model"]
    peak = paper_train.learning_rate(paper_train.WARMUP, d_model, paper_train.WARMUP)  # 8.8e-3
    original = paper_train.learning_rate
    if not warmup:
        paper_train.learning_rate = lambda step, d, w: peak * min(1.0, (w / step) ** 0.5)
    try:
        model = paper.make_model(paper_train.VOCAB_SIZE, max_len=16, pad_id=paper_train.PAD, **paper_train.MODEL)
        losses = paper_train.train(model, steps, rng, set(), log_every=steps)
    finally:
        paper_train.learning_rate = original
    return sum(losses[-50:]) / 50


def exercise_10_1() -> None:
    """Without the warm-up the post-LN model stalls: at the peak rate from step 1, Adam's first steps (each about
    the learning rate in every weight, whatever the gradient's size) throw it into a region where the loss stays
    near that of guessing (ln 13 = 2.56) for most of the run; with the warm-up it is near its floor by step 200."""
    warm, cold = _train(200, warmup=True), _train(200, warmup=False)
    assert warm < 1.0 and cold > 1.5, (warm, cold)
    print(f"Exercise 10.1: mean loss of steps 151-200 with the warm-up {warm:.2f}, without it {cold:.2f} "
          f"(guessing: ln 13 = {math.log(13):.2f}; the floor: 0.537)")


def smoothed_loss(logits: torch.Tensor, target: torch.Tensor, eps: float, pad: int) -> torch.Tensor:
    """Label smoothing by hand: the target q puts 1 - eps + eps/V on the right token and eps/V on every other;
    the loss is -sum_k q_k log p_k, averaged over the real (not padded) target tokens."""
    V = logits.size(-1)
    log_p = logits.log_softmax(-1)  # (B, T, V)
    q = torch.full_like(log_p, eps / V).scatter(-1, target[..., None], 1 - eps + eps / V)
    per_token = -(q * log_p).sum(-1)  # (B, T)
    real = target != pad
    return per_token[real].sum() / real.sum()


def exercise_10_2() -> None:
    """The hand-written loss equals F.cross_entropy with label_smoothing and ignore_index. Three more columns of
    <pad> change nothing when the padding is left out (the masks keep the real positions' logits, the loss skips
    the pads). Counted as targets, the pads lower the loss as they are added: the model is scored on predicting
    <pad> after <pad>, which even an untrained model does (its largest logit is its input token, exercise 2.2)."""
    torch.manual_seed(0)
    model = paper.make_model(paper_train.VOCAB_SIZE, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0).eval()
    src, tgt_in, tgt_out = paper_train.make_batch(["bead", "hijdefgh"])
    with torch.no_grad():
        logits = model(src, tgt_in)
    mine = smoothed_loss(logits, tgt_out, 0.1, paper_train.PAD)
    torch.testing.assert_close(mine, paper_train.loss_fn(logits, tgt_out), atol=1e-6, rtol=0)

    more = lambda t: F.pad(t, (0, 3), value=paper_train.PAD)  # noqa: E731  (three more columns of <pad>)
    with torch.no_grad():
        padded_logits = model(more(src), more(tgt_in))
    left_out = smoothed_loss(padded_logits, more(tgt_out), 0.1, paper_train.PAD)
    counted = [smoothed_loss(x, y, 0.1, pad=-1) for x, y in ((logits, tgt_out), (padded_logits, more(tgt_out)))]
    assert abs(left_out - mine) < 1e-5 and abs(counted[1] - counted[0]) > 0.05, (mine, left_out, counted)
    assert counted[1] < counted[0]
    print(f"Exercise 10.2: by hand {mine:.4f} = F.cross_entropy's {paper_train.loss_fn(logits, tgt_out):.4f}; "
          f"with 3 more <pad> columns {left_out:.4f}; counting the pads as targets {counted[0]:.4f}, then "
          f"{counted[1]:.4f}")


def exercise_10_3() -> None:
    """The floor: the loss -sum q log p is lowest when p = q, where it is the entropy of q. For V = 13 and
    eps = 0.1 that is 0.537: the copy task's loss ends there, however well the model copies."""
    V, eps = paper_train.VOCAB_SIZE, paper_train.LABEL_SMOOTHING
    right, other = 1 - eps + eps / V, eps / V
    floor = -(right * math.log(right) + (V - 1) * other * math.log(other))
    best = torch.full((1, V), math.log(other))
    best[0, 0] = math.log(right)  # logits log q: the model's distribution is the target's
    at_best = F.cross_entropy(best, torch.tensor([0]), label_smoothing=eps).item()
    surer = best.clone()
    surer[0, 0] += 1.0  # more certain of the right token than q
    assert round(floor, 3) == 0.537 and abs(at_best - floor) < 1e-6
    assert F.cross_entropy(surer, torch.tensor([0]), label_smoothing=eps).item() > floor
    print(f"Exercise 10.3: the floor for V = {V}, eps = {eps}: {floor:.4f}, reached when the model predicts q itself; "
          "more certainty costs more")


if __name__ == "__main__":
    exercise_10_1()
    exercise_10_2()
    exercise_10_3()
