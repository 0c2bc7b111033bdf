"""Each multiple-choice benchmark's questions written exactly as lm-evaluation-harness 0.4.13's task of that name
writes them: the prompt (``doc_to_text``), the choices (``doc_to_choice``), the answer (``doc_to_target``),
HellaSwag's preprocessing, MMLU's description and few-shot examples. A question is then scored by the
log-likelihood of each choice as the continuation ``" " + choice`` of its prompt (the harness's default
``target_delimiter``), one prompt for all its choices.

    arc_easy, arc_challenge   Question: {question}\\nAnswer:            choices: the answers' texts
    hellaswag                 {activity_label}: {ctx_a} {Ctx_b}        choices: the four endings (both cleaned)
    mmlu                      The following are multiple choice questions (with answers) about {subject}.\\n\\n
                              [{example}\\nAnswer: {letter}\\n\\n] x shots
                              {question}\\nA. {a}\\nB. {b}\\nC. {c}\\nD. {d}\\nAnswer:   choices: A, B, C, D
    a file of yours           {context}                              choices: as given

MMLU's few-shot examples are the first ``shots`` of the subject's dev split, in file order (the harness's
``first_n`` sampler); ``limit`` takes the first questions of each subject, as the harness's ``--limit`` does for each
of its 57 tasks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.benchmarks.mmlu_subjects import SUBJECTS, description
from scratchformer.errors import DataError

__all__ = ["Question", "arc_questions", "file_questions", "hellaswag_questions", "mmlu_questions"]

Records = list[tuple[int, dict[str, Any]]]  # (line number, record), as data.benchmark_files.read_jsonl reads them
FILE_FORM = '{"context" (or "question"): ..., "choices": [...], "answer": index}'


@dataclass(frozen=True)
class Question:
    """One question as the model takes it: the whole prompt (few-shot examples included), the choices as scored
    (without the delimiter), the index of the right one, and its group (MMLU's subject)."""

    context: str
    choices: tuple[str, ...]
    answer: int
    subject: str | None = None


def arc_questions(records: Records, limit: int | None = None) -> list[Question]:
    """``arc_easy.yaml``: ``"Question: {{question}}\\nAnswer:"``, the answers' texts, ``answerKey``'s index."""
    return [Question(f"Question: {r['question']}\nAnswer:", tuple(r["choices"]["text"]),
                     r["choices"]["label"].index(r["answerKey"])) for _, r in records[:limit]]


def _clean(text: str) -> str:
    """``hellaswag/utils.py``'s ``preprocess``: WikiHow's bracketed artifacts removed."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def hellaswag_questions(records: Records, limit: int | None = None) -> list[Question]:
    """``hellaswag.yaml`` with ``utils.process_docs``: the activity, its context with ``ctx_b`` capitalised, the
    four endings, each cleaned the same way."""
    return [Question(_clean(r["activity_label"] + ": " + r["ctx_a"] + " " + r["ctx_b"].capitalize()),
                     tuple(_clean(e) for e in r["endings"]), int(r["label"])) for _, r in records[:limit]]


def _mmlu_text(record: dict[str, Any]) -> str:
    a, b, c, d = record["choices"]
    return f"{record['question'].strip()}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer:"


def mmlu_questions(test: Records, dev: Records, shots: int = 0, limit: int | None = None) -> list[Question]:
    """``mmlu/default``: each subject's description, its first ``shots`` dev questions answered (``" " + letter``,
    then a blank line), then the question; the choices are the four letters."""
    by_subject: dict[str, list[dict[str, Any]]] = {s: [] for s in SUBJECTS}
    examples: dict[str, list[dict[str, Any]]] = {s: [] for s in SUBJECTS}
    for records, into in ((test, by_subject), (dev, examples)):
        for _, r in records:
            into[r["subject"]].append(r)
    out = []
    for subject in SUBJECTS:
        shown = "".join(f"{_mmlu_text(r)} {'ABCD'[r['answer']]}\n\n" for r in examples[subject][:shots])
        out += [Question(description(subject) + shown + _mmlu_text(r), ("A", "B", "C", "D"), r["answer"], subject)
                for r in by_subject[subject][:limit]]
    return out


def file_questions(path: Path, records: Records, limit: int | None = None) -> list[Question]:
    """A user's multiple-choice file: each line ``{"context" (or "question"), "choices": [...], "answer": i}``;
    a record that lacks a field or holds a wrong one is refused in one line naming the file and the line."""
    out = []
    for number, r in records[:limit]:
        where = f"{path} line {number}"
        context = r.get("context", r.get("question"))
        if not isinstance(context, str):
            raise DataError(f"{where}: no \"context\" (or \"question\") text; each line is {FILE_FORM}")
        choices = r.get("choices")
        if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) and c for c in choices):
            raise DataError(f"{where}: \"choices\" must be a list of at least two non-empty texts; each line is "
                            f"{FILE_FORM}")
        answer = r.get("answer")
        if isinstance(answer, bool) or not isinstance(answer, int) or not 0 <= answer < len(choices):
            raise DataError(f"{where}: \"answer\" must be the index of the right choice, 0 to {len(choices) - 1}; "
                            f"got {answer!r}")
        out.append(Question(context, tuple(choices), answer))
    if not out:
        raise DataError(f"{path} holds no questions; each line is {FILE_FORM}")
    return out
