"""Solutions to the exercises of page 8, "Encoder and decoder layers" (docs/08-encoder-decoder-layers.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` and ``paper_train.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/08_encoder_decoder_layers.py``) or beside them in a folder of your own
(``python 08_encoder_decoder_layers.py``).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from torch import Tensor

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402
import paper_train  # noqa: E402


def exercise_8_1() -> None:
    """The base model's 63,082,496 parameters, part by part, from the formulas of pages 2 to 7; Table 3 says 65M.
    Every size the paper gives exactly (N, C, d_ff, H) is used here; the one it does not is the vocabulary,
    "about 37000" tokens. At C = 512 parameters a token the gap of 1.9M is about 3,700 tokens: a shared
    vocabulary near 40,700 gives 65M. The paper states neither its exact vocabulary nor how it counted."""
    V, C, d_ff, N = 37000, 512, 2048, 6
    attention, ffn, norm = 4 * (C * C + C), 2 * C * d_ff + d_ff + C, 2 * C
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    predicted = V * C + N * encoder_layer + N * decoder_layer  # one shared table, no separate output layer
    with torch.device("meta"):
        model = paper.make_model(V)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert (count(model.encoder.layers[0]), count(model.decoder.layers[0])) == (encoder_layer, decoder_layer)
    assert predicted == count(model) == 63_082_496
    untied = predicted + 2 * V * C  # a table each for the source, the target and the output layer
    vocabulary_for_65m = V + round((65_000_000 - predicted) / C)
    assert (untied, vocabulary_for_65m) == (100_970_496, 40_745)
    print(f"Exercise 8.1: table {V * C:,} + 6 encoder layers of {encoder_layer:,} + 6 decoder layers of "
          f"{decoder_layer:,} = {predicted:,} (three separate tables: {untied:,}); Table 3's 65M would need a "
          f"vocabulary of about {vocabulary_for_65m:,}")


def _self_instead_of_cross(self: paper.DecoderLayer, x: Tensor, memory: Tensor, src_mask: Tensor,
                           tgt_mask: Tensor) -> Tensor:
    """The tutorial bug: the second attention reads the decoder's own states, never ``memory``."""
    x = self.add_norm_1(x, self.self_attn(x, x, x, tgt_mask))
    x = self.add_norm_2(x, self.cross_attn(x, x, x, tgt_mask))
    return self.add_norm_3(x, self.ffn(x))


def exercise_8_2() -> None:
    """With cross-attention over the decoder's own states the source stops mattering: two different sources give
    the same logits. Every shape still fits, so nothing crashes."""
    torch.manual_seed(0)
    model = paper.make_model(30, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0).eval()
    src_a, src_b, tgt = torch.randint(3, 30, (1, 6)), torch.randint(3, 30, (1, 6)), torch.randint(3, 30, (1, 5))
    with torch.no_grad():
        right = (model(src_a, tgt) - model(src_b, tgt)).abs().max().item()
        original = paper.DecoderLayer.forward
        paper.DecoderLayer.forward = _self_instead_of_cross
        try:
            wrong = (model(src_a, tgt) - model(src_b, tgt)).abs().max().item()
        finally:
            paper.DecoderLayer.forward = original
    assert right > 0.1 and wrong == 0.0
    print(f"Exercise 8.2: two sources change the logits by {right:.2f}; with the bug by {wrong:.0f}: "
          "the decoder has become a language model of the target alone")


def _copy_task(steps: int, causal: bool) -> tuple[float, float]:
    """paper_train.py's copy task for ``steps`` steps, with or without the causal mask: (the mean loss of the last
    50 steps, the exact match of greedy decoding on 100 held-out strings)."""
    torch.manual_seed(0)
    rng = random.Random(0)
    tests = [paper_train.random_string(rng) for _ in range(100)]
    original = paper.causal_mask
    if not causal:  # every position may attend to every position, later ones included
        paper.causal_mask = lambda length, device=None: torch.ones(length, length, dtype=torch.bool, device=device)
    try:
        model = paper.make_model(paper_train.VOCAB_SIZE, max_len=16, pad_id=paper_train.PAD, **paper_train.MODEL)
        losses = paper_train.train(model, steps, rng, set(tests), log_every=steps)
        predictions = paper_train.greedy_decode(model, paper_train.make_batch(tests)[0], max_new_tokens=13)
    finally:
        paper.causal_mask = original
    return sum(losses[-50:]) / 50, sum(p == s for p, s in zip(predictions, tests)) / len(tests)


def exercise_8_3() -> None:
    """Train the copy task with no causal mask: the training loss falls no slower than with the mask (position t
    reads y_(t+1), the token it must predict, from the decoder's own input: copying it is as easy to learn as
    the real task), but greedy decoding, where that token is not there yet, copies nothing."""
    cheat_loss, cheat_exact = _copy_task(150, causal=False)
    loss, exact = _copy_task(150, causal=True)
    assert cheat_loss < min(0.8, loss + 0.1) and cheat_exact < 0.1 < exact, (cheat_loss, loss, cheat_exact, exact)
    print(f"Exercise 8.3: after 150 steps (mean loss of steps 101-150; the floor is 0.537) without the causal mask "
          f"{cheat_loss:.2f}, with it {loss:.2f}; greedy decoding copies {cheat_exact:.0%} of held-out strings "
          f"without it, {exact:.0%} with it")


if __name__ == "__main__":
    exercise_8_1()
    exercise_8_2()
    exercise_8_3()
