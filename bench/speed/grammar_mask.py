"""What constrained decoding costs per token, and what it buys (RESULTS.md, "Answers a program can read").

    python bench/speed/grammar_mask.py [--tokens 96] [--instruct RUN] [--out FILE.json]

1. The libraries: the mask of the test schema (``tests/test_serve_structured.SCHEMA``) for a byte-level BPE of about
   50,000 tokens (trained here on Tiny Shakespeare, the table padded to GPT-2's 50,257), walked through random
   allowed tokens: compile time and microseconds a token, for ``llguidance`` and ``outlines-core`` (whichever are
   installed).
2. The engine: tokens a second of GPT-2 small's shape (random weights, 124M parameters) and of the tiny instruction
   GPT, free and under the schema, one answer and 16 at once.
3. What the grammar buys: of 50 free answers at temperature 1 of an instruction-tuned GPT asked for the schema's JSON,
   how many parse and validate (every one does under the grammar).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from scratchformer.generation.engine import Engine  # noqa: E402
from scratchformer.generation.grammar import Grammar, Vocabulary  # noqa: E402
from scratchformer.generation.json_budget import fit  # noqa: E402
from scratchformer.generation.requests import Request, Sampling, Stop  # noqa: E402
from scratchformer.models import GPT  # noqa: E402
from scratchformer.nn.config import ModelConfig  # noqa: E402
from scratchformer.tokenizers.bpe import BPETokenizer  # noqa: E402

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "color": {"enum": ["red", "green", "blue"]},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"], "additionalProperties": False},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "color", "address", "tags"], "additionalProperties": False}
DATA = Path(os.environ.get("SCRATCHFORMER_DATA", ROOT.parent / "shared" / "data"))


def libraries(tok: BPETokenizer, n_vocab: int, budget: int, steps: int = 300) -> dict:
    """Compile time and mask time a token of each library installed, walking random allowed tokens."""
    schema, _ = fit(SCHEMA, budget)
    out = {}
    t = time.perf_counter()
    vocabulary = Vocabulary(tok, n_vocab, tok.eos_ids)
    out["llguidance_vocabulary_s"] = time.perf_counter() - t
    t = time.perf_counter()
    grammar = Grammar.json_schema(schema)
    matcher = vocabulary.matcher(grammar)
    out["llguidance_compile_ms"] = 1000 * (time.perf_counter() - t)
    out["llguidance_mask_us"] = _walk(lambda: matcher.allowed(), matcher.advance, lambda: matcher.stopped,
                                      vocabulary.matcher, grammar, steps)
    try:
        from outlines_core import Guide, Index
        from outlines_core import Vocabulary as OVocabulary
        from outlines_core.json_schema import build_regex_from_schema
    except ImportError:
        return out
    own = tok.token_bytes()
    table: dict[bytes, list[int]] = {}
    for i, b in enumerate(own):
        if b and i not in tok.eos_ids:
            table.setdefault(b, []).append(i)
    t = time.perf_counter()
    index = Index(build_regex_from_schema(json.dumps(schema), r"[ ]?"), OVocabulary(tok.eos_ids[0], table))
    out["outlines_core_compile_ms"] = 1000 * (time.perf_counter() - t)
    guide = Guide(index)
    out["outlines_core_mask_us"] = _walk(lambda: torch.tensor(guide.get_tokens()), guide.advance,
                                         guide.is_finished, lambda g: guide.reset(), None, steps)
    return out


def _walk(mask, advance, stopped, restart, grammar, steps: int) -> float:
    """Microseconds a mask takes, over ``steps`` random allowed tokens (restarting at each answer's end)."""
    rng, spent, done = random.Random(0), 0.0, 0
    while done < steps:
        t = time.perf_counter()
        allowed = mask()
        spent += time.perf_counter() - t
        done += 1
        ids = allowed.nonzero()[:, 0].tolist() if allowed.dtype == torch.bool else allowed.tolist()
        token = rng.choice(ids)
        if token in (1, 2) or stopped():
            restart(grammar)
            continue
        advance(token)
        if stopped():
            restart(grammar)
    return 1e6 * spent / done


def engine_rate(model: GPT, tok, prompt: list[int], tokens: int, rows: int, grammar: Grammar | None) -> float:
    """Tokens a second of ``rows`` answers of ``tokens`` tokens (no stop id: the budget ends them)."""
    engine = Engine(model, tok, max_rows=rows)
    if grammar is not None:
        engine.vocabulary()
    # greedy: under the grammar, the answer of a random model runs to the grammar's end or the budget
    request = Request(prompt, tokens, Sampling(0.0), Stop(), n=rows, grammar=grammar)
    t = time.perf_counter()
    engine.run([request])
    return request.generated / (time.perf_counter() - t)


def rates(model: GPT, tok, prompt: list[int], tokens: int) -> dict:
    schema, _ = fit(SCHEMA, tokens)
    grammar = Grammar.json_schema(schema)
    out = {}
    engine_rate(model, tok, prompt, 8, 2, grammar)  # warm up (the first steps of a process are slower)
    for rows in (1, 16):
        free = max(engine_rate(model, tok, prompt, tokens, rows, None) for _ in range(2))
        held = max(engine_rate(model, tok, prompt, tokens, rows, grammar) for _ in range(2))
        out[f"{rows}"] = {"free_tokens_per_s": round(free, 1), "grammar_tokens_per_s": round(held, 1),
                          "cost_ms_per_token": round(1000 * (1 / held - 1 / free), 3)}
    return out


def share_that_parses(run: Path, answers: int = 50) -> dict:
    """Of ``answers`` free answers of the instruction run asked for the schema's JSON, how many validate."""
    import jsonschema

    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.tasks.inference import chat_prompt_ids, template_of

    ckpt = load_checkpoint(run)
    question = "Answer in JSON with name, age, color (red, green or blue), address {city} and tags: " + \
        json.dumps(SCHEMA)
    ids = chat_prompt_ids(ckpt, [{"role": "user", "content": question}], template_of(ckpt))
    budget = min(160, ckpt.model_config.max_len - len(ids))
    schema, _ = fit(SCHEMA, budget)
    counts = {}
    for name, grammar in (("free", None), ("grammar", Grammar.json_schema(schema))):
        request = Request(ids, budget, Sampling(1.0, seed=0), Stop(frozenset(ckpt.tokenizer.eos_ids)), n=answers,
                          grammar=grammar)
        Engine(ckpt.model, ckpt.tokenizer, max_rows=answers).run([request])
        good = 0
        for choice in request.choices:
            try:
                jsonschema.validate(json.loads(choice.text), SCHEMA)
                good += 1
            except (ValueError, jsonschema.ValidationError):
                pass
        counts[name] = good / answers
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--instruct", help="an instruction run (Alpaca's template, a BPE) for part 3")
    parser.add_argument("--out", help="also write the numbers to this JSON file")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    text = (DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")
    tok = BPETokenizer.train([text[i:i + 10_000] for i in range(0, len(text), 10_000)], 50_000, min_frequency=1)
    result = {"vocab_trained": tok.vocab_size, "libraries": libraries(tok, 50_257, args.tokens)}
    print(json.dumps(result), flush=True)
    gpt2 = GPT(ModelConfig(arch="gpt", vocab_size=50_257, d_model=768, n_heads=12, n_layers=12, d_ff=3072,
                           max_len=1024))
    prompt = tok.encode("ROMEO: answer in JSON.")
    result["gpt2_small_shape"] = rates(gpt2, tok, prompt, args.tokens)
    print(json.dumps(result), flush=True)
    if args.instruct:
        from scratchformer.checkpoints import load_checkpoint

        ckpt = load_checkpoint(args.instruct)
        result["instruct_gpt"] = rates(ckpt.model, ckpt.tokenizer, ckpt.tokenizer.encode("Add 1 and 2."),
                                       args.tokens)
        result["share_valid"] = share_that_parses(Path(args.instruct))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
