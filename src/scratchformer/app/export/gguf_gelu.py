"""Whether llama.cpp's GELU decodes as this model's: llama.cpp's gpt2 computes GELU's tanh approximation, so a GPT
trained with the exact GELU (``activation=gelu``, the default here) is exported only if both give the same greedy
tokens, on seeded prompts and, for a model that follows instructions, on an instruction asked in its chat template
(what a llama.cpp user sends it)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from scratchformer.interop.traced import ExportError
from scratchformer.models import GPT
from scratchformer.nn.feedforward import FeedForward

__all__ = ["gelu_check", "instruction_ids"]


def instruction_ids(template: str, tokenizer: object) -> list[int]:
    """The ids of an instruction as the chat template asks it (the template around an empty instruction, whose text
    every tokenizer that carries the template writes): what a llama.cpp user sends."""
    from scratchformer.data.templates import Template, special_texts

    text = Template("chat", template, "the export").prompt([{"role": "user", "content": ""}], None,
                                                           special_texts(tokenizer))
    return tokenizer.encode(text)  # type: ignore[attr-defined]


def gelu_check(model: GPT, asked: Sequence[list[int]] = (), prompts: int = 4, new_tokens: int = 64) -> str:
    """Greedy tokens with exact GELU against llama.cpp's tanh approximation, on seeded prompts of 8 tokens and on
    ``asked``, the prompts of a model that follows instructions (an instruction in its template)."""
    from scratchformer.generation import generate

    tanh = copy.deepcopy(model).eval()
    for m in tanh.modules():
        if isinstance(m, FeedForward):
            m.activation = "gelu_tanh"
    cfg = model.config
    n = max(1, min(new_tokens, cfg.max_len - 8))
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(min(4, cfg.vocab_size - 1), cfg.vocab_size, (prompts, min(8, cfg.max_len - 1)), generator=gen)
    device = next(model.parameters()).device
    exact, approx = generate(model, ids.to(device), n), generate(tanh, ids.to(device), n)
    same = torch.equal(exact, approx)
    for ids in asked:  # each alone: its own length, the new tokens the window leaves
        prompt = torch.tensor([ids[-(cfg.max_len - 1):]], device=device)
        more = max(1, min(new_tokens, cfg.max_len - prompt.size(1)))
        same = same and torch.equal(generate(model, prompt, more), generate(tanh, prompt, more))
    if not same:
        raise ExportError("activation=gelu (exact) is not what llama.cpp computes (GELU's tanh approximation), and the "
                          "greedy tokens of this model differ between the two: train with activation=gelu_tanh")
    asked_too = f" and {len(asked)} instruction in its chat template" if asked else ""
    return (f"activation=gelu written as llama.cpp's tanh GELU: the same greedy tokens on {prompts} prompts x {n}"
            + asked_too)
