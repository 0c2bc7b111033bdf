"""Prompt templates for instruction tuning: a record becomes a prompt (what the model reads) and a response (what it
learns to write; the loss is taken on it alone, ``tasks/instruct.py``).

Two kinds of record, as instruction data comes:

    Alpaca        {"instruction": ..., "input": ... (may be empty or absent), "output": ...}
    chat          {"messages": [{"role": "system" | "user" | "assistant", "content": ...}, ...]}

A chat's response is its last message, which must be the assistant's; the messages before it (earlier answers
too) are the prompt. An Alpaca record is the chat [user: instruction (and input), assistant: output].

Two kinds of template (``template=...``):

    alpaca        Alpaca's text (as the book the shared records come from writes it):

                      Below is an instruction that describes a task. Write a response that appropriately
                      completes the request.

                      ### Instruction:
                      {instruction}

                      ### Input:                    (only when the input is not empty)
                      {input}

                      ### Response:
                      {output}

    chat          a Hugging Face chat template (Jinja), the base folder's own (``chat_template.jinja``, or
                  ``chat_template`` in ``tokenizer_config.json``) or a ``.jinja`` file: rendered as
                  ``transformers`` renders it (``add_generation_prompt`` ends the prompt where the answer begins).
                  It needs ``jinja2`` (``pip install -e ".[chat]"``).

``template=auto`` (the default) is the base folder's chat template where it has one, else Alpaca's.

A message's words are text, whatever they spell (as OpenAI's API reads them): ``prompt_ids`` renders the template with
every special token's text inside a message hidden behind a mark, so that the tokenizer reads as special tokens the
template's own markers alone (``Tokenizer.encode_pieces``); ``<|im_start|>system`` typed in a message is text. Every
prompt a model reads goes through it: training and evaluating instruct, dpo and grpo runs, ``generate
--instruction``, GSM8K's chat form and the server.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError, DataError

__all__ = ["ALPACA_JINJA", "ALPACA_PREAMBLE", "Template", "as_messages", "find_template", "folder_template",
           "prompt_ids", "special_texts", "text_ids"]

ALPACA_PREAMBLE = ("Below is an instruction that describes a task. Write a response that appropriately completes "
                   "the request.")
# Alpaca's template written as a chat template (Jinja), so that a run tuned with it carries it into its exports and
# any runtime (transformers' apply_chat_template, llama.cpp) asks as ``generate --instruction`` asks: the preamble
# unless a system message stands first, each turn under its heading, a blank line between, "### Response:" last.
ALPACA_JINJA = (
    "{%- set ns = namespace(first=true) -%}"
    "{%- if not messages or messages[0]['role'] != 'system' -%}"
    "{{ '" + ALPACA_PREAMBLE + "' }}{%- set ns.first = false -%}{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if not ns.first -%}{{ '\\n\\n' }}{%- endif -%}{%- set ns.first = false -%}"
    "{%- if message['role'] == 'user' -%}{{ '### Instruction:\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}{{ '### Response:\\n' }}{%- endif -%}"
    "{{ message['content'] }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '\\n\\n### Response:\\n' }}{%- endif -%}")


def as_messages(record: dict[str, Any]) -> list[dict[str, str]]:
    """A record as chat messages: a chat's own, or an Alpaca record's [user, assistant] (the input after the
    instruction, a blank line between)."""
    if "messages" in record:
        return record["messages"]
    user = record["instruction"] + (f"\n\n{record['input']}" if record.get("input") else "")
    return [{"role": "user", "content": user}, {"role": "assistant", "content": record["output"]}]


@dataclass(frozen=True)
class Template:
    """A prompt template: ``name`` (``alpaca`` or ``chat``), the Jinja ``source`` of a chat template and where it
    came from. ``to_dict``/``from_dict``: what a checkpoint keeps, so that ``generate`` asks as training did."""

    name: str
    source: str = ""
    origin: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "source": self.source, "origin": self.origin}

    @property
    def jinja(self) -> str:
        """The template as a chat template (Jinja), what an export carries: a chat template's own source, or Alpaca's
        written as one (``ALPACA_JINJA``; the same text for a conversation, ``### Input:`` aside: an Alpaca record's
        input goes in the user's message, a blank line after the instruction)."""
        return self.source if self.name == "chat" else ALPACA_JINJA

    @classmethod
    def from_dict(cls, data: dict[str, str] | None) -> Template:
        return cls(**data) if data else cls("alpaca")

    def split(self, record: dict[str, Any], special: dict[str, str] | None = None) -> tuple[str, str]:
        """(prompt, response) of a record: the text the model reads, and its answer (no end token: the task adds
        the tokenizer's own)."""
        messages = as_messages(record)
        return self.prompt(messages[:-1], record, special), messages[-1]["content"]

    def prompt(self, messages: list[dict[str, str]], record: dict[str, Any] | None = None,
               special: dict[str, str] | None = None) -> str:
        """The prompt of ``messages`` (those before the answer), ending where the answer begins."""
        if self.name == "chat":
            return _render(self.source, messages, special or {}, self.origin)
        if record is not None and "messages" not in record:  # Alpaca's own record, Alpaca's own text
            extra = f"\n\n### Input:\n{record['input']}" if record.get("input") else ""
            return f"{ALPACA_PREAMBLE}\n\n### Instruction:\n{record['instruction']}{extra}\n\n### Response:\n"
        parts = []
        for m in messages:  # a chat in Alpaca's words: the system's text first, each turn under its heading
            heading = {"user": "### Instruction:\n", "assistant": "### Response:\n"}.get(m["role"], "")
            parts.append(heading + m["content"])
        head = ALPACA_PREAMBLE if not messages or messages[0]["role"] != "system" else ""
        return "\n\n".join([head, *parts] if head else parts) + "\n\n### Response:\n"

    def instruction(self, instruction: str, input_text: str = "", special: dict[str, str] | None = None) -> str:
        """The prompt of one instruction (and its input), as ``generate --instruction`` asks it."""
        record = {"instruction": instruction, "input": input_text, "output": ""}
        return self.prompt(as_messages(record)[:-1], record, special)


def prompt_ids(tok: Any, template: Template, messages: list[dict[str, str]],
               record: dict[str, Any] | None = None, then: str = "", tools: list[Any] | None = None) -> list[int]:
    """THE token ids of ``template.prompt(messages, record)``, and of ``then`` after it (an answer, as text): the
    template's special tokens' texts are special tokens, a message's are text (``Tokenizer.encode_pieces``).
    ``tools``: the functions a chat template renders (``transformers``' ``apply_chat_template(tools=...)``)."""
    specials = tok.parsed_specials
    text_of: dict[str, Any] = {**special_texts(tok), **({"tools": tools} if tools else {})}
    if not specials:
        return tok.encode_pieces([(template.prompt(messages, record, text_of), True), (then, False)])
    mark = "\ue000" + secrets.token_hex(6)  # a text no message holds: where a message held a special token's text
    hidden: list[str] = []
    find = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))

    def hide(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        return find.sub(lambda m: f"{mark}{hidden.append(m.group()) or len(hidden) - 1}\ue001", text)

    shown = template.prompt([{**m, "content": hide(m["content"])} for m in messages],
                            None if record is None else {k: hide(v) for k, v in record.items()}, text_of)
    parts = re.split(re.escape(mark) + r"(\d+)\ue001", shown)
    pieces = [(hidden[int(part)], False) if i % 2 else (part, True) for i, part in enumerate(parts)]
    return tok.encode_pieces([*pieces, (then, False)])


def text_ids(tok: Any, text: str) -> list[int]:
    """The ids of a message's text alone (an answer to learn, after its prompt): no special token read in it, and
    nothing of what ``encode`` adds around a whole text (Llama 3's bos: an answer continues its prompt)."""
    return tok.encode_pieces([(text, False)], around=False)


def special_texts(tok: Any) -> dict[str, str]:
    """The texts a chat template may write of a tokenizer's own tokens (``{{ bos_token }}``, ``{{ eos_token }}``), as
    ``transformers`` gives them: a folder's as it names them (``special_text``), none where it names none (Qwen3's
    bos: the template writes nothing there)."""
    texts = {f"{role}_token": tok.special_text(role) for role in ("bos", "eos")}
    return {name: text for name, text in texts.items() if text is not None}


def _render(source: str, messages: list[dict[str, str]], special: dict[str, str], origin: str) -> str:
    """A chat template rendered as ``transformers`` does: a sandboxed Jinja environment, ``raise_exception``,
    ``tojson``; any failure is one line naming the template."""
    from scratchformer.extras import require

    require("jinja2", "chat")
    try:
        return _compiled(source).render(messages=messages, add_generation_prompt=True, **special)
    except Exception as err:  # noqa: BLE001 - a template is a program: any error it raises is the template's
        raise DataError(f"the chat template of {origin} cannot render these messages: {err}") from None


@functools.lru_cache(maxsize=16)
def _compiled(source: str) -> Any:
    """A template's source compiled once: compiling takes milliseconds, rendering a fraction of one, and a server
    renders its template for every request."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def find_template(setting: str, base: Path | None) -> Template:
    """The template ``setting`` names (``auto``, ``alpaca``, ``chat`` or a ``.jinja`` file); ``base``: the folder of
    the model a run starts from (a Hugging Face folder may bring its chat template)."""
    if setting == "alpaca":
        return Template("alpaca")
    if setting not in ("auto", "chat"):
        path = Path(setting).expanduser()
        if not path.is_file():
            raise ConfigError(f"template={setting} is not alpaca, chat, auto or a .jinja file that exists")
        return Template("chat", path.read_text(encoding="utf-8"), str(path))
    source, origin = _folder_template(base) if base is not None else ("", "")
    if source:
        return Template("chat", source, origin)
    if setting == "chat":
        where = f"{base} has" if base is not None else "a run without init_from=FOLDER has"
        raise ConfigError(f"template=chat needs the base folder's chat template, but {where} none "
                          "(chat_template.jinja, or chat_template in tokenizer_config.json); use template=alpaca")
    return Template("alpaca")


def folder_template(folder: str | Path) -> Template | None:
    """A Hugging Face folder's own chat template, or None when it has none."""
    source, origin = _folder_template(Path(folder))
    return Template("chat", source, origin) if source else None


def _folder_template(folder: Path) -> tuple[str, str]:
    """A Hugging Face folder's chat template and its file, or ("", "")."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), str(jinja)
    config = folder / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, list):  # several named templates: the default one
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        if isinstance(template, str) and template:
            return template, str(config)
    return "", ""
