"""Preference records (``task=dpo``): a prompt and two answers to it, one preferred (``chosen``) and one not
(``rejected``); read, checked, split as instruction records are (``data/records.py``), the prompt put through the
template the model was tuned with, tokenized, held in memory.

Three forms, in a JSON list or JSON Lines (one record a line):

    Alpaca's      {"instruction", "input" (may be empty or absent), "chosen", "rejected"}   ("output" is ignored)
    trl's         {"prompt", "chosen", "rejected"}: strings (the prompt is the user's message, put through the
                  template as an instruction is), or chats: "prompt" a list of messages, each answer a list holding
                  the assistant's message (or a string)
    chats         {"chosen": [messages], "rejected": [messages]}: two chats that share every message but the last,
                  the assistant's answer (trl's "implicit prompt")

``dataset=preferences`` is the book's 1,100 records (the instruction records with a polite and an impolite answer),
split in file order as the instruction records are: the first 85 % train, the next 10 % test, the last 5 %
validation, so that a DPO run's test prompts are none of the instruction run's training prompts.

Each record becomes one row: ``prompt`` (the template's prompt, tokenized), ``chosen`` and ``rejected`` (each answer's
tokens and the end-of-text token). As in ``trl``, prompt and answer are tokenized together and the answer starts where
that and the prompt's own tokens part (the same place, unless a token spans the two: counted). A record whose two
answers are the same text carries no preference: it is skipped and counted (the shared file has 6).
"""

from __future__ import annotations

from typing import Any

from scratchformer.data.memory import MemoryRows
from scratchformer.data.messages import MessageError, chat_messages
from scratchformer.data.records import prompt_template, split_records
from scratchformer.data.task_data import DataRequest, TaskData
from scratchformer.data.templates import Template, as_messages, prompt_ids, special_texts
from scratchformer.errors import ConfigError, DataError

__all__ = ["check_preference", "preferences_data"]

FORMS = ('{"instruction", "input", "chosen", "rejected"}, {"prompt", "chosen", "rejected"} or {"chosen": [messages], '
         '"rejected": [messages]}')


def preferences_data(req: DataRequest) -> TaskData:
    """The preference records of a run's splits, templated and tokenized with the tokenizer of the model the run
    starts from (``init_from``: a preference run always has one)."""
    tokenizer = req.tokenizer
    if tokenizer is None:
        raise ConfigError(f"task={req.task.name} tunes a model that already answers: give init_from=RUN_OR_FOLDER")
    template, special = prompt_template(req), special_texts(tokenizer)
    chosen = split_records(req, check_preference)
    out = TaskData(tokenizer, {}, {split: origin for split, (_, origin) in chosen.items()},
                   template=template.to_dict())
    for split, (records, _) in chosen.items():
        kept = [r for r in records if r["chosen"] != r["rejected"]]
        if len(kept) < len(records):
            out.notes.append(f"{split}: skipped {len(records) - len(kept):,} of {len(records):,} records whose chosen "
                             "and rejected answers are the same text (no preference to learn)")
        prompts = [template.split(r["record"], special)[0] for r in kept]
        out.views[split], merged = _rows(tokenizer, template, prompts, kept)
        if merged:
            out.notes.append(f"{split}: in {merged:,} records the prompt's last token merges with the answer's first "
                             "(the answer starts where the two tokenizations part, as trl does)")
    return out


def _rows(tokenizer: Any, template: Template, prompts: list[str], records: list[dict[str, Any]]
          ) -> tuple[MemoryRows, int]:
    """Each record's tokens, as ``trl`` makes them: the prompt alone, and the prompt followed by each answer; the
    answer is what follows the prompt's tokens (where the tokenizations part, if a token spans the two), then the
    end-of-text token. Returns the rows and the number of records whose prompt ends inside a token. The messages'
    and the answers' words are text (``templates.prompt_ids``: none forges the template's special tokens)."""
    def ids(record: dict[str, Any], then: str = "") -> list[int]:
        return prompt_ids(tokenizer, template, as_messages(record["record"])[:-1], record["record"], then)

    prompt_ids_ = [ids(r) for r in records]
    whole = {key: [ids(r, r[key]) for r in records] for key in ("chosen", "rejected")}
    fields: dict[str, list[Any]] = {"prompt": [], "prompt.text": prompts, "chosen": [], "rejected": [],
                                    "chosen.text": [r["chosen"] for r in records],
                                    "rejected.text": [r["rejected"] for r in records]}
    merged = 0
    for i, ids in enumerate(prompt_ids_):
        n = min(_shared(ids, whole["chosen"][i]), _shared(ids, whole["rejected"][i]))
        merged += n < len(ids)
        fields["prompt"].append(ids[:n])
        for key in ("chosen", "rejected"):
            fields[key].append(whole[key][i][n:] + [tokenizer.eos_id])
    return MemoryRows(fields), merged


def _shared(a: list[int], b: list[int]) -> int:
    """How many tokens ``a`` and ``b`` share from the start."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def check_preference(where: str, record: Any) -> dict[str, Any]:
    """A record in one of the three forms -> ``{"record": an instruction record of its prompt (for the template),
    "chosen": text, "rejected": text}``; a missing or mistyped field is one line naming the file and the record."""
    if not isinstance(record, dict):
        raise DataError(f"{where} is not a JSON object")
    for key in ("chosen", "rejected"):
        if key not in record:
            raise DataError(f"{where} has no \"{key}\" (a preference record is {FORMS})")
    if "instruction" in record:
        for key in ("instruction", "input"):
            if not isinstance(record.get(key, ""), str):
                raise DataError(f"{where}: \"{key}\" must be a string, not {type(record[key]).__name__}")
        answers = [_answer(where, record, key) for key in ("chosen", "rejected")]
        return {"record": {"instruction": record["instruction"], "input": record.get("input", ""),
                           "output": answers[0]}, "chosen": answers[0], "rejected": answers[1]}
    if "prompt" in record:
        prompt = record["prompt"]
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else _messages(where, prompt,
                                                                                                   "prompt")
    else:  # two whole chats: the prompt is what they share
        chats = [_messages(where, record[key], key) for key in ("chosen", "rejected")]
        messages = chats[0][:-1]
        if not messages or chats[1][:-1] != messages or len(chats[1]) != len(chats[0]):
            raise DataError(f"{where}: \"chosen\" and \"rejected\" must be chats that differ only in their last "
                            f"message, or the record needs a \"prompt\" (a preference record is {FORMS})")
    answers = [_answer(where, record, key) for key in ("chosen", "rejected")]
    return {"record": {"messages": [*messages, {"role": "assistant", "content": answers[0]}]},
            "chosen": answers[0], "rejected": answers[1]}


def _answer(where: str, record: dict[str, Any], key: str) -> str:
    """An answer's text: a string, or the last message of a chat, which must be the assistant's."""
    value = record[key]
    if isinstance(value, str):
        return value
    return _messages(where, value, key, answered=True)[-1]["content"]


def _messages(where: str, value: Any, key: str, answered: bool = False) -> list[dict[str, str]]:
    try:
        return chat_messages(value, answered=answered)
    except MessageError as err:
        if err.index is None:
            raise DataError(f"{where}: \"{key}\" must be a string or a non-empty list of {{\"role\", \"content\"}}"
                            ) from None
        raise DataError(f"{where}: \"{key}\": {err}") from None
