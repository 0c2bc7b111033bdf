"""Solutions to the exercises of page 6, "The position-wise feed-forward network" (docs/06-feed-forward.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/06_feed_forward.py``) or beside it in a folder of your own
(``python 06_feed_forward.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def exercise_6_1() -> None:
    """The share of an encoder layer's parameters in its feed-forward network, for the base model."""
    layer = paper.EncoderLayer(d_model=512, n_heads=8, d_ff=2048, dropout=0.1)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    ffn, attention, total = count(layer.ffn), count(layer.self_attn), count(layer)
    assert ffn == 2 * 512 * 2048 + 2048 + 512 == 2_099_712 and attention == 1_050_624 and total == 3_152_384
    print(f"Exercise 6.1: feed-forward {ffn:,} of {total:,} parameters ({ffn / total:.1%}), "
          f"attention {attention:,}, the two LayerNorms {total - ffn - attention:,}")


def exercise_6_2() -> None:
    """Position-wise = two convolutions with kernel size 1; and a position's output depends on that position only."""
    torch.manual_seed(0)
    ffn = paper.FeedForward(16, 64)
    conv1, conv2 = nn.Conv1d(16, 64, kernel_size=1), nn.Conv1d(64, 16, kernel_size=1)
    with torch.no_grad():
        for conv, linear in [(conv1, ffn.w_1), (conv2, ffn.w_2)]:
            conv.weight.copy_(linear.weight[:, :, None])  # (out, in) -> (out, in, kernel 1)
            conv.bias.copy_(linear.bias)
        x = torch.randn(2, 7, 16)  # (B, T, C)
        as_convs = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)  # Conv1d wants (B, C, T)
        torch.testing.assert_close(as_convs, ffn(x), atol=1e-6, rtol=0)
        changed = x.clone()
        changed[:, 3] += 1.0
        moved = (ffn(changed) - ffn(x)).abs().amax(dim=(0, 2))  # (T,): how much each position's output moved
    assert moved[3] > 0.01 and moved[torch.arange(7) != 3].max() == 0
    print("Exercise 6.2: the FFN equals two kernel-1 convolutions; changing position 3 moves position 3's output only")


if __name__ == "__main__":
    exercise_6_1()
    exercise_6_2()
