"""Solutions to the exercises of page 5, "Multi-head attention" (docs/05-multi-head-attention.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. Run it with ``python docs/solutions/05_multi_head_attention.py``: it needs torch and the one-file
model, ``src/scratchformer/paper.py``, nothing else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src" / "scratchformer"))  # paper.py
import paper  # noqa: E402


def exercise_5_1() -> None:
    """The number of heads does not change the number of parameters: 4 (C^2 + C) for any H."""
    C = 512
    counts = {H: sum(p.numel() for p in paper.MultiHeadAttention(C, H).parameters()) for H in (1, 8, 64)}
    assert set(counts.values()) == {4 * (C * C + C)} == {1_050_624}
    print(f"Exercise 5.1: {counts[1]:,} parameters with 1, 8 or 64 heads: H only decides how the columns are cut")


class NoTranspose(paper.MultiHeadAttention):
    """paper.MultiHeadAttention with the concatenation written without ``transpose(1, 2)``."""

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = self.split_heads(self.w_q(query)), self.split_heads(self.w_k(key)), self.split_heads(self.w_v(value))
        out, _ = paper.attention(q, k, v, mask)  # (B, H, T, D)
        B, H, T, D = out.shape
        return self.w_o(out.reshape(B, T, H * D))  # the bug: (H, T, D) read in memory order


def exercise_5_2() -> None:
    """Without the transpose a position reads what other positions computed: under the causal mask, changing the
    last token now changes earlier positions' outputs."""
    torch.manual_seed(0)
    right = paper.MultiHeadAttention(32, 4)
    wrong = NoTranspose(32, 4)
    wrong.load_state_dict(right.state_dict())
    x = torch.randn(1, 6, 32)
    later = x.clone()
    later[0, 5] += 1.0  # change the last token only
    mask = paper.causal_mask(6)
    with torch.no_grad():
        leak = {name: (m(later, later, later, mask) - m(x, x, x, mask))[0, :5].abs().max().item()
                for name, m in [("right", right), ("wrong", wrong)]}
    assert leak["right"] == 0.0 and leak["wrong"] > 1e-3
    print(f"Exercise 5.2: changing the last token moves positions 0-4 by {leak['right']:.0f} with the transpose, "
          f"by up to {leak['wrong']:.3f} without: the causal mask is defeated")


def exercise_5_3() -> None:
    """Cross-attention: 4 queries over 9 keys. Each head's weights are (B, H, 4, 9), one row per target position
    and one column per source position; the output has the query's length, (B, 4, C). Keys and values must have
    the same length (each weight multiplies one value), the queries need not."""
    torch.manual_seed(0)
    C, H = 32, 4
    mha = paper.MultiHeadAttention(C, H)
    x, memory = torch.randn(2, 4, C), torch.randn(2, 9, C)
    q, k, v = mha.split_heads(mha.w_q(x)), mha.split_heads(mha.w_k(memory)), mha.split_heads(mha.w_v(memory))
    _, weights = paper.attention(q, k, v)
    out = mha(x, memory, memory)
    assert weights.shape == (2, H, 4, 9) and out.shape == (2, 4, C)
    try:
        mha(x, memory, memory[:, :8])  # 9 keys, 8 values
    except RuntimeError:
        refused = True
    else:
        refused = False
    assert refused
    print(f"Exercise 5.3: weights {tuple(weights.shape)}, output {tuple(out.shape)}; 9 keys with 8 values fail "
          f"(the weights (.., 4, 9) cannot multiply values (.., 8, D))")


if __name__ == "__main__":
    exercise_5_1()
    exercise_5_2()
    exercise_5_3()
