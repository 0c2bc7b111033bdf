"""Answers a program can read: ``response_format`` (a JSON schema, any JSON object), ``tools`` and ``tool_choice``
(the model calls a function), checked into a ``Structure``: the grammar every answer must fit (``generation/
grammar.py``), bounded to the request's budget (``generation/json_budget.py``, said in the response's ``warning``).

Tool calls are written in the model's own format, as its chat template teaches it: Qwen3's (and Hermes')
``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` where the template holds ``<tool_call>``, else
Llama 3.1's bare ``{"name": ..., "parameters": {...}}``. Under ``tool_choice`` ``required`` or a named function the
grammar makes the answer that call (no text or thinking before it); under ``auto`` the model answers freely and a call
is read out of its text (``tool_calls``), text that does not parse staying text.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from scratchformer.app.serve.api_errors import ApiError
from scratchformer.errors import DataError
from scratchformer.generation.grammar import Grammar, GrammarError
from scratchformer.generation.json_budget import fit, fit_object, needed, schema_grammar_json

MAX_TOP_LOGPROBS = 20
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"


@dataclass(frozen=True)
class Structure:
    """What a request asks of its answers beyond text: a grammar (None: free text), the tools it offers and how
    calls are written (``tagged``: Qwen3's ``<tool_call>``), the log-probabilities it wants (None: none)."""

    grammar: Grammar | None = None
    warning: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tagged: bool = True
    calls: bool = False  # whether the answer is read for tool calls (tools given, tool_choice not "none")
    logprobs: int | None = None


def logprobs_asked(body: dict[str, Any], kind: str) -> int | None:
    """The alternatives a request asks for at each token (None: no log-probabilities)."""
    value = body.get("logprobs")
    if kind == "completion":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 5:
            raise ApiError(400, "'logprobs' must be an integer from 0 to 5 in a completion", "logprobs")
        return value
    top = body.get("top_logprobs")
    if value not in (None, True, False):
        raise ApiError(400, "'logprobs' must be true or false", "logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_LOGPROBS):
        raise ApiError(400, f"'top_logprobs' must be an integer from 0 to {MAX_TOP_LOGPROBS}", "top_logprobs")
    if top and not value:
        raise ApiError(400, "'top_logprobs' needs logprobs=true", "top_logprobs")
    return (top or 0) if value else None


def _response_format(body: dict[str, Any], budget: int) -> tuple[Grammar | None, str | None, str]:
    """A ``response_format``'s grammar (bounded to ``budget``), its warning, the text every answer holds."""
    spec = body.get("response_format")
    if spec is None or spec == {"type": "text"}:
        return None, None, ""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind == "json_object":
        lark, warning = fit_object(budget)
        return Grammar.lark(lark, "JSON object"), warning, '{}'
    if kind != "json_schema" or not isinstance(spec.get("json_schema"), dict):
        raise ApiError(400, "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                       "{\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\", \"strict\"}}",
                       "response_format")
    given = spec["json_schema"]
    schema = given.get("schema", {})
    if not isinstance(schema, dict):
        raise ApiError(400, "'response_format.json_schema.schema' must be a JSON object", "response_format")
    bounded, warning = fit(schema, budget)
    name = f"schema {given.get('name')!r}" if isinstance(given.get("name"), str) else "JSON schema"
    return Grammar.json_schema(bounded, name), warning, needed(bounded)


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools") or []
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str) for t in tools):
        raise ApiError(400, "'tools' must be a list of {\"type\": \"function\", \"function\": {\"name\", "
                       "\"description\", \"parameters\"}}", "tools")
    return tools


def _chosen(body: dict[str, Any], tools: list[dict[str, Any]]) -> str | None:
    """The tool choice: "none", "auto", "required", or a function's name."""
    choice = body.get("tool_choice", "auto" if tools else "none")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
        if name not in [t["function"]["name"] for t in tools]:
            raise ApiError(400, "'tool_choice' must name one of the tools", "tool_choice")
        return name
    if choice not in ("none", "auto", "required") or (choice == "required" and not tools):
        raise ApiError(400, "'tool_choice' must be none, auto, required (with tools) or {\"type\": \"function\", "
                       "\"function\": {\"name\"}}", "tool_choice")
    return choice


def _call_grammar(tools: list[dict[str, Any]], tagged: bool, budget: int) -> tuple[Grammar, str | None]:
    """The grammar of one call of one of ``tools``, its arguments bounded so that the whole call fits ``budget``."""
    fixed = len(f'{CALL_OPEN}\n{{"name": "", "arguments": }}\n{CALL_CLOSE}'.encode()) if tagged else 30
    longest_name = max(len(t["function"]["name"].encode()) for t in tools)
    room = budget - fixed - longest_name
    options, warnings = [], []
    for tool in tools:
        function = tool["function"]
        params = function.get("parameters") or {"type": "object", "properties": {}}
        bounded, warning = fit(params, room)
        warnings += [warning] if warning else []
        key = "arguments" if tagged else "parameters"
        options.append({"type": "object", "properties": {"name": {"const": function["name"]}, key: bounded},
                        "required": ["name", key], "additionalProperties": False})
    schema = schema_grammar_json(options[0] if len(options) == 1 else {"anyOf": options})
    body = f"%json {json.dumps(schema)}"
    lark = f'start: "{CALL_OPEN}\\n" call "\\n{CALL_CLOSE}"\ncall: {body}\n' if tagged else f"start: {body}\n"
    return Grammar.lark(lark, "tool call"), warnings[0] if warnings else None


def parse_structure(body: dict[str, Any], kind: str, model: Any, budget: int) -> Structure:
    """The ``Structure`` of a request whose answers may take ``budget`` tokens; an ``ApiError`` (400) for a format,
    a schema or tools that cannot be done here, naming the part."""
    logprobs = logprobs_asked(body, kind)
    tools = _tools(body) if kind == "chat" else []
    choice = _chosen(body, tools) if kind == "chat" else "none"
    tagged = model.template is not None and CALL_OPEN in model.template.jinja
    try:
        grammar, warning, texts = _response_format(body, budget)
        if tools and choice not in ("none", "auto"):
            if grammar is not None:
                raise ApiError(400, "give response_format or a tool_choice that forces a call, not both",
                               "response_format")
            wanted = tools if choice == "required" else [t for t in tools if t["function"]["name"] == choice]
            grammar, warning = _call_grammar(wanted, tagged, budget)
            texts = '{}": ' + (CALL_OPEN + CALL_CLOSE if tagged else "")
        if grammar is not None:
            model.vocabulary().check(grammar, texts)
    except GrammarError as err:
        param = "response_format" if body.get("response_format") else "tools"
        raise ApiError(400, f"the {param} cannot be done here: {err}", param) from None
    return Structure(grammar, warning, tools, tagged, bool(tools) and choice != "none", logprobs)


def tool_parts(message: dict[str, Any], calls: Any, i: int) -> dict[str, Any]:
    """An assistant's ``tool_calls`` (their arguments as the template reads them: a JSON text) or a tool's
    ``tool_call_id``, checked."""
    if message["role"] == "tool":
        return {"tool_call_id": str(message.get("tool_call_id", ""))}
    if not calls:
        return {}
    if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str)
            and isinstance(c["function"].get("arguments", ""), str) for c in calls):
        raise ApiError(400, f"messages[{i}].tool_calls must be a list of {{\"id\", \"type\": \"function\", "
                       "\"function\": {\"name\", \"arguments\"}}", f"messages[{i}].tool_calls")
    return {"tool_calls": [{"id": c.get("id", ""), "type": "function",
                            "function": {"name": c["function"]["name"], "arguments": c["function"].get("arguments")
                                         or "{}"}} for c in calls]}


def chat_ids(body: dict[str, Any], messages: list[dict[str, Any]], model: Any) -> list[int]:
    """The prompt's ids; the tools rendered by the model's chat template, or a 400 when it renders none."""
    tools = body.get("tools") or None
    uses_tools = tools or any(m["role"] == "tool" or m.get("tool_calls") for m in messages)
    assert model.template is not None
    if uses_tools and model.template.name != "chat":
        raise ApiError(400, f"{model.name}'s template ({model.template.name}) cannot render tools: it was not "
                       "tuned to call functions", "tools")
    try:
        ids = model.chat_ids(messages, tools if isinstance(tools, list) else None)
    except DataError as err:
        raise ApiError(400, str(err), "messages") from None
    if tools and isinstance(tools, list):
        names = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
        if not all(isinstance(n, str) and n in model.decode(ids) for n in names):
            raise ApiError(400, f"{model.name}'s chat template does not render tools (the functions' names are not "
                           "in its prompt)", "tools")
    return ids


def tool_calls(text: str, structure: Structure) -> tuple[str | None, list[dict[str, Any]]]:
    """The text before the calls and the calls in an answer (none: the whole text, and [])."""
    if not structure.calls:
        return text, []
    if structure.tagged:
        found = re.findall(re.escape(CALL_OPEN) + r"\s*(.*?)\s*" + re.escape(CALL_CLOSE), text, re.S)
        before = text.split(CALL_OPEN, 1)[0].strip()
    else:
        found, before = [text.strip()], ""
    calls = []
    names = {t["function"]["name"] for t in structure.tools}
    for raw in found:
        try:
            call = json.loads(raw)
        except ValueError:
            return text, []
        args = call.get("arguments", call.get("parameters")) if isinstance(call, dict) else None
        if not isinstance(args, dict) or call.get("name") not in names:
            return text, []
        calls.append({"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                      "function": {"name": call["name"], "arguments": json.dumps(args, ensure_ascii=False)}})
    return (before or None, calls) if calls else (text, [])


def logprobs_of(entries: list[Any], kind: str, decode: Any, start: int = 0) -> dict[str, Any]:
    """OpenAI's ``logprobs`` of an answer's tokens ``entries`` (``Choice.logprobs``: each token, its
    log-probability, its alternatives): a chat's ``content`` list, or a completion's four lists (``text_offset``
    counted from ``start``). An alternative the grammar forbade (-inf) is left out."""
    def text(token: int) -> str:
        return decode([token])

    if kind == "chat":
        return {"content": [{"token": text(t), "logprob": lp, "bytes": list(text(t).encode("utf-8")),
                             "top_logprobs": [{"token": text(a), "logprob": alp, "bytes": list(text(a).encode())}
                                              for a, alp in top if alp > float("-inf")]}
                            for t, lp, top in entries], "refusal": None}
    offsets, at = [], start
    for t, _, _ in entries:
        offsets.append(at)
        at += len(text(t))
    return {"tokens": [text(t) for t, _, _ in entries], "token_logprobs": [lp for _, lp, _ in entries],
            "top_logprobs": [{text(a): alp for a, alp in top if alp > float("-inf")} for _, _, top in entries],
            "text_offset": offsets}
