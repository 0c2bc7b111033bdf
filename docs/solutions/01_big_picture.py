"""Solutions to the exercises of page 1, "The big picture" (docs/01-big-picture.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/01_big_picture.py``) or beside it in a folder of your own
(``python 01_big_picture.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def _one_pass_against_prefixes(model: paper.Transformer, src: torch.Tensor, tgt: torch.Tensor) -> float:
    """The largest gap between the logits of one teacher-forced pass and those of T passes over the prefixes."""
    with torch.no_grad():
        one_pass = model(src, tgt)  # (1, T, V): every position at once
        prefixes = torch.stack([model(src, tgt[:, :t + 1])[0, -1] for t in range(tgt.size(1))])  # (T, V)
    return (one_pass[0] - prefixes).abs().max().item()


def exercise_1_1() -> None:
    """Teacher forcing computes in one pass what decoding computes in T: position t of one pass over the shifted
    target gives the same distribution as a pass over the prefix <bos> y_1 .. y_t alone, because the causal mask
    hides y_(t+1) .. from it. Without the mask the earlier positions read later tokens and the two differ."""
    torch.manual_seed(0)
    model = paper.make_model(20, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0).eval()
    src = torch.randint(3, 20, (1, 7))
    tgt = torch.cat([torch.tensor([[1]]), torch.randint(3, 20, (1, 5))], 1)  # <bos> y_1 .. y_5: (1, 6)
    masked = _one_pass_against_prefixes(model, src, tgt)
    original = paper.causal_mask
    paper.causal_mask = lambda length, device=None: torch.ones(length, length, dtype=torch.bool, device=device)
    try:
        unmasked = _one_pass_against_prefixes(model, src, tgt)
    finally:
        paper.causal_mask = original
    assert masked < 1e-5 and unmasked > 0.1, (masked, unmasked)
    print(f"Exercise 1.1: one pass and 6 passes over the prefixes differ by {masked:.1e} with the causal mask, "
          f"by {unmasked:.2f} without it")


if __name__ == "__main__":
    exercise_1_1()
