"""The benchmarks ``evaluate --benchmark`` knows, one entry each, and a user's multiple-choice file as one more.

An entry says which files it reads (the scored split, then the pool of few-shot examples), how its questions are
written (``questions.py``), which metrics the harness reports for it, and what is scored, in words, wherever a
score is shown: the ARC files here are the validation splits, while the harness's ``arc_easy`` and
``arc_challenge`` score ARC's test split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scratchformer.benchmarks.questions import (
    Question,
    Records,
    arc_questions,
    file_questions,
    hellaswag_questions,
    mmlu_questions,
)
from scratchformer.errors import ConfigError

__all__ = ["BENCHMARKS", "MultipleChoice", "benchmark_names", "find_benchmark"]

FILE_SUFFIXES = (".jsonl", ".jsonl.gz")


@dataclass(frozen=True)
class MultipleChoice:
    """A multiple-choice benchmark: ``questions(records of each file, shots, limit)`` writes its questions."""

    name: str
    files: tuple[str, ...]  # benchmark files (data.benchmark_files), or a user's path: the scored split first
    questions: Callable[[list[Records], int, int | None], list[Question]]
    metrics: tuple[str, ...]
    split: str  # what is scored, in words
    harness_task: str  # the harness's task (or group) of the same name and prompt
    max_shots: int = 0  # the size of the few-shot pool here (0: none here)
    no_shots: str = ""  # why there are none
    user_file: bool = False  # files are a user's paths (read as they are), not benchmark files (sha256 checked)


def _no_shots(build: Callable[[Records, int | None], list[Question]]) -> Callable[..., list[Question]]:
    return lambda records, shots, limit: build(records[0], limit)


def _arc(level: str) -> MultipleChoice:
    return MultipleChoice(
        f"arc_{level.lower()}", (f"arc_{level.lower()}_validation.jsonl.gz",), _no_shots(arc_questions),
        ("acc", "acc_norm"), f"ARC-{level} validation split (the harness's arc_{level.lower()} scores the test split)",
        f"arc_{level.lower()}", no_shots="the harness draws ARC's examples from its train split, which the data "
        "folder does not hold")


BENCHMARKS: dict[str, MultipleChoice] = {b.name: b for b in (
    _arc("Easy"),
    _arc("Challenge"),
    MultipleChoice("hellaswag", ("hellaswag_validation.jsonl.gz",), _no_shots(hellaswag_questions),
                   ("acc", "acc_norm"), "HellaSwag validation split (as the harness's hellaswag)", "hellaswag",
                   no_shots="the harness draws HellaSwag's examples from its train split, which the data folder does "
                   "not hold"),
    MultipleChoice("mmlu", ("mmlu_test.jsonl.gz", "mmlu_dev.jsonl.gz"),
                   lambda records, shots, limit: mmlu_questions(records[0], records[1], shots, limit),
                   ("acc",), "MMLU test split, 57 subjects (as the harness's mmlu; examples from the dev split)",
                   "mmlu", max_shots=5),
)}


def benchmark_names() -> list[str]:
    return list(BENCHMARKS)


def find_benchmark(name: str) -> MultipleChoice:
    """The benchmark a ``--benchmark`` word names: a known name, or the path of a ``.jsonl``/``.jsonl.gz`` file of
    multiple-choice questions (named by its stem: ``piqa.jsonl`` -> ``piqa``)."""
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    if not name.endswith(FILE_SUFFIXES):
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}, or the path of a .jsonl or "
                          ".jsonl.gz file of multiple-choice questions")
    stem = Path(name).name.removesuffix(".gz").removesuffix(".jsonl")
    if stem in BENCHMARKS:
        raise ConfigError(f"{name}: a file of yours cannot be named as the benchmark {stem!r} (its results would take "
                          "that name); rename it")
    return MultipleChoice(stem, (name,), lambda records, shots, limit: file_questions(Path(name), records[0], limit),
                          ("acc", "acc_norm"), f"the questions of {name}", "a multiple_choice task of the same form",
                          no_shots="a file of yours has no pool of examples to draw them from", user_file=True)
