"""Solutions to the exercises of page 7, "Residual connections and LayerNorm" (docs/07-residuals-and-layernorm.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/07_residuals_and_layernorm.py``) or beside it in a folder of your own
(``python 07_residuals_and_layernorm.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def exercise_7_1() -> None:
    """After AddAndNorm (gain 1, bias 0) every position has mean 0 and standard deviation 1, whatever x and y;
    multiplying both by 100 changes nothing (up to LayerNorm's epsilon)."""
    torch.manual_seed(0)
    add_norm = paper.AddAndNorm(64, dropout=0.0)
    x, y = 5 * torch.randn(2, 7, 64) + 3, torch.randn(2, 7, 64)
    out = add_norm(x, y)
    assert out.mean(-1).abs().max() < 1e-5 and (out.std(-1, unbiased=False) - 1).abs().max() < 1e-3
    torch.testing.assert_close(add_norm(100 * x, 100 * y), out, atol=1e-4, rtol=0)
    print("Exercise 7.1: every position leaves Add & Norm with mean 0 and standard deviation 1; x100 changes nothing")


class PreLN(nn.Module):
    """Pre-LN: x + Dropout(Sublayer(LayerNorm(x))), the order of GPT-2 and most later models."""

    def __init__(self, d_model: int, dropout: float) -> None:
        super().__init__()
        self.norm, self.dropout = nn.LayerNorm(d_model), nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: nn.Module) -> Tensor:
        return x + self.dropout(sublayer(self.norm(x)))


def exercise_7_2() -> None:
    """Twelve feed-forward sub-layers, post-LN and pre-LN: the residual stream keeps standard deviation 1 in
    post-LN and grows with depth in pre-LN (which is why pre-LN stacks end with one more LayerNorm)."""
    torch.manual_seed(0)
    C, N = 64, 12
    ffns = [paper.FeedForward(C, 4 * C) for _ in range(N)]
    paper.init_weights(nn.ModuleList(ffns))
    post, pre = [paper.AddAndNorm(C, 0.0) for _ in range(N)], [PreLN(C, 0.0) for _ in range(N)]
    x = torch.randn(8, 10, C)
    stds = {"post": [], "pre": []}
    with torch.no_grad():
        for name, wrappers in [("post", post), ("pre", pre)]:
            h = x
            for wrapper, ffn in zip(wrappers, ffns):
                h = wrapper(h, ffn(h)) if name == "post" else wrapper(h, ffn)
                stds[name].append(h.std().item())
    assert max(abs(s - 1) for s in stds["post"]) < 0.01
    assert stds["pre"][-1] > 1.5 * stds["pre"][0] and stds["pre"] == sorted(stds["pre"])
    post_at, pre_at = (", ".join(f"{stds[name][i]:.2f}" for i in (0, 5, 11)) for name in ("post", "pre"))
    print(f"Exercise 7.2: after 1, 6, 12 sub-layers the stream's standard deviation is {post_at} post-LN and "
          f"{pre_at} pre-LN")


if __name__ == "__main__":
    exercise_7_1()
    exercise_7_2()
