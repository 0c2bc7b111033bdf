"""OpenAI's HTTP API as this server speaks it: a request body checked field by field into an ``Ask`` (or refused with
an ``ApiError``, OpenAI's error form), and the answers and stream chunks in OpenAI's form.

What a request may set: ``max_tokens`` (``max_completion_tokens`` for a chat; capped by the model's window, and the
answer says so in ``warning``), ``temperature`` (0 to 2; 0 is greedy), ``top_p``, ``top_k``, ``stop`` (up to four
texts), ``seed``, ``stream`` (with ``stream_options.include_usage``), ``n`` (1 to ``MAX_N`` answers to the prompt,
which is read once; with a ``seed``, answer i draws from a generator seeded from the seed and i: the answers differ
and the response is reproducible); a completion also ``echo``; ``response_format``, ``tools``, ``tool_choice`` and
``logprobs`` (``top_logprobs`` in a chat) as ``structured.py`` reads them. Fields OpenAI defines that would change the
answer and are not done here (penalties, a logit bias, audio, web search) are accepted at the values that change
nothing and refused otherwise, naming the field (a value is neutral only in its own JSON type); fields that change
nothing here are accepted and ignored (``IGNORED``: ``user``, ``store``, ``metadata``, ``reasoning_effort``,
``verbosity``, ``prompt_cache_key``, ``safety_identifier``, ... and ``stream_options.include_obfuscation``); an
unknown field is refused, as OpenAI refuses it.
``model`` may be any name: one model is served, and answers carry its own name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from scratchformer.app.serve.api_errors import ApiError
from scratchformer.app.serve.model import ServedModel
from scratchformer.app.serve.structured import Structure, chat_ids, parse_structure, tool_calls, tool_parts
from scratchformer.data.messages import MessageError, chat_messages
from scratchformer.errors import DataError
from scratchformer.generation.requests import Sampling

MAX_STOPS, MAX_STOP_CHARS = 4, 200
MAX_N = 8  # the most answers one request may ask for (n); at most the server's --max-batch too
_COMMON = {"model", "max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "stream", "stream_options", "n",
           "user", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs"}
# fields the current ``openai`` client sends that change nothing here: accepted, whatever their value, and ignored
IGNORED = {"user", "store", "metadata", "service_tier", "parallel_tool_calls", "reasoning_effort", "verbosity",
           "prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "safety_identifier", "prediction"}
FIELDS = {"chat": _COMMON | IGNORED | {"messages", "max_completion_tokens", "top_logprobs", "response_format", "tools",
                                      "tool_choice", "functions", "function_call", "modalities", "audio",
                                      "web_search_options", "moderation"},
          "completion": _COMMON | {"prompt", "echo", "suffix", "best_of", "response_format"}}
# a field -> the values that leave the answer as it is (any other is refused: not done here); a value is neutral when
# it is one of these and of its JSON type (true is not 1, 0 is not false)
NEUTRAL = {"frequency_penalty": (0, 0.0, None), "presence_penalty": (0, 0.0, None), "logit_bias": (None, {}),
           "functions": (None, []), "suffix": (None, ""), "best_of": (None, 1), "function_call": (None, "none", "auto"),
           "modalities": (None, ["text"]), "audio": (None,), "web_search_options": (None,), "moderation": (None,)}
STREAM_OPTIONS = ("include_usage", "include_obfuscation")  # the second ignored: no one watches a loopback's sizes


def as_json(value: Any, most: int = 40) -> str:
    """A value as JSON writes it (``false``, ``null``), cut to ``most`` characters, for an error message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= most else text[:most] + "..."


def _neutral(value: Any, options: tuple[Any, ...]) -> bool:
    return any(type(value) is type(option) and value == option for option in options)


@dataclass(frozen=True)
class Ask:
    """A checked request: the prompt's ids, how many tokens at most, how to pick them, when to stop, how to answer."""

    kind: str  # "chat" or "completion"
    ids: list[int]
    max_tokens: int
    sampling: Sampling
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    echo: str = ""  # a completion's prompt text, written before its answer (echo=true)
    warning: str | None = None
    n: int = 1  # how many answers
    structure: Structure = Structure()  # a grammar, tools, log-probabilities (``structured.py``)


def _number(body: dict[str, Any], key: str, low: float, high: float, *, integer: bool = False) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise ApiError(400, f"'{key}' must be {'an integer' if integer else 'a number'}, got {as_json(value)}", key)
    if not low <= value <= high:
        raise ApiError(400, f"'{key}' must be between {low:g} and {high:g}, got {value}", key)
    return value


def _check_fields(body: Any, kind: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS[kind])
    if unknown:
        raise ApiError(400, f"unrecognized request argument supplied: {unknown[0]}", unknown[0])
    for key, neutral in NEUTRAL.items():
        if key in body and not _neutral(body[key], neutral):
            raise ApiError(400, f"'{key}' is not supported by this server (send {as_json(neutral[-1])} or leave it "
                           "out)", key)
    if not isinstance(body.get("model", ""), str):
        raise ApiError(400, "'model' must be a string", "model")
    for key in ("stream", "echo"):
        if not isinstance(body.get(key, False), bool):
            raise ApiError(400, f"'{key}' must be true or false", key)
    options = body.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not set(options) <= set(STREAM_OPTIONS)
                                or not all(isinstance(options.get(k, False), bool) for k in STREAM_OPTIONS)):
        raise ApiError(400, "'stream_options' must be {\"include_usage\": true|false} (and include_obfuscation, "
                       "ignored)", "stream_options")
    if options is not None and not body.get("stream"):
        raise ApiError(400, "'stream_options' goes with stream=true", "stream_options")
    return body


def _sampling(body: dict[str, Any]) -> Sampling:
    temperature = _number(body, "temperature", 0, 2)
    top_p = _number(body, "top_p", 0, 1)
    if top_p == 0:
        raise ApiError(400, "'top_p' must be above 0", "top_p")
    top_k = _number(body, "top_k", -1, 1 << 31, integer=True)
    seed = _number(body, "seed", -(1 << 63), (1 << 64) - 1, integer=True)
    return Sampling(1.0 if temperature is None else float(temperature), top_p, top_k if top_k and top_k > 0 else None,
                    None if seed is None else seed % (1 << 63))


def _n(body: dict[str, Any]) -> int:
    n = _number(body, "n", 1, MAX_N, integer=True)
    return 1 if n is None else n


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if stop is not None else []
    if (not isinstance(stops, list) or len(stops) > MAX_STOPS
            or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stops)):
        raise ApiError(400, f"'stop' must be a text or a list of at most {MAX_STOPS} texts of 1 to {MAX_STOP_CHARS} "
                       "characters", "stop")
    return tuple(stops)


def _budget(body: dict[str, Any], key: str, n_prompt: int, default: int | None, model: ServedModel
            ) -> tuple[int, str | None]:
    """max_tokens within the model's window (the prompt and the answer together), and a warning when it was cut."""
    asked = _number(body, key, 1, 1 << 31, integer=True)
    room = model.max_len - n_prompt
    if room < 1:
        raise ApiError(400, f"the prompt is {n_prompt} tokens, and this model reads at most {model.max_len} tokens "
                       "(prompt and answer together): shorten it", "messages" if key != "max_tokens" else "prompt",
                       "context_length_exceeded")
    wanted = asked if asked is not None else default if default is not None else room
    if wanted <= room:
        return wanted, None
    return room, (f"max_tokens={wanted} was capped to {room}: this model reads at most {model.max_len} tokens, and "
                  f"the prompt takes {n_prompt}")


def _messages(value: Any) -> list[dict[str, Any]]:
    """OpenAI's messages as the template reads them: roles system/developer, user, assistant (which may carry
    ``tool_calls``, its content then null), tool (a function's result, with its ``tool_call_id``); text content (a
    string or a list of text parts)."""
    try:
        checked = chat_messages(value, tools=True)
    except MessageError as err:
        if err.index is None:
            raise ApiError(400, "'messages' must be a non-empty list of {\"role\", \"content\"} objects",
                           "messages") from None
        raise ApiError(400, f"messages[{err.index}]: {err}", f"messages[{err.index}]") from None
    return [{**m, **tool_parts(raw, raw.get("tool_calls") if m["role"] == "assistant" else None, i)}
            for i, (m, raw) in enumerate(zip(checked, value))]


def parse_chat(body: Any, model: ServedModel) -> Ask:
    """A chat request, checked; its messages (and tools) in the model's template."""
    body = _check_fields(body, "chat")
    if "max_tokens" in body and "max_completion_tokens" in body:
        raise ApiError(400, "give max_tokens or max_completion_tokens, not both", "max_tokens")
    messages = _messages(body.get("messages"))
    if model.template is None:
        raise ApiError(400, f"{model.name} has no chat template (it was not instruction-tuned, and its folder has "
                       "none): use /v1/completions to continue a text", "messages", "model_not_chat")
    ids = chat_ids(body, messages, model)
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    budget, warning = _budget(body, key, len(ids), None, model)
    structure = parse_structure(body, "chat", model, budget)
    return Ask("chat", ids, budget, _sampling(body), _stop(body), bool(body.get("stream")),
               bool((body.get("stream_options") or {}).get("include_usage")), warning=_join(warning, structure),
               n=_n(body), structure=structure)


def _join(warning: str | None, structure: Structure) -> str | None:
    return "; ".join(w for w in (warning, structure.warning) if w) or None


def parse_completion(body: Any, model: ServedModel) -> Ask:
    """A completion request, checked: a text (or one text in a list, or token ids) to continue."""
    body = _check_fields(body, "completion")
    prompt = body.get("prompt", "")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    vocab = model.ckpt.tokenizer.vocab_size
    if isinstance(prompt, str):
        try:
            ids = model.text_ids(prompt)
        except DataError as err:
            raise ApiError(400, str(err), "prompt") from None
    elif (isinstance(prompt, list) and prompt and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt)
          and all(0 <= i < vocab for i in prompt)):
        ids, prompt = list(prompt), model.decode(prompt)
    else:
        raise ApiError(400, f"'prompt' must be one text, or one list of token ids below {vocab} (send one request "
                       "per prompt)", "prompt")
    budget, warning = _budget(body, "max_tokens", len(ids), 16, model)
    structure = parse_structure(body, "completion", model, budget)
    return Ask("completion", ids, budget, _sampling(body), _stop(body), bool(body.get("stream")),
               bool((body.get("stream_options") or {}).get("include_usage")), prompt if body.get("echo") else "",
               _join(warning, structure), _n(body), structure)


def usage(ask: Ask, n_new: int, cached: int = 0) -> dict[str, Any]:
    """OpenAI's counts: ``cached_tokens``, the prompt's first tokens read from a kept answer's cache."""
    return {"prompt_tokens": len(ask.ids), "completion_tokens": n_new, "total_tokens": len(ask.ids) + n_new,
            "prompt_tokens_details": {"cached_tokens": cached}}


def answer(ask: Ask, head: dict[str, Any], texts: list[str], finishes: list[str], n_new: int,
           cached: int = 0, logprobs: list[Any] | None = None) -> dict[str, Any]:
    """The whole answer (not streamed): one choice per answer, its tool calls read out of its text (``structured
    .tool_calls``). ``head``: the id, created time and model name every object carries; ``logprobs``: each answer's
    (``structured.logprobs_of``)."""
    logprobs = logprobs or [None] * len(texts)
    if ask.kind == "chat":
        choices = []
        for i, (text, finish) in enumerate(zip(texts, finishes)):
            content, calls = tool_calls(text, ask.structure)
            message = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
            choices.append({"index": i, "message": message, "logprobs": logprobs[i],
                            "finish_reason": "tool_calls" if calls else finish})
    else:
        choices = [{"index": i, "text": ask.echo + text, "logprobs": logprobs[i], "finish_reason": finish}
                   for i, (text, finish) in enumerate(zip(texts, finishes))]
    body = {**head, "object": "chat.completion" if ask.kind == "chat" else "text_completion", "choices": choices,
            "usage": usage(ask, n_new, cached)}
    return {**body, "warning": ask.warning} if ask.warning else body


def chunk(ask: Ask, head: dict[str, Any], text: str | None = None, finish: str | None = None,
          first: bool = False, index: int = 0, logprobs: Any = None, calls: list[Any] | None = None) -> dict[str, Any]:
    """One event of a stream, for the answer ``index``: the first (a chat's role; a completion's echo), a piece of
    text (with its tokens' ``logprobs``; a chat's ``calls``, whole, as a last piece), or the last (its finish
    reason). Each event carries one choice, as OpenAI's streams do."""
    if ask.kind == "chat":
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
        if text:
            delta["content"] = text
        if calls:
            delta["tool_calls"] = [{"index": k, **call} for k, call in enumerate(calls)]
        choice: dict[str, Any] = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    else:
        choice = {"index": index, "text": (ask.echo if first else "") + (text or ""), "logprobs": logprobs,
                  "finish_reason": finish}
    body = {**head, "object": "chat.completion.chunk" if ask.kind == "chat" else "text_completion",
            "choices": [choice]}
    if ask.include_usage:
        body["usage"] = None
    return {**body, "warning": ask.warning} if first and ask.warning else body


def usage_chunk(ask: Ask, head: dict[str, Any], n_new: int, cached: int = 0) -> dict[str, Any]:
    """The last event of a stream asked with ``stream_options.include_usage``: no choices, the counts."""
    kind = "chat.completion.chunk" if ask.kind == "chat" else "text_completion"
    return {**head, "object": kind, "choices": [], "usage": usage(ask, n_new, cached)}
