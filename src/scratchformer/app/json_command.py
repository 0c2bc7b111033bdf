"""``scratchformer generate --json-schema FILE``: the prompt (or the instruction, in the model's template) answered
with JSON that fits the schema (``generation.json_answers.generate_json``); how the schema was bounded to the budget
goes to standard error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError, DataError
from scratchformer.extras import require
from scratchformer.tasks.inference import chat_prompt_ids, encode_checked, template_of
from scratchformer.tasks.inference import require as require_output


def generate_json_text(ckpt: Any, args: Any, sampling: dict[str, Any]) -> str:
    """The answer's JSON text; one-line errors for a file that is no JSON schema or a schema that cannot be done."""
    require("llguidance", "serve")
    from scratchformer.data.templates import Template, as_messages
    from scratchformer.generation.grammar import GrammarError
    from scratchformer.generation.json_answers import generate_json

    require_output(ckpt, "generate", lambda f: f.generates)
    path = Path(args.json_schema)
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"--json-schema {path}: not a JSON file ({err})") from None
    if not isinstance(schema, dict):
        raise ConfigError(f"--json-schema {path}: a JSON schema is an object, {{\"type\": ...}}")
    tok = ckpt.tokenizer
    if args.instruction is not None:
        record = {"instruction": args.instruction, "input": args.instruction_input, "output": ""}
        ids = chat_prompt_ids(ckpt, as_messages(record)[:-1], template_of(ckpt) or Template("alpaca"), record)
    else:
        ids = encode_checked(tok, args.prompt)
    greedy = sampling.pop("greedy")
    temperature = 0.0 if greedy else sampling.pop("temperature")
    sampling.pop("temperature", None)
    try:
        text, warning = generate_json(ckpt.model, tok, ids, schema, args.max_new_tokens, temperature=temperature,
                                      **sampling)
    except GrammarError as err:
        raise DataError(f"--json-schema {path}: {err}") from None
    if warning:
        print(f"note: {warning}", file=sys.stderr)
    return text
