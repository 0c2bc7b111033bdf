"""Instruction records (``task=instruct``): read, checked, split, put through the prompt template and tokenized, held
in memory (a few thousand records are small).

A file is a JSON list of records or JSON Lines (one record a line), each an Alpaca record or a chat
(``data/templates.py``). ``dataset=instructions`` is the 1,100 records of the book they come from, split in file
order as it splits them (the first 85 % train, the next 10 % test, the last 5 % validation); a user's ``--data`` file
is split like any other rows (``data.plan.file_splits``: a seeded random ``val_fraction`` for validation).

Each record becomes one row: ``ids`` = the prompt's tokens, then the response's and the end-of-text token, with
``n_prompt`` (how many of them are the prompt: the task takes no loss on those) and, for a person, ``ids.text`` (the
prompt) and ``response.text`` (the answer to learn).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.data.memory import MemoryRows
from scratchformer.data.messages import MessageError, chat_messages
from scratchformer.data.plan import file_splits
from scratchformer.data.roles import roles
from scratchformer.data.splits import carve_part
from scratchformer.data.task_data import NO_TRAINING_DATA, DataRequest, TaskData
from scratchformer.data.templates import (
    Template,
    as_messages,
    find_template,
    prompt_ids,
    special_texts,
    text_ids,
)
from scratchformer.errors import DataError, listed
from scratchformer.tokenizers import Tokenizer

__all__ = ["BOOK_SPLIT", "Check", "prompt_template", "read_records", "records_data", "split_records"]

# a record's check: (where it is, the record as read) -> the record as it is used, or a DataError in one line
Check = Callable[[str, Any], dict[str, Any]]
# dataset=instructions: the book's split, in file order (split, share); the last part takes what is left
BOOK_SPLIT = (("train", 0.85), ("test", 0.10), ("val", 0.05))
PROBLEM_SETS = ("arithmetic", "gsm8k")  # named sets of problems (data/problems.py), made or read there


def records_data(req: DataRequest) -> TaskData:
    """The instruction records of a run's splits, templated and tokenized: ``dataset=instructions`` (``--val`` and
    ``--test`` replace its splits) or the user's files. The tokenizer is the checkpoint's or the base's, else one
    trained on the training split's prompts and responses; the template is ``prompt_template``'s."""
    cfg, template = req.cfg, prompt_template(req)
    chosen = split_records(req)
    if req.tokenizer is None and "train" not in chosen:
        raise DataError(NO_TRAINING_DATA)
    tokenizer = req.tokenizer
    special = {} if tokenizer is None else special_texts(tokenizer)
    texts = {split: [template.split(r, special) for r in records] for split, (records, _) in chosen.items()}
    if tokenizer is None:  # from scratch: a tokenizer of the training prompts and answers (the template's words too)
        from scratchformer.data.prepared import tokenizer_trainer

        tokenizer = tokenizer_trainer(cfg, False)(p + r for p, r in texts["train"])
    out = TaskData(tokenizer, {}, {split: origin for split, (_, origin) in chosen.items()},
                   template=template.to_dict())
    for split, pairs in texts.items():
        out.views[split] = _rows(tokenizer, template, chosen[split][0], pairs)
    rows = out.views["train"].fields["ids"] if "train" in out.views else []
    unknown = sum(ids.count(tokenizer.unk_id) for ids in rows)
    if unknown and not req.quiet:  # a base's tokenizer that never saw some of the records' characters
        total = sum(len(ids) for ids in rows)
        chars = tokenizer.cannot_encode("".join(p + r for p, r in texts.get("train", [])))
        req.say(f"warning: {unknown:,} of the {total:,} training tokens ({100 * unknown / total:.1f} %) are characters "
                f"the model never saw ({listed(chars)}): it reads each as <unk>, and cannot be asked them")
    return out


def prompt_template(req: DataRequest) -> Template:
    """The template a run's records are put through: the checkpoint's (``req.template``: a resumed or evaluated run
    reads its records as it was trained; or the one the run it starts from was tuned with), else the one
    ``template`` names (``auto``: the base folder's chat template, else Alpaca's)."""
    if req.template:
        return Template.from_dict(req.template)
    return find_template(getattr(req.cfg, "template", None) or "auto", req.base)


def split_records(req: DataRequest, check: Check | None = None) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """split -> (its records, where they came from): a named dataset split in file order (``BOOK_SPLIT``; ``--val``
    and ``--test`` replace its splits) or the user's files, each record checked by ``check`` (an instruction
    record's ``_check`` unless given)."""
    cfg = req.cfg
    train, val, test = roles(req.task, req.files, cfg.dataset)
    chosen: dict[str, tuple[list[dict[str, Any]], str]] = {}
    if cfg.dataset == "arithmetic" and check is None:  # the built-in problems, as instruction records
        from scratchformer.data.arithmetic import arithmetic_splits

        chosen.update({split: ([{"instruction": p["question"], "input": "", "output": p["answer"]} for p in problems],
                               origin) for split, (problems, origin) in arithmetic_splits(cfg).items()})
    elif cfg.dataset is not None and check is not None and cfg.dataset in PROBLEM_SETS:
        pass  # problems: their reader takes the named set itself (data/problems.py)
    elif cfg.dataset is not None:
        chosen.update(_book_split(cfg.dataset, cfg.data_dir, check))
    read: dict[Any, list[dict[str, Any]]] = {}
    for split, spec in file_splits(req.task, train, val, test, cfg.val_fraction, cfg.seed).items():
        if spec.source not in read:
            read[spec.source] = read_records(Path(spec.source.paths[0]), check)
        records = read[spec.source]
        rows = carve_part(spec.part, len(records), cfg.val_fraction, cfg.seed)
        chosen[split] = ([records[i] for i in rows], spec.origin)
    return chosen


def _rows(tok: Tokenizer, template: Template, records: list[dict[str, Any]], pairs: list[tuple[str, str]]
          ) -> MemoryRows:
    """Each record (and its (prompt, response) texts) as one row of ids: prompt, response, end-of-text; a message's
    words as text (``prompt_ids``: none forges the template's special tokens)."""
    prompts = [prompt_ids(tok, template, as_messages(r)[:-1], r) for r in records]
    answers = [text_ids(tok, r) + [tok.eos_id] for _, r in pairs]
    return MemoryRows({"ids": [p + a for p, a in zip(prompts, answers)], "n_prompt": [len(p) for p in prompts],
                       "ids.text": [p for p, _ in pairs], "response.text": [r for _, r in pairs]})


def _book_split(dataset: str, data_dir: str | None,
                check: Check | None = None) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """A named set of records split in file order (``BOOK_SPLIT``)."""
    from scratchformer.data.named import find_dataset

    path = find_dataset(dataset, data_dir)
    records, out, start = read_records(path, check), {}, 0
    for i, (split, share) in enumerate(BOOK_SPLIT):
        end = len(records) if i == len(BOOK_SPLIT) - 1 else start + int(len(records) * share)
        out[split] = (records[start:end], f"dataset {dataset} {split} (records {start + 1:,}-{end:,} in file order)")
        start = end
    return out


def read_records(path: Path, check: Check | None = None) -> list[dict[str, Any]]:
    """The records of a JSON list or a JSON Lines file, each checked (by ``check(where, record)``: an instruction
    record's ``_check`` unless given); a problem is one line naming the file and the record's index (JSON) or line
    (JSON Lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}") from None
    if not text.strip():
        raise DataError(f"{path} is empty: instruction data is a JSON list of records or one JSON record a line")
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{path} is not valid JSON (line {err.lineno}: {err.msg})") from None
        records = [(f"{path}: the record at index {i}", r) for i, r in enumerate(data)]
    else:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append((f"{path} line {n}", json.loads(line)))
                except json.JSONDecodeError as err:
                    raise DataError(f"{path} line {n} is not a JSON record ({err.msg})") from None
    if not records:
        raise DataError(f"{path} holds no records")
    return [(check or _check)(where, record) for where, record in records]


def _check(where: str, record: Any) -> dict[str, Any]:
    """A record as it must be: an Alpaca record with a string ``instruction`` and ``output`` (``input`` a string if
    there), or a chat whose roles are known and whose last message is the assistant's answer."""
    if not isinstance(record, dict):
        raise DataError(f"{where} is not a JSON object")
    if "messages" in record:
        try:
            return {**record, "messages": chat_messages(record["messages"], answered=True)}
        except MessageError as err:
            raise DataError(f"{where}: " + ("\"messages\" is " if err.index is None else "") + str(err)) from None
    for key in ("instruction", "output"):
        if key not in record:
            raise DataError(f"{where} has no \"{key}\" (a record is {{\"instruction\", \"input\", \"output\"}} or "
                            "{\"messages\": [...]})")
    for key in ("instruction", "input", "output"):
        if key in record and not isinstance(record[key], str):
            raise DataError(f"{where}: \"{key}\" must be a string, not {type(record[key]).__name__}")
    return record

