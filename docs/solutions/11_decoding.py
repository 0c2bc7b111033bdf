"""Solutions to the exercises of page 11, "Decoding" (docs/11-decoding.md).

One function per exercise; its asserts are the answer, checked: the test suite runs this file, so no solution
can go stale. It needs torch and ``paper.py`` and ``paper_train.py`` from ``src/scratchformer/``, nothing else: run
it in the repository (``python docs/solutions/11_decoding.py``) or beside them in a folder of your own
(``python 11_decoding.py``).
"""

from __future__ import annotations

import random
import sys
import time
from functools import cache
from pathlib import Path

import torch
from torch import Tensor

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "src" / "scratchformer")]  # beside this file, or the repository's
import paper  # noqa: E402
import paper_train  # noqa: E402


@cache
def trained() -> tuple[paper.Transformer, list[str]]:
    """A copy model trained for 300 steps, and 200 held-out strings."""
    torch.manual_seed(0)
    rng = random.Random(0)
    tests = [paper_train.random_string(rng) for _ in range(200)]
    model = paper.make_model(paper_train.VOCAB_SIZE, max_len=16, pad_id=paper_train.PAD, **paper_train.MODEL)
    paper_train.train(model, 300, rng, set(tests), log_every=300)
    return model.eval(), tests


def _heads_out(attn: paper.MultiHeadAttention, out: Tensor) -> Tensor:
    return attn.w_o(out.transpose(1, 2).flatten(2))  # (B, H, 1, D) -> (B, 1, C), then W^O


@torch.no_grad()
def cached_greedy(model: paper.Transformer, src: Tensor, max_new_tokens: int) -> list[str]:
    """greedy_decode with a cache: each step runs only the newest token through the decoder. Its keys and values
    are appended to each layer's, and its query attends over all of them; the encoder's keys and values are
    projected once. No causal mask is needed: the cache holds only earlier positions."""
    memory, src_mask = model.encode(src), paper.padding_mask(src, model.pad_id)
    layers = model.decoder.layers
    cross = [(layer.cross_attn.split_heads(layer.cross_attn.w_k(memory)),
              layer.cross_attn.split_heads(layer.cross_attn.w_v(memory))) for layer in layers]
    keys: list[Tensor | None] = [None] * len(layers)
    values: list[Tensor | None] = [None] * len(layers)
    out = torch.full((len(src), 1), paper_train.BOS)  # (B, 1)
    for t in range(max_new_tokens):
        x = model.embed(out[:, -1:]) + model.positions.pe[t]  # (B, 1, C): the newest token, at position t
        for i, layer in enumerate(layers):
            a = layer.self_attn
            k, v = a.split_heads(a.w_k(x)), a.split_heads(a.w_v(x))  # (B, H, 1, D)
            keys[i] = k if keys[i] is None else torch.cat([keys[i], k], dim=2)  # (B, H, t + 1, D)
            values[i] = v if values[i] is None else torch.cat([values[i], v], dim=2)
            x = layer.add_norm_1(x, _heads_out(a, paper.attention(a.split_heads(a.w_q(x)), keys[i], values[i])[0]))
            c = layer.cross_attn
            x = layer.add_norm_2(x, _heads_out(c, paper.attention(c.split_heads(c.w_q(x)), *cross[i], src_mask)[0]))
            x = layer.add_norm_3(x, layer.ffn(x))
        logits = (x @ model.embed.table.weight.T)[:, -1]  # (B, V)
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
        if (out == paper_train.EOS).any(dim=1).all():
            break
    return [paper_train.decode(row[1:]) for row in out.tolist()]


def exercise_11_1() -> None:
    """The cached decoder writes the same strings as greedy_decode, which runs the decoder over the whole prefix at
    every step: 1 + 2 + .. + 13 = 91 decoder positions for 13 tokens against 13."""
    model, tests = trained()
    src = paper_train.make_batch(tests)[0]
    start = time.perf_counter()
    again = paper_train.greedy_decode(model, src, max_new_tokens=13)
    middle = time.perf_counter()
    cached = cached_greedy(model, src, max_new_tokens=13)
    end = time.perf_counter()
    exact = sum(p == s for p, s in zip(cached, tests)) / len(tests)
    assert cached == again and exact > 0.9, exact
    print(f"Exercise 11.1: the cache writes the same {len(tests)} strings ({exact:.0%} copied exactly) in "
          f"{end - middle:.2f} s against {middle - start:.2f} s; decoder positions run: 13 against 91")


@torch.no_grad()
def exercise_11_2() -> None:
    """Force a wrong first letter and let greedy decoding go on: the model copies the rest of the string from the
    right places nearly always. It finds the source position to copy by counting positions (the positional
    encoding), not by matching the letter it has just written: one mistake does not derail it here."""
    model, tests = trained()
    src = paper_train.make_batch(tests)[0]
    memory = model.encode(src)
    first = src[:, :1]
    wrong = 3 + (first - 3 + 1) % len(paper_train.LETTERS)  # the next letter: a -> b, .., j -> a
    out = torch.cat([torch.full_like(first, paper_train.BOS), wrong], dim=1)  # <bos> and the forced letter
    for _ in range(13):
        out = torch.cat([out, model.decode(out, memory, src)[:, -1].argmax(-1, keepdim=True)], dim=1)
        if (out == paper_train.EOS).any(dim=1).all():
            break
    written = [paper_train.decode(row[1:]) for row in out.tolist()]
    rest = sum(w[1:] == s[1:] for w, s in zip(written, tests)) / len(tests)
    assert rest > 0.7, rest
    print(f"Exercise 11.2: after a forced wrong first letter the rest is copied exactly in {rest:.0%} of the strings "
          f"(e.g. {tests[0]} -> {written[0]})")


if __name__ == "__main__":
    exercise_11_1()
    exercise_11_2()
