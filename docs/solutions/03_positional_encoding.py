"""Solutions to the exercises of page 3, "Positional encoding" (docs/03-positional-encoding.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/03_positional_encoding.py``) or beside it in a folder of your own
(``python 03_positional_encoding.py``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def exercise_3_1() -> None:
    """Without positions the encoder cannot tell orders apart: permuting the source only permutes its output."""
    torch.manual_seed(0)
    model = paper.make_model(30, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0).eval()
    src = torch.randint(3, 30, (1, 7))
    perm = torch.randperm(7)
    with torch.no_grad():
        with_positions = (model.encode(src[:, perm]) - model.encode(src)[:, perm]).abs().max().item()
        model.positions.pe.zero_()  # no positional encoding at all
        without = (model.encode(src[:, perm]) - model.encode(src)[:, perm]).abs().max().item()
    assert without < 1e-5 < 0.1 < with_positions
    print(f"Exercise 3.1: permuted source vs permuted output: differ by {with_positions:.2f} with positions, "
          f"{without:.0e} without: the encoder alone sees a bag of tokens")


def exercise_3_2() -> None:
    """Moving k positions rotates every (sin, cos) pair by k * omega_i: PE(pos + k) = R_k PE(pos), and the dot
    product PE(p) . PE(p + k) depends on k only."""
    C, k = 16, 3
    pe = paper.sinusoidal_positions(100, C).double()
    for i in range(C // 2):
        omega = 10000 ** (-2 * i / C)
        a = k * omega
        rotation = torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]], dtype=torch.float64)
        pair = pe[:, 2 * i:2 * i + 2]  # (100, 2): (sin, cos) of pos * omega
        torch.testing.assert_close(pair[k:], pair[:-k] @ rotation.T, atol=1e-6, rtol=0)  # float32 table
    dots = (pe[:-k] * pe[k:]).sum(-1)  # PE(p) . PE(p + 3) for p = 0 .. 96
    assert dots.max() - dots.min() < 1e-5
    print(f"Exercise 3.2: PE(pos + {k}) is PE(pos) rotated pair by pair; PE(p) . PE(p + {k}) = {dots[0]:.4f} "
          f"for every p")


def exercise_3_3() -> None:
    """The sequence-first tutorial class fed a batch-first batch: sentence b gets position b's row at every token."""
    C, max_len = 8, 50
    pe = paper.sinusoidal_positions(max_len, C)[:, None, :]  # the tutorial's (max_len, 1, C), for (T, B, C) input
    x = torch.zeros(2, 5, C)  # batch-first (B, T, C): two identical sentences of 5 tokens (all zero vectors)
    buggy = x + pe[: x.size(0)]  # x.size(0) is B, not T: (B, 1, C) broadcasts over the tokens
    right = x + paper.sinusoidal_positions(max_len, C)[: x.size(1)]  # paper.py: row t to position t
    assert torch.equal(buggy[0, 0], buggy[0, 4])  # every token of sentence 0 has the same "position"
    assert not torch.equal(buggy[0], buggy[1])  # and the same sentence is encoded differently in slot 1
    assert torch.equal(right[0], right[1]) and not torch.equal(right[0, 0], right[0, 4])
    print("Exercise 3.3: with pe[: x.size(0)] on a batch-first batch every token of sentence b gets position b's "
          "row: no word order, and the slot in the batch changes the encoding")


if __name__ == "__main__":
    exercise_3_1()
    exercise_3_2()
    exercise_3_3()
