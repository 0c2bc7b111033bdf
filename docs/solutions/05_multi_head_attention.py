"""Solutions to the exercises of page 5, "Multi-head attention" (docs/05-multi-head-attention.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/05_multi_head_attention.py``) or beside it in a folder of your own
(``python 05_multi_head_attention.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def my_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Equation 1 from a blank page: softmax(q k^T / sqrt(d_k)) v, masked keys at -inf before the softmax."""
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


class MyMultiHeadAttention(nn.Module):
    """Multi-head attention from a blank page: project, cut the C columns into H heads, attend, put the heads
    side by side again, mix them with W^O."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def heads(self, x: Tensor) -> Tensor:  # (B, L, C) -> (B, H, L, d_k)
        return x.unflatten(-1, (self.n_heads, self.d_k)).transpose(1, 2)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        out, _ = my_attention(self.heads(self.q(query)), self.heads(self.k(key)), self.heads(self.v(value)), mask)
        return self.o(out.transpose(1, 2).flatten(2))  # (B, H, T, d_k) -> (B, T, H d_k) = (B, T, C)


def exercise_5_1() -> None:
    """Attention and multi-head attention written from a blank page give paper.py's outputs: equation 1 with
    padding and causal masks, then the module, given paper.py's weights, as self-attention under the decoder's
    mask and as cross-attention over a padded source."""
    torch.manual_seed(0)
    C, H = 32, 4
    q, k, v = torch.randn(2, H, 5, 8), torch.randn(2, H, 7, 8), torch.randn(2, H, 7, 8)
    src = torch.tensor([[4, 5, 6, 7, 8, 9, 10], [4, 5, 6, 0, 0, 0, 0]])  # the second: 3 tokens, 4 <pad>
    for mask in (None, paper.padding_mask(src, 0)):
        mine, theirs = my_attention(q, k, v, mask), paper.attention(q, k, v, mask)
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=0)
    reference, mine = paper.MultiHeadAttention(C, H), MyMultiHeadAttention(C, H)
    for layer, theirs in [(mine.q, reference.w_q), (mine.k, reference.w_k), (mine.v, reference.w_v),
                          (mine.o, reference.w_o)]:
        layer.load_state_dict(theirs.state_dict())
    x, memory = torch.randn(2, 5, C), torch.randn(2, 7, C)
    tgt = torch.tensor([[1, 4, 5, 6, 7], [1, 4, 5, 0, 0]])
    self_mask = paper.padding_mask(tgt, 0) & paper.causal_mask(5)  # (B, 1, T, T)
    with torch.no_grad():
        torch.testing.assert_close(mine(x, x, x, self_mask), reference(x, x, x, self_mask), atol=1e-6, rtol=0)
        cross = mine(x, memory, memory, paper.padding_mask(src, 0))
        torch.testing.assert_close(cross, reference(x, memory, memory, paper.padding_mask(src, 0)), atol=1e-6, rtol=0)
    print(f"Exercise 5.1: attention and multi-head attention from a blank page equal paper.py's (masked self- and "
          f"cross-attention, {sum(p.numel() for p in mine.parameters()):,} parameters for C = {C}, H = {H})")


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
