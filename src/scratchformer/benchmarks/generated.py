"""A generation benchmark's answers, generated as lm-evaluation-harness's ``HFLM.generate_until`` generates them.

- The prompt: the plain text, or in the chat form the conversation rendered by the model's own template
  (``inference.chat_prompt``, the one helper that ``generate --instruction`` uses too).
- Its tokens (``tok_batch_encode``): as the tokenizer encodes by default (a Llama 3 tokenizer adds its
  begin-of-text token), unless the text already starts with that token's text (a chat template that writes it);
  then cut from the left to ``window - max_new_tokens`` tokens.
- The answer: greedy, until the model's end-of-text token, a stop sequence, or ``max_new_tokens`` (the harness's 256;
  a window too small for that gives half of itself to the answer, said in the results); decoded without special
  tokens and cut before the first stop sequence (the harness adds the end-of-text token's text to them).

Decoded by the decoding engine (``generation/engine.py``): an answer leaves the batch as soon as it ends, and the
next waiting prompt takes its row.
Decoding does not clean up spaces: ``transformers`` 5 skips that clean-up for BPE tokenizers (GPT-2, Llama, Qwen3).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from tqdm.auto import tqdm

from scratchformer.benchmarks.gsm8k import GSM8K_STOP, MAX_NEW_TOKENS, Problem
from scratchformer.checkpoints import Checkpoint
from scratchformer.data.templates import Template
from scratchformer.generation.engine import Engine
from scratchformer.generation.requests import Request, Stop
from scratchformer.tasks.inference import chat_prompt, template_of
from scratchformer.tokenizers import Tokenizer

__all__ = ["answer_problems", "encode_prompt", "prompt_texts"]


def prompt_texts(ckpt: Checkpoint, problems: Sequence[Problem], chat: bool) -> list[str]:
    """What the model reads for each problem: its plain text, or its messages in the model's chat template (Alpaca's
    for a model tuned to none, asked with ``--chat yes``)."""
    template = (template_of(ckpt) or Template("alpaca")) if chat else None
    return [chat_prompt(ckpt, p.messages, template) if chat else p.text for p in problems]


def uses_chat(ckpt: Checkpoint, setting: str = "auto") -> bool:
    """Whether problems are asked in the chat form: ``auto``, when the model has a template to answer in (an
    instruction-tuned run, a folder with a chat template); ``yes``; ``no``."""
    return template_of(ckpt) is not None if setting == "auto" else setting == "yes"


def encode_prompt(tokenizer: Tokenizer, text: str) -> list[int]:
    """The harness's ``tok_batch_encode`` of one text: the tokenizer's default special tokens, none when the text
    already begins with the begin-of-text token's text."""
    bos = tokenizer.id_to_token(tokenizer.bos_id) if tokenizer.bos_id is not None else None
    return tokenizer.encode_bare(text) if bos and text.startswith(bos) else tokenizer.encode(text)


def answer_problems(ckpt: Checkpoint, texts: Sequence[str], *, max_new_tokens: int = MAX_NEW_TOKENS,
                    max_tokens: int = 16384, stops: Sequence[str] = GSM8K_STOP) -> tuple[list[str], dict[str, Any]]:
    """The model's greedy answer to each prompt text (cut before the first stop sequence), and what was not as the
    harness would have it: ``truncated`` prompts, prompts with ``unknown_characters`` (read as the unknown token of a
    vocabulary that lacks them), ``new_tokens`` (the answers' budget)."""
    model, tokenizer = ckpt.model, ckpt.tokenizer
    assert tokenizer is not None
    window = model.config.max_len
    new = max_new_tokens if window > max_new_tokens else window // 2
    eos = tokenizer.id_to_token(tokenizer.eos_id)
    stops = [*stops, eos] if eos not in stops else list(stops)
    prompts, truncated, unknown = [], 0, 0
    unk = tokenizer.unknown_id
    for text in texts:
        ids = encode_prompt(tokenizer, text)
        truncated += len(ids) > window - new
        prompts.append(ids[-(window - new):])
        unknown += unk is not None and unk in prompts[-1]

    stop = Stop(frozenset([tokenizer.eos_id]), tuple(stops))  # the harness's own: the first end-of-text id only
    longest = max((len(p) for p in prompts), default=0) + new
    rows = max(1, min(len(prompts), max_tokens // longest))  # about max_tokens positions in the pool at most
    bar = tqdm(total=len(prompts), unit="problem", file=sys.stderr, disable=None, leave=False, desc="answering")
    done = Engine(model, tokenizer, max_rows=rows).run([Request(p, new, stop=stop) for p in prompts], bar.update)
    bar.close()
    answers = [r.choices[0].text for r in done]
    return answers, {"truncated": truncated, "unknown_characters": unknown, "new_tokens": new}
