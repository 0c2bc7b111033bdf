"""Solutions to the exercises of page 9, "Three families" (docs/09-three-families.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` from ``src/scratchformer/``, nothing else: run it
in the repository (``python docs/solutions/09_three_families.py``) or beside it in a folder of your own
(``python 09_three_families.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402

SIZES = dict(n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0)


def exercise_9_1() -> None:
    """Left padding in paper.GPT: the first query (a pad) may attend to no key, its row is NaN, and the NaN
    reaches every position in the next layer, because a weight of 0 times a NaN value is NaN. Right padding
    changes nothing at the real positions."""
    torch.manual_seed(0)
    gpt = paper.GPT(20, **SIZES).eval()
    prompt, pad = torch.tensor([[5, 6, 7, 8]]), torch.zeros(1, 2, dtype=torch.long)
    with torch.no_grad():
        alone = gpt(prompt)
        right = gpt(torch.cat([prompt, pad], 1))[:, :4]
        left = gpt(torch.cat([pad, prompt], 1))
        layer_1 = gpt.blocks.layers[0](gpt.positions(gpt.embed(torch.cat([pad, prompt], 1))),
                                       paper.padding_mask(torch.cat([pad, prompt], 1), 0) & paper.causal_mask(6))
    torch.testing.assert_close(right, alone, atol=1e-6, rtol=0)
    assert layer_1[0, 0].isnan().all() and not layer_1[0, 2:].isnan().any()  # after one layer: the pad rows only
    assert left.isnan().all()  # after two: everything
    print("Exercise 9.1: right padding gives the same logits; left padding gives NaN, at the pad rows after one "
          "layer and everywhere after two")


class PrefixLM(paper.GPT):
    """paper.GPT whose first ``prefix`` positions see each other both ways; the rest stays causal."""

    def __init__(self, *args, prefix: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.prefix = prefix

    def forward(self, ids: Tensor) -> Tensor:
        T = ids.size(1)
        visible = paper.causal_mask(T, ids.device).clone()
        visible[: self.prefix, : self.prefix] = True  # the prompt reads itself bidirectionally
        mask = paper.padding_mask(ids, self.pad_id) & visible
        x = self.blocks(self.positions(self.embed(ids)), mask)
        return x @ self.embed.table.weight.T


def exercise_9_2() -> None:
    """A prefix language model (T5's and UniLM's): a prompt of 3 tokens read both ways, then causal. Token 1 now
    changes position 0's logits; a token after the prompt still changes no earlier logit."""
    torch.manual_seed(0)
    model = PrefixLM(20, prefix=3, **SIZES).eval()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])

    def moved(position: int) -> Tensor:  # how much each position's logits move when ``position`` changes
        other = ids.clone()
        other[0, position] = 11
        with torch.no_grad():
            return (model(other) - model(ids))[0].abs().amax(-1)

    assert moved(1)[0] > 1e-3  # inside the prompt: bidirectional
    assert moved(4)[:4].max() == 0 and moved(4)[4] > 1e-3  # after it: causal
    print("Exercise 9.2: in the prefix LM a prompt token changes the logits before it; a later token does not")


def exercise_9_3() -> None:
    """Mean pooling over every position, padding included: the same sentence gets other logits in a batch that
    needs more padding. paper.Classifier averages the real tokens only."""
    torch.manual_seed(0)
    classifier = paper.Classifier(20, 3, **SIZES).eval()
    sentence, padded = torch.tensor([[5, 6, 7]]), torch.tensor([[5, 6, 7, 0, 0, 0]])

    def pooled_over_all(ids: Tensor) -> Tensor:
        x = classifier.encoder(classifier.positions(classifier.embed(ids)), paper.padding_mask(ids, 0))
        return classifier.head(x.mean(1))  # padding counted in the mean

    with torch.no_grad():
        torch.testing.assert_close(classifier(padded), classifier(sentence), atol=1e-6, rtol=0)
        wrong = (pooled_over_all(padded) - pooled_over_all(sentence)).abs().max().item()
    assert wrong > 1e-2
    print(f"Exercise 9.3: the mean over real tokens ignores padding; the mean over all positions moves the logits "
          f"by {wrong:.2f} when three pads are added")


if __name__ == "__main__":
    exercise_9_1()
    exercise_9_2()
    exercise_9_3()
