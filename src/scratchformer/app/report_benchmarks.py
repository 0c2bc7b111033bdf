"""The benchmarks section of a run's report (``app/report.py``): every result of the run's ``benchmarks.json`` as a
table under the harness's metric names, beside chance, with what each scored and a figure; GSM8K's first answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["benchmark_section"]


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
        notes.append(f"answers cut at {r['new_tokens']} tokens (the window)")
    if r.get("chat"):
        notes.append("asked in the chat form (the model's template)")
    return "; ".join(notes) or "-"


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
        rows.append(f"| {name} | {r.get('split', '')} ({shots}) | {r['n']:,} | {scores} | {chance} | {_notes(r)} |")
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
