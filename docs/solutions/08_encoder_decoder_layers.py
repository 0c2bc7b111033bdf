"""Solutions to the exercises of page 8, "Encoder and decoder layers" (docs/08-encoder-decoder-layers.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. Run it with ``python docs/solutions/08_encoder_decoder_layers.py``: it needs torch and the
one-file model and its trainer, ``src/scratchformer/paper.py`` and ``paper_train.py``, nothing else.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src" / "scratchformer"))  # paper.py, paper_train.py
import paper  # noqa: E402
import paper_train  # noqa: E402


def exercise_8_1() -> None:
    """The base model's 63,082,496 parameters, part by part, from the formulas of pages 2 to 7."""
    V, C, F, N = 37000, 512, 2048, 6
    attention, ffn, norm = 4 * (C * C + C), 2 * C * F + F + C, 2 * C
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    predicted = V * C + N * encoder_layer + N * decoder_layer  # one shared table, no separate output layer
    with torch.device("meta"):
        model = paper.make_model(V)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert (count(model.encoder.layers[0]), count(model.decoder.layers[0])) == (encoder_layer, decoder_layer)
    assert predicted == count(model) == 63_082_496
    print(f"Exercise 8.1: table {V * C:,} + 6 encoder layers of {encoder_layer:,} + 6 decoder layers of "
          f"{decoder_layer:,} = {predicted:,}")


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


def exercise_8_3() -> None:
    """Train the copy task with no causal mask: the training loss falls as fast as ever, but greedy decoding,
    where the future is not there to read, fails. Position t read the token it had to predict."""
    torch.manual_seed(0)
    rng = random.Random(0)
    tests = [paper_train.random_string(rng) for _ in range(100)]
    original = paper.causal_mask
    paper.causal_mask = lambda length, device=None: torch.ones(length, length, dtype=torch.bool, device=device)
    try:
        model = paper.make_model(paper_train.VOCAB_SIZE, max_len=16, pad_id=paper_train.PAD, **paper_train.MODEL)
        losses = paper_train.train(model, 150, rng, set(tests), log_every=150)
        predictions = paper_train.greedy_decode(model, paper_train.make_batch(tests)[0], max_new_tokens=13)
    finally:
        paper.causal_mask = original
    exact = sum(p == s for p, s in zip(predictions, tests)) / len(tests)
    assert losses[-1] < 0.65 and exact < 0.1, (losses[-1], exact)
    print(f"Exercise 8.3: without the causal mask the loss reaches {losses[-1]:.2f} in 150 steps (the floor is "
          f"0.54), and greedy decoding copies {exact:.0%} of held-out strings")


if __name__ == "__main__":
    exercise_8_1()
    exercise_8_2()
    exercise_8_3()
