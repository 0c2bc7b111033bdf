"""GSM8K (Cobbe et al. 2021, grade-school arithmetic word problems) exactly as lm-evaluation-harness 0.4.13's
``gsm8k`` task asks and scores it (``lm_eval/tasks/gsm8k/gsm8k.yaml``).

The prompt: ``shots`` worked examples from the train split, then the problem::

    Question: {question}\\nAnswer: {answer, its steps and "#### 72"}\\n\\n      x shots
    Question: {question}\\nAnswer:

The examples of each problem are drawn by the harness's sampler: one ``random.Random(1234)`` for the whole task,
``sample(train, shots)`` for each problem in file order, so that problem i gets the same examples whatever
``--limit``. The chat form (``apply_chat_template=True, fewshot_as_multiturn=True``) asks the same turns as messages:
``user: Question: ...\\nAnswer:``, ``assistant: {answer}``, ..., ``user: Question: {question}\\nAnswer:``, rendered by
the model's chat template.

The model answers greedily until ``Question:``, ``</s>``, ``<|im_end|>`` or its end-of-text token (256 new tokens
at most), and the text is cut at the first stop sequence. Two filters take the answer from the text:

    strict-match       the number after "#### ", the form the examples show (the first one)
    flexible-extract   the last number anywhere in the text

``exact_match`` compares the extracted answer with the reference's after removing commas, "$", everything up to
"#### " and a final ".", ignoring case. (The filters and the comparison are in ``tasks.metrics``: learning from
rewards scores answers with them too.)
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scratchformer.benchmarks.metrics import summary
from scratchformer.errors import DataError
from scratchformer.tasks.metrics import ANSWER_FILTERS, extract_answer, same_answer

__all__ = ["GSM8K_STOP", "Problem", "gsm8k_problems", "score_answers"]

GSM8K_STOP = ("Question:", "</s>", "<|im_end|>")  # the task's ``until``; the model's end-of-text token is added
MAX_NEW_TOKENS = 256  # the harness's default ``max_gen_toks`` (the task sets none)
FEWSHOT_SEED = 1234  # simple_evaluate's fewshot_random_seed


@dataclass(frozen=True)
class Problem:
    """One problem as the model is asked it: the turns (``(role, text)``, the examples' and the problem's, the last
    a user's), and the reference answer (its worked steps, ending with ``#### <number>``)."""

    turns: tuple[tuple[str, str], ...]
    answer: str

    @property
    def text(self) -> str:
        """The plain prompt: each user turn, then `` answer\\n\\n`` after the examples' turns."""
        return "".join(t if role == "user" else f" {t}\n\n" for role, t in self.turns)

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat form's messages (few-shot as multiple turns)."""
        return [{"role": role, "content": t} for role, t in self.turns]


def _question(record: dict[str, Any]) -> str:
    return f"Question: {record['question']}\nAnswer:"


def gsm8k_problems(test: list[tuple[int, dict[str, Any]]], train: list[tuple[int, dict[str, Any]]],
                   shots: int = 5, limit: int | None = None) -> list[Problem]:
    """The first ``limit`` test problems, each after ``shots`` examples drawn from ``train`` as the harness draws
    them; a record without its two texts is refused in one line."""
    for number, r in [*test, *train]:
        if not (isinstance(r.get("question"), str) and isinstance(r.get("answer"), str)):
            raise DataError(f"GSM8K record at line {number} has no \"question\" and \"answer\" texts")
    if shots > len(train):
        raise DataError(f"--shots {shots}: GSM8K's train split has {len(train):,} examples")
    pool = [r for _, r in train]
    rnd = random.Random(FEWSHOT_SEED)
    problems = []
    for _, r in test[:limit]:
        turns: list[tuple[str, str]] = []
        for example in (rnd.sample(pool, shots) if shots else []):
            turns += [("user", _question(example)), ("assistant", example["answer"])]
        problems.append(Problem((*turns, ("user", _question(r))), r["answer"]))
    return problems


def score_answers(problems: Sequence[Problem], outputs: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The metrics under the harness's names (``exact_match,strict-match``, its ``_stderr``, ...) and ``n``, and a
    row per problem (the output, each filter's answer, whether it is right)."""
    rows = []
    for problem, output in zip(problems, outputs):
        answers = {name: extract_answer(output, name) for name in ANSWER_FILTERS}
        rows.append({"output": output, "answers": answers,
                     "correct": {name: same_answer(a, problem.answer) for name, a in answers.items()}})
    metrics: dict[str, Any] = {}
    for name in ANSWER_FILTERS:
        each = summary([{"exact_match": r["correct"][name]} for r in rows], ("exact_match",))
        metrics[f"exact_match,{name}"] = each["exact_match"]
        metrics[f"exact_match_stderr,{name}"] = each["exact_match_stderr"]
    return {**metrics, "n": len(rows)}, rows
