"""Problems with an answer a program can check (``task=grpo``): read, checked, split, each question put through the
template of the model that answers it, tokenized, held in memory.

A user's file is JSON Lines of ``{"question": ..., "answer": ...}`` records (GSM8K's form: an answer that ends in
``#### N`` gives ``N``; any other answer is compared as text), split as instruction records are (``data.plan``: a
seeded random ``val_fraction`` for validation, unless a second file is given). Named sets:

    gsm8k        GSM8K's train split (7,473 problems; the shared ``benchmarks/gsm8k_train.jsonl.gz``), a seeded
                 ``val_fraction`` held out for validation; never its test split, which ``evaluate --benchmark gsm8k``
                 scores
    arithmetic   made, not read (``data/arithmetic.py``), with its fixed held-out validation and test problems

Each problem becomes a row: ``prompt`` (its question as the model's template asks it, tokenized), and for a person and
the rewards ``question.text`` and ``answer.text`` (the reference answer).
"""

from __future__ import annotations

from typing import Any

from scratchformer.data.memory import MemoryRows
from scratchformer.data.records import prompt_template
from scratchformer.data.task_data import DataRequest, TaskData
from scratchformer.data.templates import prompt_ids, special_texts
from scratchformer.errors import ConfigError, DataError

__all__ = ["check_problem", "named_problems", "problems_data"]

FORM = '{"question": ..., "answer": ...} (GSM8K\'s form: an answer ending "#### N")'


def check_problem(where: str, record: Any) -> dict[str, Any]:
    """A problem as it must be: a question and an answer, both text (one line naming the file and line if not)."""
    if not isinstance(record, dict):
        raise DataError(f"{where} is not a JSON object: a problem is {FORM}")
    for key in ("question", "answer"):
        if key not in record or record[key] is None:
            raise DataError(f"{where} has no \"{key}\": a problem is {FORM}")
        if not isinstance(record[key], str) or not record[key].strip():
            raise DataError(f"{where}: \"{key}\" must be a non-empty string")
    return record


def named_problems(dataset: str, cfg: Any) -> dict[str, tuple[list[dict[str, Any]], str]]:
    """split -> (problems, where they came from) of a named set of problems (the module docstring)."""
    if dataset == "arithmetic":
        from scratchformer.data.arithmetic import arithmetic_splits

        return arithmetic_splits(cfg)
    from scratchformer.data.benchmark_files import find_benchmark_file, read_jsonl
    from scratchformer.data.splits import carve_part

    path = find_benchmark_file("gsm8k_train.jsonl.gz", cfg.data_dir)
    problems = [check_problem(f"{path} line {n}", r) for n, r in read_jsonl(path)]
    out = {}
    for split, part, words in (("train", "rest", "the rest"), ("val", "held_out", f"a seeded {cfg.val_fraction:.0%}")):
        rows = carve_part(part, len(problems), cfg.val_fraction, cfg.seed)
        out[split] = ([problems[i] for i in rows], f"dataset gsm8k, its train split ({words})")
    return out


def problems_data(req: DataRequest) -> TaskData:
    """The problems of a run's splits, each question in the template of the model that answers them (the one
    ``init_from`` names: a run on problems always has one)."""
    from scratchformer.data.records import split_records

    tokenizer = req.tokenizer
    if tokenizer is None:
        raise ConfigError(f"task={req.task.name} tunes a model that already answers: give init_from=RUN_OR_FOLDER")
    template, special = prompt_template(req), special_texts(tokenizer)
    chosen = split_records(req, check_problem)  # the user's files (and --val, --test beside a named set)
    if req.cfg.dataset is not None:
        chosen = {**named_problems(req.cfg.dataset, req.cfg), **{s: c for s, c in chosen.items() if s != "train"}}
    out = TaskData(tokenizer, {}, {split: origin for split, (_, origin) in chosen.items()},
                   template=template.to_dict())
    for split, (problems, _) in chosen.items():
        asked = [[{"role": "user", "content": p["question"]}] for p in problems]
        prompts = [template.prompt(messages, None, special) for messages in asked]
        out.views[split] = MemoryRows({"prompt": [prompt_ids(tokenizer, template, m) for m in asked],
                                       "prompt.text": prompts,
                                       "question.text": [p["question"] for p in problems],
                                       "answer.text": [p["answer"] for p in problems]})
    return out
