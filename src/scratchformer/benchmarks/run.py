"""Scoring a checkpoint on benchmarks: ``evaluate_benchmarks(ckpt, ["arc_easy", "mmlu"], shots=5)``.

Everything is checked before anything is scored (the model can score text, each name is known, each file is there
and whole, each record has its fields, the shots exist), so a mistake costs seconds, not the first benchmark's run.
A question is scored as the harness scores it (``loglikelihood.py``); what could not be scored as written is
counted and reported beside its scores: prompts cut to the model's window (``truncated``), questions with a
character the model's vocabulary lacks, scored as its unknown token (``unknown_characters``), and questions with
a choice longer than the window, which cannot be scored (``skipped``; the harness stops on them). A GSM8K problem
is answered by generating (``generated.py``) and scored by its filters (``gsm8k.py``); prompts cut to the window are
counted the same way.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from scratchformer.benchmarks.catalog import Benchmark, Generation, MultipleChoice, find_benchmark
from scratchformer.benchmarks.generated import answer_problems, prompt_texts, uses_chat
from scratchformer.benchmarks.gsm8k import Problem, score_answers
from scratchformer.benchmarks.loglikelihood import (
    Request,
    encode_pairs,
    fit,
    loglikelihoods,
    scores_text,
)
from scratchformer.benchmarks.metrics import item_scores, pooled, summary
from scratchformer.benchmarks.mmlu_subjects import GROUPS
from scratchformer.benchmarks.questions import Question
from scratchformer.checkpoints import Checkpoint, CheckpointError
from scratchformer.data.benchmark_files import find_benchmark_file, read_jsonl
from scratchformer.errors import ConfigError
from scratchformer.families import family

__all__ = ["choice_scores", "evaluate_benchmarks", "load_questions", "score_problems", "score_questions"]


def load_questions(spec: Benchmark, *, shots: int | None = None, limit: int | None = None,
                   data_dir: str | Path | None = None) -> list[Any]:
    """The questions (GSM8K: problems) of ``spec`` as the harness writes them, read from its files (checked);
    ``shots`` None: the harness task's own number."""
    shots = spec.default_shots if shots is None else shots
    if shots > spec.max_shots:
        raise ConfigError(f"--shots {shots}: {spec.name} has no examples to show here ({spec.no_shots})"
                          if not spec.max_shots else
                          f"--shots {shots} is more than the {spec.max_shots} examples a subject has in "
                          f"{spec.name}'s dev split" if isinstance(spec, MultipleChoice) else
                          f"--shots {shots} is more than the {spec.max_shots:,} examples of {spec.name}'s train split")
    paths = [Path(f) if spec.user_file else find_benchmark_file(f, data_dir) for f in spec.files]
    return spec.questions([read_jsonl(p) for p in paths], shots, limit)


def evaluate_benchmarks(ckpt: Checkpoint, names: list[str], *, shots: int | None = None, limit: int | None = None,
                        data_dir: str | Path | None = None, max_tokens: int = 4096, chat: str = "auto",
                        log: Callable[[str], object] = lambda s: print(s, file=sys.stderr),
                        done: Callable[[str, dict[str, Any]], object] | None = None) -> dict[str, Any]:
    """``{benchmark: {metric: value, metric_stderr: ..., n, chance, ...}}`` of a language model's checkpoint on
    each benchmark of ``names`` (known names, or paths of multiple-choice files). ``shots`` None: each benchmark's
    own number (the harness task's: 5 for GSM8K, else 0). ``chat``: ask GSM8K in the chat form (``auto``: when the
    model has a template, ``yes``, ``no``). ``done(name, result)``: told as each benchmark is scored (the command
    saves it then, so an interrupted list keeps what it finished)."""
    if not scores_text(ckpt.model):
        kind = family(ckpt.model_config.arch).title
        raise CheckpointError(f"this checkpoint holds {kind}: benchmarks score the likelihood of a text, which only a "
                              "language model gives (a GPT run, a LoRA run on one, a Llama, Qwen3 or GPT-2 folder)")
    ckpt.check_tokenizer("evaluate --benchmark")
    specs = [find_benchmark(n) for n in dict.fromkeys(names)]
    questions = [load_questions(s, shots=shots, limit=limit, data_dir=data_dir) for s in specs]
    results = {}
    for spec, items in zip(specs, questions):
        start = time.perf_counter()
        if isinstance(spec, Generation):
            result = score_problems(ckpt, items, chat=uses_chat(ckpt, chat))
        else:
            result = score_questions(ckpt, spec, items, max_tokens=max_tokens)
        seconds = time.perf_counter() - start
        results[spec.name] = {**result, "shots": spec.default_shots if shots is None else shots, "limit": limit,
                              "split": spec.split, "harness_task": spec.harness_task, "seconds": round(seconds, 2),
                              "items_per_second": round(len(items) / seconds, 2)}
        log(f"{spec.name}: {len(items):,} {'problems' if isinstance(spec, Generation) else 'questions'} in "
            f"{seconds:.1f} s")
        if done is not None:
            done(spec.name, results[spec.name])
    return results


def score_problems(ckpt: Checkpoint, problems: list[Problem], *, chat: bool = False) -> dict[str, Any]:
    """GSM8K's metrics of ``problems``: the model's greedy answers, filtered, matched; a few of them as examples."""
    outputs, counts = answer_problems(ckpt, prompt_texts(ckpt, problems, chat))
    metrics, rows = score_answers(problems, outputs)
    examples = [{"question": p.turns[-1][1], "output": r["output"], "answers": r["answers"],
                 "reference": p.answer.split("#### ")[-1]} for p, r in zip(problems[:3], rows)]
    return {**metrics, "chat": chat, **counts, "examples": examples}


def score_questions(ckpt: Checkpoint, spec: MultipleChoice, items: list[Question], *,
                    max_tokens: int = 4096) -> dict[str, Any]:
    """The metrics of ``items`` (a benchmark's questions), and what could not be scored as written."""
    scored, counts = choice_scores(ckpt, items, max_tokens=max_tokens)
    kept = [q for q, pairs in enumerate(scored) if pairs is not None]
    if not kept:
        raise ConfigError(f"{spec.name}: no question could be scored (every one has a choice longer than the model's "
                          f"window of {ckpt.model.config.max_len} tokens)")
    rows = [item_scores([ll for ll, _ in scored[q] or ()], items[q].choices, items[q].answer) for q in kept]
    result = {**summary(rows, spec.metrics),
              "chance": sum(1 / len(items[q].choices) for q in kept) / len(kept), **counts}
    if items[kept[0]].subject is not None:
        result.update(_by_subject(rows, [items[q].subject for q in kept], spec.metrics))
    return result


def choice_scores(ckpt: Checkpoint, items: list[Question], *, max_tokens: int = 4096
                  ) -> tuple[list[list[tuple[float, bool]] | None], dict[str, int]]:
    """``(log-likelihood, is_greedy)`` of each choice of each question (None for a question that cannot be scored),
    and the counts of what was not scored as written."""
    model, tokenizer = ckpt.model, ckpt.tokenizer
    assert tokenizer is not None
    window = model.config.max_len
    unknown = tokenizer.unknown_id
    requests: list[Request] = []
    owners: list[int] = []  # the question of each request
    counts = {"truncated": 0, "unknown_characters": 0, "skipped": 0}
    for q, item in enumerate(items):
        context, conts = encode_pairs(tokenizer, item.context, [" " + c for c in item.choices])
        if max(map(len, conts)) > window:
            counts["skipped"] += 1
            continue
        if unknown is not None and any(unknown in ids for ids in [context, *conts]):
            counts["unknown_characters"] += 1
        parts = fit(context, conts, window)
        counts["truncated"] += len(parts) > 1
        requests += parts
        owners += [q] * len(parts)
    lls = _score(model, requests, owners, len(set(owners)), max_tokens)
    return [lls.get(q) for q in range(len(items))], counts


def _score(model: Any, requests: list[Request], owners: list[int], n_items: int,
           max_tokens: int) -> dict[int, list[tuple[float, bool]]]:
    """Each question's ``(log-likelihood, is_greedy)`` per choice, its requests put back together; a progress bar
    counts questions."""
    parts: dict[int, int] = {}
    for q in owners:
        parts[q] = parts.get(q, 0) + 1
    bar = tqdm(total=n_items, unit="question", file=sys.stderr, disable=None, leave=False, desc="scoring")

    def progress(done: list[int]) -> None:
        finished = 0
        for i in done:
            parts[owners[i]] -= 1
            finished += parts[owners[i]] == 0
        bar.update(finished)

    scored = loglikelihoods(model, requests, max_tokens=max_tokens, progress=progress)
    bar.close()
    out: dict[int, list[tuple[float, bool]]] = {}
    for q, pairs in zip(owners, scored):
        out.setdefault(q, []).extend(pairs)
    return out


def _by_subject(rows: list[dict[str, float]], subjects: list[str | None], metrics: tuple[str, ...]) -> dict[str, Any]:
    """MMLU's subjects and its four groups, and MMLU itself aggregated from the subjects as the harness does."""
    per: dict[str, list[dict[str, float]]] = {}
    for row, subject in zip(rows, subjects):
        per.setdefault(str(subject), []).append(row)
    each = {s: summary(r, metrics) for s, r in sorted(per.items())}
    groups = {g: pooled([each[s] for s in names if s in each], metrics) for g, names in GROUPS.items()
              if any(s in each for s in names)}
    return {**pooled(list(each.values()), metrics), "groups": groups, "subjects": each}
