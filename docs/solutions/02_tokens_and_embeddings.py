"""Solutions to the exercises of page 2, "Tokens and embeddings" (docs/02-tokens-and-embeddings.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/02_tokens_and_embeddings.py``) or beside it in a folder of your own
(``python 02_tokens_and_embeddings.py``).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402


def exercise_2_1() -> None:
    """The embedding without x sqrt(C), against the positional encoding it is added to (C = 512)."""
    torch.manual_seed(0)
    C = 512
    embed = paper.Embeddings(1000, C)
    paper.init_weights(embed)  # N(0, 1/C), as make_model draws it
    ids = torch.arange(1000)[None]  # every token once: (1, 1000)
    rms = lambda t: t.pow(2).mean().sqrt().item()  # noqa: E731
    unscaled, scaled = rms(embed.table(ids)), rms(embed(ids))
    positions = rms(paper.sinusoidal_positions(1000, C))  # each pair is (sin, cos): sin^2 + cos^2 = 1
    assert math.isclose(unscaled, C ** -0.5, rel_tol=0.02) and math.isclose(scaled, 1.0, rel_tol=0.02)
    assert math.isclose(positions, 0.5 ** 0.5, rel_tol=1e-6)
    print(f"Exercise 2.1: token rows {unscaled:.3f} without the factor, {scaled:.2f} with it; positions "
          f"{positions:.3f}: without it the positions are {positions / unscaled:.0f} times larger than the tokens")


def exercise_2_2() -> None:
    """At initialisation, which output token gets the largest logit? The input token itself, through the
    residual path and the shared table: the output layer is the embedding matrix read backwards."""
    torch.manual_seed(0)
    model = paper.make_model(50, n_layers=2, d_model=128, d_ff=256, n_heads=4, dropout=0.0).eval()
    src = torch.randint(3, 50, (8, 10))
    tgt = torch.randint(3, 50, (8, 10))
    with torch.no_grad():
        logits = model(src, tgt)  # (B, T, V)
    own = (logits.argmax(-1) == tgt).float().mean().item()
    assert own > 0.5, own  # chance would be 1 / 50
    print(f"Exercise 2.2: at initialisation the largest logit is the position's own input token "
          f"{own:.0%} of the time (chance: 2 %)")


if __name__ == "__main__":
    exercise_2_1()
    exercise_2_2()
