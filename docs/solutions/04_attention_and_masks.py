"""Solutions to the exercises of page 4, "Scaled dot-product attention and masks" (docs/04-attention-and-masks.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/04_attention_and_masks.py``) or beside it in a folder of your own
(``python 04_attention_and_masks.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def exercise_4_1() -> None:
    """Leave out the 1/sqrt(d_k): with d_k = 64 more rows put nearly all their weight on one key, and less
    gradient reaches the scores through the softmax."""
    torch.manual_seed(0)
    q, k = torch.randn(1000, 1, 64), torch.randn(1000, 10, 64)  # 1,000 queries, 10 keys each, unit variance
    upstream = torch.randn(1000, 1, 10)  # some gradient arriving at the weights
    found = {}
    for name, scale in [("unscaled", 1.0), ("scaled", 64 ** -0.5)]:
        scores = (q @ k.transpose(1, 2) * scale).requires_grad_()  # (1000, 1, 10)
        weights = scores.softmax(-1)
        (weights * upstream).sum().backward()
        one_key = (weights.max(-1).values > 0.99).float().mean().item()
        found[name] = (scores.std().item(), one_key, scores.grad.norm(dim=-1).mean().item())
    (s_std, s_one, s_grad), (u_std, u_one, u_grad) = found["scaled"], found["unscaled"]
    assert 7 < u_std < 9 and 0.9 < s_std < 1.1
    assert u_one > 0.2 > 0.01 > s_one and u_grad < s_grad / 2
    print(f"Exercise 4.1: scores spread {u_std:.1f} unscaled, {s_std:.1f} scaled; rows with one key over 99 %: "
          f"{u_one:.0%} against {s_one:.1%}; gradient at the scores {s_grad / u_grad:.1f} times smaller unscaled")


def exercise_4_2() -> None:
    """Mask after the softmax (zero the weights) instead of before (-inf): rows no longer sum to 1; dividing by
    their sum gives back paper.attention exactly."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    mask = paper.causal_mask(5)
    right, right_weights = paper.attention(q, k, v, mask)
    weights = (q @ k.transpose(-2, -1) / 8 ** 0.5).softmax(-1) * mask  # the wrong order
    sums = weights.sum(-1)
    assert sums[..., :-1].max() < 0.999 and torch.allclose(sums[..., -1], torch.ones(1))  # only the last row sees all
    assert (weights @ v - right).abs().max() > 0.05
    renormalised = weights / weights.sum(-1, keepdim=True)
    torch.testing.assert_close(renormalised, right_weights)
    print(f"Exercise 4.2: zeroing after the softmax leaves rows summing to {sums.min():.2f} .. 1.00 and another "
          f"output; renormalised, it is paper.attention exactly")


def exercise_4_3() -> None:
    """A query allowed no key at all: softmax of a row of -inf is 0/0, NaN. paper.py never builds such a row with
    right padding (every query may see key 0); the library's attend returns zeros there instead."""
    q, k, v = torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 3, 4)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])  # row 1: nothing
    out, weights = paper.attention(q, k, v, mask)
    assert out[0, 0, 1].isnan().all() and not out[0, 0, [0, 2]].isnan().any()
    ids = torch.tensor([[5, 6, 7, 0, 0]])  # right padding: every query, padded ones too, sees key 0
    tgt_mask = paper.padding_mask(ids, 0) & paper.causal_mask(5)
    assert tgt_mask.any(-1).all()
    print("Exercise 4.3: a row with no key to attend to gives NaN; with padding at the end every row keeps key 0")


if __name__ == "__main__":
    exercise_4_1()
    exercise_4_2()
    exercise_4_3()
