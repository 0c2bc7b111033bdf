"""``scratchformer evaluate --ckpt X --benchmark NAMES [--limit N] [--shots K] [--chat auto|yes|no]
[--output OUT.json]``: a language model's scores on benchmarks, printed as a table and merged into the results file
(``benchmarks/results.py``)."""

from __future__ import annotations

import argparse
from typing import Any

from scratchformer.benchmarks.gsm8k import MAX_NEW_TOKENS
from scratchformer.benchmarks.results import merge_results, read_results, results_path
from scratchformer.benchmarks.run import evaluate_benchmarks
from scratchformer.checkpoints import find_checkpoint, load_checkpoint
from scratchformer.errors import ConfigError

__all__ = ["benchmark_table", "evaluate_on_benchmarks"]

NOTES = {"truncated": "prompts cut from the left to the model's window",
         "unknown_characters": "with a character the vocabulary lacks, scored as its unknown token",
         "skipped": "not scored: a choice longer than the model's window"}


def evaluate_on_benchmarks(args: argparse.Namespace) -> int:
    given = [flag for flag, value in (("--data", args.data), ("--split", args.split)) if value is not None]
    if given:
        raise ConfigError(f"--benchmark replaces {given[0]}: give one of them")
    if len(args.ckpt) > 1:
        raise ConfigError("--benchmark scores one checkpoint: give one --ckpt")
    names = [n.strip() for n in args.benchmark.split(",") if n.strip()]
    if not names:
        raise ConfigError("--benchmark names no benchmark (e.g. --benchmark arc_easy,hellaswag)")
    path, beside = results_path(args.ckpt[0], args.output)
    paths = [path]
    if args.output is not None:  # a run keeps every result it took, for its report, beside the file asked for
        own, own_beside = results_path(args.ckpt[0])
        if not own_beside and own.resolve() != path.resolve():
            paths.append(own)
    for p in paths:
        read_results(p)  # an unreadable results file is said now, not after the scoring
    ckpt = load_checkpoint(args.ckpt[0])
    where = {"path": str(find_checkpoint(args.ckpt[0]) or args.ckpt[0]), "step": ckpt.step}

    def save(name: str, result: dict[str, Any]) -> None:  # each benchmark as it is scored
        result["checkpoint"] = where
        for p in paths:
            merge_results(p, {name: result})

    results = evaluate_benchmarks(ckpt, names, shots=args.shots, limit=args.limit, data_dir=args.data_dir,
                                  chat=args.chat, done=save)
    print(benchmark_table(results))
    if beside:
        print(f"wrote {path} (a Hugging Face folder is not written into: the results are in the current directory)")
    else:
        print(f"wrote {' and '.join(map(str, paths))}")
    return 0


def _score(result: dict[str, Any], metric: str) -> str:
    if metric not in result:
        return "-"
    name, _, filter_name = metric.partition(",")  # exact_match,strict-match: its error is exact_match_stderr,...
    error = result.get(f"{name}_stderr" + (f",{filter_name}" if filter_name else ""))
    return f"{100 * result[metric]:.2f} %" + (f" ± {100 * error:.2f}" if error is not None else "")


def benchmark_table(results: dict[str, dict[str, Any]]) -> str:
    """The results as a person reads them: each benchmark's questions, scores (± standard error), chance level,
    what was scored, and MMLU's four groups under it; GSM8K's exact match by each of its filters, under a heading
    of its own."""
    chosen = {n: r for n, r in results.items() if "chance" in r}
    generated = {n: r for n, r in results.items() if "chance" not in r}
    lines = [f"{'benchmark':<20} {'questions':>9}  {'acc':<17} {'acc_norm':<17} {'chance':>7}  scored on"] \
        if chosen else []
    for name, r in chosen.items():
        lines.append(f"{name:<20} {r['n']:>9,}  {_score(r, 'acc'):<17} {_score(r, 'acc_norm'):<17} "
                     f"{100 * r['chance']:>5.2f} %  {r['split']}{_shots(r)}")
        for group, g in r.get("groups", {}).items():
            lines.append(f"  {group:<18} {g['n']:>9,}  {_score(g, 'acc'):<17}")
        lines += _notes(name, r)
    if generated:
        lines.append(f"{'benchmark':<20} {'problems':>9}  {'strict-match':<17} {'flexible-extract':<17} "
                     "(exact match)  scored on")
    for name, r in generated.items():
        form = ", chat form" if r.get("chat") else ""
        lines.append(f"{name:<20} {r['n']:>9,}  {_score(r, 'exact_match,strict-match'):<17} "
                     f"{_score(r, 'exact_match,flexible-extract'):<17} {'':<13}  {r['split']}{_shots(r)}{form}")
        lines += _notes(name, r)
    return "\n".join(lines)


def _shots(r: dict[str, Any]) -> str:
    return f", {r['shots']}-shot" if r["shots"] else ""


def _notes(name: str, r: dict[str, Any]) -> list[str]:
    notes = [f"{r[key]:,} {words}" for key, words in NOTES.items() if r.get(key)]
    if r.get("new_tokens") is not None and r["new_tokens"] < MAX_NEW_TOKENS:
        notes.append(f"answers cut at {r['new_tokens']} tokens, half the model's window (the harness's "
                     f"{MAX_NEW_TOKENS} do not fit)")
    return [f"  ({name}: {'; '.join(notes)})"] if notes else []
