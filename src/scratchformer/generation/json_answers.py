"""An answer that fits a JSON schema, from Python: the decoding engine under the schema's grammar (``grammar.py``),
its strings, arrays and numbers bounded so that it ends within its budget (``json_budget.py``). ``scratchformer
generate --json-schema FILE`` asks through it; the server asks the same engine the same way.

    text, warning = generate_json(model, tokenizer, prompt_ids, {"type": "object", ...}, 120, temperature=0.8)
    json.loads(text)   # always parses, and fits the schema
"""

from __future__ import annotations

from typing import Any

from scratchformer.generation.engine import Engine
from scratchformer.generation.grammar import Grammar
from scratchformer.generation.json_budget import fit, needed
from scratchformer.generation.requests import Request, Sampling, Stop

__all__ = ["generate_json"]


def generate_json(model: Any, tokenizer: Any, prompt: list[int], schema: dict[str, Any], max_new_tokens: int, *,
                  temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
                  seed: int | None = None) -> tuple[str, str | None]:
    """The answer to ``prompt`` (token ids) that fits ``schema`` (a JSON schema), and the warning that says how the
    schema was bounded to ``max_new_tokens`` (capped by the model's window; None if it needed no bound).
    ``GrammarError`` (one line) for a schema that cannot be done: its shortest answer does not fit, the library
    cannot compile a part of it, the vocabulary cannot write it."""
    budget = min(max_new_tokens, model.config.max_len - len(prompt))
    bounded, warning = fit(schema, budget)
    engine = Engine(model, tokenizer, max_rows=1)
    grammar = Grammar.json_schema(bounded)
    engine.vocabulary().check(grammar, needed(bounded))
    request = Request(prompt, budget, Sampling(temperature, top_p, top_k, seed), Stop(frozenset(tokenizer.eos_ids)),
                      grammar=grammar)
    return engine.run([request])[0].choices[0].text, warning
