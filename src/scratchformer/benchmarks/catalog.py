"""The benchmarks ``evaluate --benchmark`` knows, one entry each, and a user's multiple-choice file as one more.

Two kinds: a ``MultipleChoice`` benchmark is scored by the log-likelihood of each choice (``loglikelihood.py``); a
``Generation`` benchmark (GSM8K) by what the model writes, generated greedily and filtered for its answer
(``generated.py``, ``gsm8k.py``). An entry says which files it reads (the scored split, then the pool of few-shot
examples), how its questions are written (``questions.py``, ``gsm8k.py``), which metrics the harness reports for
it, and what is scored, in words, wherever a score is shown: the ARC files here are the validation splits, while
the harness's ``arc_easy`` and ``arc_challenge`` score ARC's test split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scratchformer.benchmarks.gsm8k import Problem, gsm8k_problems
from scratchformer.benchmarks.questions import (
    Question,
    Records,
    arc_questions,
    file_questions,
    hellaswag_questions,
    mmlu_questions,
)
from scratchformer.errors import ConfigError, did_you_mean
from scratchformer.tasks.metrics import ANSWER_FILTERS

__all__ = ["BENCHMARKS", "Benchmark", "Generation", "MultipleChoice", "benchmark_names", "find_benchmark"]

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
    default_shots: int = 0  # the harness task's num_fewshot, when --shots is not given


@dataclass(frozen=True)
class Generation:
    """A benchmark answered by generating: ``questions(records of each file, shots, limit)`` writes its problems;
    the answers are generated (``generated.py``) and scored by exact match after each of its filters."""

    name: str
    files: tuple[str, ...]  # the scored split first, then the pool of few-shot examples
    questions: Callable[[list[Records], int, int | None], list[Problem]]
    metrics: tuple[str, ...]  # exact_match,FILTER for each filter (the harness's names)
    split: str
    harness_task: str
    max_shots: int
    default_shots: int
    no_shots: str = ""
    user_file: bool = False


Benchmark = MultipleChoice | Generation


def _no_shots(build: Callable[[Records, int | None], list[Question]]) -> Callable[..., list[Question]]:
    return lambda records, shots, limit: build(records[0], limit)


def _arc(level: str) -> MultipleChoice:
    return MultipleChoice(
        f"arc_{level.lower()}", (f"arc_{level.lower()}_validation.jsonl.gz",), _no_shots(arc_questions),
        ("acc", "acc_norm"), f"ARC-{level} validation split (the harness's arc_{level.lower()} scores the test split)",
        f"arc_{level.lower()}", no_shots="the harness draws ARC's examples from its train split, which the data "
        "folder does not hold")


BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (
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
    Generation("gsm8k", ("gsm8k_test.jsonl.gz", "gsm8k_train.jsonl.gz"),
               lambda records, shots, limit: gsm8k_problems(records[0], records[1], shots, limit),
               tuple(f"exact_match,{f}" for f in ANSWER_FILTERS), "GSM8K test split (as the harness's gsm8k; examples "
               "from the train split)", "gsm8k", max_shots=7473, default_shots=5),
)}


def benchmark_names() -> list[str]:
    return list(BENCHMARKS)


def find_benchmark(name: str) -> Benchmark:
    """The benchmark a ``--benchmark`` word names: a known name, or the path of a ``.jsonl``/``.jsonl.gz`` file of
    multiple-choice questions (named by its stem: ``piqa.jsonl`` -> ``piqa``)."""
    if name in BENCHMARKS:
        return BENCHMARKS[name]
    if not name.endswith(FILE_SUFFIXES):
        raise ConfigError(f"unknown benchmark {name!r}{did_you_mean(name, list(BENCHMARKS))}; known: "
                          f"{', '.join(BENCHMARKS)}, or the path of a .jsonl or .jsonl.gz file of multiple-choice "
                          "questions")
    stem = Path(name).name.removesuffix(".gz").removesuffix(".jsonl")
    if stem in BENCHMARKS:
        raise ConfigError(f"{name}: a file of yours cannot be named as the benchmark {stem!r} (its results would take "
                          "that name); rename it")
    return MultipleChoice(stem, (name,), lambda records, shots, limit: file_questions(Path(name), records[0], limit),
                          ("acc", "acc_norm"), f"the questions of {name}", "a multiple_choice task of the same form",
                          no_shots="a file of yours has no pool of examples to draw them from", user_file=True)
