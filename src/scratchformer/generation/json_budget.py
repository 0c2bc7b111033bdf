"""An answer under a JSON schema always ends within its budget: the schema's strings, arrays and numbers bounded so
that the longest text the grammar allows fits the tokens left.

Every token the grammar allows writes at least one byte (a special token writes none and is never allowed), so an
answer of at most B bytes takes at most B tokens. ``fit(schema, budget)`` counts a schema's shortest and longest
answers in bytes, with the separators the grammar writes (``", "``, ``": "``, no free whitespace) and a character at
its widest (4 bytes), and finds the largest ``level`` at which, with

    strings        at most ``level`` characters (``maxLength``; the schema's own, where smaller)
    arrays         at most ``minItems + level // 4`` items
    integers       at most ``1 + level // 4`` digits (15 at most); numbers as many, and two decimals (``multipleOf``)

the longest answer fits ``budget`` bytes. A schema whose shortest answer does not fit is refused (``GrammarError``),
as is one that cannot be bounded so (a recursive ``$ref``, ``additionalProperties`` with a schema: keys of any
length). An object's ``additionalProperties`` is false unless given (as OpenAI's strict mode asks).

``JSON_OBJECT`` (``response_format: json_object``) is any JSON object, bounded the same way: a Lark grammar of at
most ``1 + level // 8`` keys of ``level`` characters, each value a string, a number, a boolean or null, or an array of
those.
"""

from __future__ import annotations

import json
from typing import Any

from scratchformer.generation.grammar import JSON_OPTIONS, GrammarError

__all__ = ["fit", "fit_object", "needed", "size"]

WIDEST = 4  # bytes of a character at most (UTF-8; an escape is 2 bytes for a 1-byte character)
MAX_LEVEL = 4096
SCALARS = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]


def _dump(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).encode("utf-8"))


class _Bounder:
    """A schema rewritten with the bounds of one ``level``, and its shortest and longest answers in bytes."""

    def __init__(self, root: dict[str, Any], level: int, optional: bool = True) -> None:
        self.defs = {**root.get("definitions", {}), **root.get("$defs", {})} if isinstance(root, dict) else {}
        self.level, self.optional = level, optional

    def walk(self, schema: Any, depth: int = 0) -> tuple[Any, int, int]:
        """(bounded schema, shortest bytes, longest bytes)."""
        if depth > 32:
            raise GrammarError("the schema nests too deep (or refers to itself) to be bounded to a budget")
        if schema is True or schema == {}:
            schema = {"anyOf": SCALARS}
        if not isinstance(schema, dict):
            raise GrammarError(f"a schema must be an object, got {json.dumps(schema)[:40]}")
        if "$ref" in schema:
            name = str(schema["$ref"]).rsplit("/", 1)[-1]
            if name not in self.defs:
                raise GrammarError(f"$ref {schema['$ref']} names no definition of this schema")
            return self.walk({**self.defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}, depth + 1)
        if "const" in schema:
            return schema, _dump(schema["const"]), _dump(schema["const"])
        if "enum" in schema:
            sizes = [_dump(v) for v in schema["enum"]] or [0]
            return schema, min(sizes), max(sizes)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                parts = [self.walk({**{k: v for k, v in schema.items() if k != key}, **o}, depth + 1)
                         for o in schema[key]]
                return ({key: [p[0] for p in parts]}, min(p[1] for p in parts), max(p[2] for p in parts))
        if "allOf" in schema:
            raise GrammarError("allOf cannot be bounded to a budget here: write its parts in one schema")
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.walk({"anyOf": [{**schema, "type": t} for t in kind]}, depth + 1)
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else None
        if kind is None:
            return self.walk({**schema, "anyOf": SCALARS}, depth + 1)
        method = getattr(self, f"_{kind}", None)
        if method is None:
            raise GrammarError(f"type {json.dumps(kind)} is not a JSON schema type")
        return method(schema, depth)

    def _string(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        low = int(s.get("minLength", 0))
        high = min(int(s.get("maxLength", MAX_LEVEL)), max(low, self.level))
        return {**s, "maxLength": high}, 2 + low, 2 + WIDEST * high

    def _integer(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        return self._number(s, depth, decimals=False)

    def _number(self, s: dict[str, Any], depth: int, decimals: bool = True) -> tuple[Any, int, int]:
        most = 10 ** min(15, 1 + self.level // 4) - 1
        low = max(float(s.get("minimum", -most)), -most)
        high = min(float(s.get("maximum", most)), most)
        if low > high:
            raise GrammarError(f"a number between {s.get('minimum')} and {s.get('maximum')} cannot be written in "
                               f"{1 + self.level // 4} digits")
        out = {**s, "minimum": int(low) if float(low).is_integer() else low,
               "maximum": int(high) if float(high).is_integer() else high}
        extra = 0
        if decimals and s.get("type") == "number":
            out.setdefault("multipleOf", 0.01)
            extra = 1 + len(repr(float(out["multipleOf"])).split(".")[-1]) if out["multipleOf"] < 1 else 0
        width = max(len(str(int(abs(low)))) + (low < 0), len(str(int(abs(high)))) + (high < 0))
        return out, 1, width + extra

    def _boolean(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        return s, 4, 5

    def _null(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        return s, 4, 4

    def _array(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        prefix = [self.walk(p, depth + 1) for p in s.get("prefixItems", [])]
        items = None if s.get("items", True) is False else self.walk(s.get("items", True), depth + 1)
        low = int(s.get("minItems", 0))
        high = min(int(s.get("maxItems", MAX_LEVEL)), low + self.level // 4)
        high = high if items is not None else min(high, len(prefix))
        parts = prefix + [items] * max(0, high - len(prefix)) if items is not None else prefix

        def bytes_of(n: int, which: int) -> int:
            return 2 + sum(p[which] for p in parts[:n]) + 2 * max(0, n - 1)

        out = {**s, "maxItems": high, **({"items": items[0]} if items is not None else {})}
        if prefix:
            out["prefixItems"] = [p[0] for p in prefix]
        return out, bytes_of(low, 1), bytes_of(high, 2)

    def _object(self, s: dict[str, Any], depth: int) -> tuple[Any, int, int]:
        if s.get("additionalProperties", False) is not False:
            raise GrammarError("additionalProperties other than false cannot be bounded to a budget (keys of any "
                               "length): list the properties")
        required = set(s.get("required", []))
        props = {k: self.walk(v, depth + 1) for k, v in s.get("properties", {}).items()
                 if self.optional or k in required}
        missing = sorted(required - set(props))
        if missing:
            raise GrammarError(f"required property {missing[0]!r} is not among the properties")
        entries = {k: (_dump(k) + 2 + p[1], _dump(k) + 2 + p[2]) for k, p in props.items()}
        short = [entries[k][0] for k in props if k in required]
        long = [entries[k][1] for k in props]
        out = {**s, "properties": {k: p[0] for k, p in props.items()}, "additionalProperties": False}
        return (out, 2 + sum(short) + 2 * max(0, len(short) - 1), 2 + sum(long) + 2 * max(0, len(long) - 1))


def size(schema: dict[str, Any], level: int) -> tuple[int, int]:
    """(shortest, longest) answer of ``schema`` in bytes, bounded at ``level``."""
    _, short, long = _Bounder(schema, level).walk(schema)
    return short, long


def fit(schema: dict[str, Any], budget: int) -> tuple[dict[str, Any], str | None]:
    """``schema`` bounded so that its longest answer takes at most ``budget`` tokens, and a warning saying how
    (None when no bound was needed); ``GrammarError`` when even its shortest answer does not fit."""
    free = _Bounder(schema, MAX_LEVEL).walk(schema)
    if free[1] > budget:
        raise GrammarError(f"the schema's shortest answer takes up to {free[1]} tokens, more than the {budget} "
                           "left (max_tokens, the model's window): raise max_tokens or shorten the prompt")
    optional = True
    level = _largest(lambda lv: _Bounder(schema, lv).walk(schema)[2] <= budget)
    if level is None:  # the optional properties left out: the shortest answer fits, so level 0 does
        optional = False
        level = _largest(lambda lv: _Bounder(schema, lv, optional).walk(schema)[2] <= budget) or 0
    bounded = _Bounder(schema, level, optional).walk(schema)[0]
    root = {k: v for k, v in schema.items() if k in ("$defs", "definitions")} if isinstance(schema, dict) else {}
    out = {**bounded, **root}
    if json.dumps(_Bounder(schema, MAX_LEVEL).walk(schema)[0], sort_keys=True) == json.dumps(bounded, sort_keys=True):
        return out, None
    return out, (f"to end within {budget} tokens, the answer's strings are at most {level} characters, its arrays at "
                 f"most {level // 4} items beyond their minimum, its numbers at most {min(15, 1 + level // 4)} digits "
                 "(and two decimals) where the schema sets no smaller bound"
                 + ("" if optional else ", and its optional properties are left out"))


def fit_object(budget: int) -> tuple[str, str]:
    """``response_format: json_object``: a Lark grammar of JSON objects whose longest fits ``budget`` tokens, and the
    warning that says how they are bounded."""
    level = _largest(lambda lv: _object_longest(lv) <= budget)
    if level is None:
        raise GrammarError(f"a JSON object takes at least 2 tokens; {budget} are left: raise max_tokens")
    keys, chars, digits = 1 + level // 8, level, min(15, 1 + level // 4)
    string = rf'/"([^"\\\x00-\x1f]|\\["\\nrtbf]){{0,{chars}}}"/'
    number = rf"/-?(0|[1-9][0-9]{{0,{digits - 1}}})(\.[0-9]{{1,2}})?/"
    more = f"{{0,{keys - 1}}}"
    pairs, scalars = (f'(", " pair){more}', f'(", " scalar){more}') if keys > 1 else ("", "")
    lark = (f'start: "{{" (pair {pairs})? "}}"\n'
            f'pair: STR ": " value\n'
            f'value: STR | NUM | "true" | "false" | "null" | "[" (scalar {scalars})? "]"\n'
            f"scalar: STR | NUM | \"true\" | \"false\" | \"null\"\n"
            f"STR: {string}\nNUM: {number}\n")
    warning = (f"to end within {budget} tokens, the object has at most {keys} keys, its strings at most {chars} "
               f"characters, its numbers at most {digits} digits")
    return lark, warning


def _object_longest(level: int) -> int:
    keys, chars, digits = 1 + level // 8, level, min(15, 1 + level // 4)
    scalar = max(2 + WIDEST * chars, digits + 4)
    value = max(scalar, 2 + keys * scalar + 2 * (keys - 1))
    return 2 + keys * (2 + WIDEST * chars + 2 + value) + 2 * (keys - 1)


def _largest(fits: Any) -> int | None:
    """The largest level in 0..MAX_LEVEL for which ``fits(level)`` (monotone), or None."""
    if not fits(0):
        return None
    low, high = 0, MAX_LEVEL
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low


def schema_grammar_json(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the grammar's JSON options, for ``%json`` inside a Lark grammar (a tool call's arguments)."""
    return {**schema, "x-guidance": JSON_OPTIONS}


def needed(schema: Any) -> str:
    """Characters every answer of ``schema`` writes: the punctuation of its objects and arrays and its required
    keys (a vocabulary without one of them cannot write any answer)."""
    out: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                out.append('{}": ' + "".join(k for k in node.get("properties", {}) if k in node.get("required", [])))
                out.append("," if len(node.get("required", [])) > 1 else "")
            if node.get("type") == "array" and node.get("minItems", 0):
                out.append("[]")
            for key, value in node.items():
                if key not in ("enum", "const"):
                    visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return "".join(dict.fromkeys("".join(out)))
