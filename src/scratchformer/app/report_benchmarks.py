"""The benchmarks section of a run's report (``app/report.py``): every result of the run's ``benchmarks.json`` as a
table under the harness's metric names, beside chance, with what each scored and a figure; GSM8K's first answers;
the ``evaluate`` commands that score them again; and how the page names a path (``shown_path``: never by a folder of
the machine it was written on)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["benchmark_section", "evaluate_commands", "shown_path"]


def shown_path(path: str | Path) -> str:
    """``path`` as a page may print it, naming no folder of the machine it was written on: as given where relative;
    else relative to the current directory, or ``$SCRATCHFORMER_DATA/...`` inside the data folder, or its name."""
    import os

    from scratchformer.data.named import ENV_VAR

    path = Path(path)
    if not path.is_absolute():
        return str(path)
    for root, prefix in ((Path.cwd(), ""), (os.environ.get(ENV_VAR), f"${ENV_VAR}/")):
        if root and path.is_relative_to(Path(root).resolve()):
            return prefix + str(path.relative_to(Path(root).resolve()))
    return path.name


def _pct(r: dict[str, Any], metric: str) -> str:
    if metric not in r:
        return "-"
    name, _, where = metric.partition(",")
    error = r.get(f"{name}_stderr" + (f",{where}" if where else ""))
    return f"{100 * r[metric]:.2f}" + (f" ± {100 * error:.2f}" if error is not None else "")


def _notes(r: dict[str, Any]) -> str:
    notes = [f"{r[k]:,} {words}" for k, words in (("truncated", "prompts cut to the window"),
                                                   ("skipped", "not scored (a choice longer than the window)"),
                                                   ("unknown_characters", "with characters the vocabulary lacks"))
             if r.get(k)]
    if r.get("new_tokens") is not None and r["new_tokens"] < 256:
        notes.append(f"answers cut at {r['new_tokens']} tokens, half the window (the harness's 256 do not fit)")
    if r.get("chat"):
        notes.append("asked in the chat form (the model's template)")
    return "; ".join(notes) or "-"


def _paths_shown(text: str) -> str:
    """``text`` with each absolute path in it (a file of the user's, as ``evaluate`` was given it) as the page names
    paths (``shown_path``)."""
    return re.sub(r"(?<![\w.])/[^\s()|,;]+", lambda m: shown_path(m.group(0)), text)


def _rows(results: dict[str, Any]) -> list[str]:
    rows = []
    for name, r in results.items():
        shots = f"{r.get('shots', 0)}-shot" + (f", first {r['limit']:,}" if r.get("limit") else "")
        if "chance" in r:
            scores = f"acc {_pct(r, 'acc')}" + (f"; acc_norm {_pct(r, 'acc_norm')}" if "acc_norm" in r else "")
            chance = f"{100 * r['chance']:.2f}"
        else:
            scores = (f"exact_match strict-match {_pct(r, 'exact_match,strict-match')}; flexible-extract "
                      f"{_pct(r, 'exact_match,flexible-extract')}")
            chance = "≈ 0"
        split = _paths_shown(r.get("split", ""))
        rows.append(f"| {name} | {split} ({shots}) | {r['n']:,} | {scores} | {chance} | {_notes(r)} |")
        rows += [f"| {name}: {g} | | {v['n']:,} | acc {_pct(v, 'acc')} | | |" for g, v in r.get("groups", {}).items()]
    return rows


def _bars(results: dict[str, Any]) -> list[tuple[str, float, float | None, float | None]]:
    bars: list[tuple[str, float, float | None, float | None]] = []
    for name, r in results.items():
        if "chance" in r:
            for metric in ("acc", "acc_norm"):
                if metric in r:
                    error = r.get(f"{metric}_stderr")
                    bars.append((f"{name} {metric}", 100 * r[metric], error and 100 * error, 100 * r["chance"]))
        else:
            for where in ("strict-match", "flexible-extract"):
                error = r.get(f"exact_match_stderr,{where}")
                bars.append((f"{name} {where}", 100 * r[f"exact_match,{where}"], error and 100 * error, None))
    return bars


def _gsm8k(results: dict[str, Any]) -> list[str]:
    examples = [(name, e) for name, r in results.items() for e in r.get("examples", [])[:2]]
    if not examples:
        return []
    lines = ["", "The first answers, as generated (cut at the stop sequences) and as each filter read them:", ""]
    for name, e in examples:
        question = e["question"].removeprefix("Question: ").removesuffix("\nAnswer:")
        lines += [f"- {name}: *{question[:160]}{'...' if len(question) > 160 else ''}* (answer {e['reference']})",
                  f"  - generated: `{' '.join(e['output'].split())[:200] or '(nothing)'}`",
                  f"  - strict-match: `{e['answers']['strict-match']}`, flexible-extract: "
                  f"`{e['answers']['flexible-extract']}`"]
    return lines


def benchmark_section(results: dict[str, Any], figures: Path, folder: str) -> str:
    """The section (with ``figures/benchmarks.png``), or a line saying how to add results."""
    if not results:
        return ("## Benchmarks\n\nNone yet: `scratchformer evaluate --ckpt RUN --benchmark arc_easy,hellaswag,mmlu,"
                "gsm8k` scores the run and keeps the results in its `benchmarks.json`, which this page reads.")
    from scratchformer.app.plots.report import plot_benchmarks

    plot_benchmarks(_bars(results), figures / "benchmarks.png", "benchmark scores (chance marked where a guess scores)")
    lines = ["## Benchmarks", "", "Scored as lm-evaluation-harness 0.4.13 scores them (`evaluate --benchmark`; "
             "the ARC files are the validation splits, the harness's tasks score the test splits); scores in %, "
             "± standard error.", "", "| benchmark | scored on | questions | scores (%) | chance (%) | notes |",
             "|---|---|---:|---|---:|---|", *_rows(results), "",
             f"![benchmark scores beside chance]({folder}/benchmarks.png)", *_gsm8k(results)]
    return "\n".join(lines)


def evaluate_commands(results: dict[str, Any], run: str, task: str) -> list[str]:
    """The ``scratchformer evaluate`` commands that score the run's benchmarks again, one per set of options (the
    limit, the shots where not the task's own, the chat form where the run has a template to answer in); a file of
    the user's is named by its stem (``NAME.jsonl``: its path is not kept)."""
    from scratchformer.benchmarks import BENCHMARKS
    from scratchformer.registry import TASKS

    entry = TASKS.get(task)
    templated = entry is not None and "template" in entry.own_settings  # it answers in a chat template
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, r in results.items():
        known = BENCHMARKS.get(name)
        flags = [f"--limit {r['limit']}"] if r.get("limit") else []
        if known is not None and r.get("shots", known.default_shots) != known.default_shots:
            flags.append(f"--shots {r['shots']}")
        if r.get("chat") or ("chat" in r and templated):
            flags.append(f"--chat {'yes' if r['chat'] else 'no'}")
        groups.setdefault(tuple(flags), []).append(name if known is not None else f"{name}.jsonl")
    return [" ".join(["scratchformer evaluate --ckpt", run, "--benchmark", ",".join(names), *flags])
            for flags, names in groups.items()]
