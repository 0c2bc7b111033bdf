"""``scratchformer report --ckpt RUN``: one page that says what a training run was and how it scored, to read or to
paste into a model card: ``RUN/report.md``, its figures in ``RUN/report/``. It writes nothing else.

The page: what was trained (the model, its parameters, the settings and where each came from), the data (each
split, its size, each file's sha256 and size), where and when (device, versions, time), the curves (loss, learning
rate, throughput), the final metrics, every benchmark result the run holds (``benchmarks.json``, written by
``evaluate --benchmark``), a few samples (the task's own, as the run showed them at its end: its data must be
there), and the one command that makes the run again. A folder that is not a run is refused in one line.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from scratchformer.app.report_benchmarks import shown_path
from scratchformer.app.report_runs import again, run_directory, started_from, steps
from scratchformer.atomic import atomic_write_text
from scratchformer.benchmarks.results import RESULTS_FILE, read_results
from scratchformer.data.files import sha256_of
from scratchformer.errors import DataError
from scratchformer.registry import METRICS, TASKS, format_metric, lower_is_better
from scratchformer.train.logger import read_metrics

__all__ = ["cmd_report", "write_report"]

FIGURES = "report"  # the figures' folder, beside report.md


def write_report(path: str | Path, *, samples: list[str] | None = None) -> Path:
    """Write ``RUN/report.md`` and its figures; returns its path. ``samples``: the lines to show as samples (None:
    the run's task makes them, ``inference.task_samples``)."""
    from scratchformer.extras import require

    run = run_directory(path)
    require("matplotlib", "plots")  # before anything is written: no empty figures' folder left behind
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    records = read_metrics(run)
    results = read_results(run / RESULTS_FILE)
    figures = run / FIGURES
    figures.mkdir(exist_ok=True)
    if samples is None:
        samples = _samples(run, config)
    parts = [_what(run, config, records), started_from(run, config), _data(config), _where(config, records, run),
             _curves(run, config, records, figures), _metrics(records, config), _benchmarks(results, figures),
             _shown(samples), again(run, config)]
    out = run / "report.md"
    atomic_write_text(out, "\n\n".join(p for p in parts if p) + "\n", what="report.md")
    return out


def _what(run: Path, config: dict[str, Any], records: list[dict[str, Any]]) -> str:
    summary = config.get("summary") or [""]
    model = config["model"]
    keys = ("arch", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "vocab_size", "norm", "activation",
            "positional", "dropout")
    changed = [line.strip() for line in summary[1:] if line.startswith("  ") and ":" in line and
               not line.strip().startswith(("train", "val", "test", "corpus", "note"))]
    lines = [f"# Run report: `{run.name}`", "", summary[0], "",
             f"**{config.get('parameters', 0):,} parameters**; task `{config['train'].get('task')}`, "
             f"{steps(run, config, records)} of {config['train'].get('batch_size')} examples.", "",
             "| model setting | value |", "|---|---|", *(f"| `{k}` | {model.get(k)} |" for k in keys if k in model),
             "", "Settings beyond the task's defaults, and where each came from:", "",
             *(f"- {_config_named(line)}" for line in changed or ["none"])]
    return "\n".join(lines)


def _config_named(line: str) -> str:
    """A summary line of settings, its config file (``config FILE: ...``) named as the page names paths."""
    if not line.startswith("config "):
        return line
    path, _, rest = line[len("config "):].partition(": ")
    return f"config {shown_path(path)}: {rest}"


def _files(config: dict[str, Any]) -> list[tuple[Path, str | None]]:
    """The data files a run read and their published sha256 where known: the user's by role, or its named
    dataset's in the first data folder that holds them all (looked for as the run looked, never downloaded)."""
    import os

    from scratchformer.data.named import DATASETS, ENV_VAR, cache_dir

    paths: list[tuple[Path, str | None]] = [(Path(p), None) for role in config.get("data", {}).values() for p in role]
    dataset = config["train"].get("dataset")
    if paths or dataset not in DATASETS:
        return paths
    roots = [Path(p).expanduser() for p in (config["train"].get("data_dir"), os.environ.get(ENV_VAR)) if p]
    files = DATASETS[dataset][1]
    root = next((r for r in [*roots, cache_dir()] if all((r / f.path).is_file() for f in files)), None)
    return [(root / f.path if root else Path(f.path), f.sha256) for f in files]


def _hash(path: Path, published: str | None) -> str:
    if not path.is_file():
        return f"| `{path.name}` | - | not found here (set SCRATCHFORMER_DATA to the data folder) |"
    digest = sha256_of(path)
    said = "" if published is None else (" (the published one)" if digest == published else
                                         f" (**not** the published {published[:12]}...)")
    return f"| `{path.name}` | {path.stat().st_size:,} | `{digest}`{said} |"


def _data(config: dict[str, Any]) -> str:
    lines = ["## Data", "", "| split | from | size |", "|---|---|---|"]
    given = [p for role in config.get("data", {}).values() for p in role]
    for split, v in config.get("splits", {}).items():
        origin = v["from"]
        for path in given:  # the user's files as the page names them (shown_path)
            origin = origin.replace(path, shown_path(path))
        lines.append(f"| {split} | {origin} | {v['size']} |")
    files = _files(config)
    if files:
        lines += ["", "| file | bytes | sha256 (hashed when this report was written) |", "|---|---:|---|"]
        lines += [_hash(p, published) for p, published in files]
    for corpus in config.get("corpora", []):
        tokens = ", ".join(f"{n:,} {k}" for k, n in corpus["tokens"].items())
        lines.append(f"\nPrepared corpus of `{Path(corpus['source']).name}`: {tokens} tokens, ids {corpus['id_type']} "
                     f"(vocabulary {corpus['vocab_size']:,}).")
    return "\n".join(lines)


def _when(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _where(config: dict[str, Any], records: list[dict[str, Any]], run: Path) -> str:
    env = config.get("environment")
    train = [r for r in records if r.get("split") == "train"]
    took = max((float(r.get("time_s", 0)) for r in records), default=0.0)
    lines = ["## Where and when", ""]
    if env:
        lines += [f"- {k}: {v}" for k, v in env.items()]
    else:
        device = (config.get("summary") or [""])[0].rpartition("; ")[2]
        lines += [f"- device: {device} (this run recorded no versions: runs made before reports recorded none)"]
    lines += [f"- training: {took:,.0f} s for {train[-1]['step'] if train else 0:,} steps (logged time, evaluations "
              "included)",
              f"- config.json written {_when((run / 'config.json').stat().st_mtime)}; last metrics written "
              f"{_when((run / 'metrics.jsonl').stat().st_mtime)}"]
    return "\n".join(lines)


def _curves(run: Path, config: dict[str, Any], records: list[dict[str, Any]], figures: Path) -> str:
    from scratchformer.app.plots.report import plot_training

    if not any(r.get("split") == "train" and "loss" in r for r in records):
        return "## Curves\n\nNo training step was logged."
    task = TASKS.get(str(config["train"].get("task")))
    unit = task.loss_unit if task is not None else "nats"
    plot_training(records, figures / "training.png", f"{run.name}: loss, learning rate, throughput", unit)
    return (f"## Curves\n\nThe loss in {unit}, the learning rate and the throughput at each logged step:\n\n"
            f"![loss, learning rate and throughput against the step]({FIGURES}/training.png)")




def _metrics(records: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """The last and the best validation (best by the metric the run selected its checkpoint by, ``select_by``) and the
    test, in the task's own metrics."""
    train = config["train"]
    task = TASKS.get(str(train.get("task")))
    by = str(train.get("select_by") or (task.select_by if task is not None else "loss"))
    vals = [r for r in records if r.get("split") == "val" and by in r]
    rows = []
    if vals:
        best = (min if lower_is_better(by) else max)(vals, key=lambda r: r[by])
        rows += [("validation, last", vals[-1]), (f"validation, best {by} (step {best['step']:,})", best)]
    rows += [("test", r) for r in records if r.get("split") == "test"]
    if not rows:
        return "## Final metrics\n\nNo evaluation was logged."
    known = task.validation_metrics if task is not None else ()
    names = [n for n in dict.fromkeys([*known, *METRICS]) if any(n in r for _, r in rows)]
    heads = [what if "(step" in what else f"{what} (step {r['step']:,})" for what, r in rows]
    lines = ["## Final metrics", "", "| | " + " | ".join(heads) + " |", "|---|" + "---:|" * len(rows)]
    lines += [f"| {_label(n)} | " + " | ".join(format_metric(n, r.get(n, "-")) for _, r in rows) + " |" for n in names]
    return "\n".join(lines)


def _label(name: str) -> str:
    """A metric as a reader names it, and as ``metrics.jsonl`` keys it: ``reward accuracy (reward_accuracy)``."""
    return f"{name.replace('_', ' ')} (`{name}`)" if "_" in name else name


def _benchmarks(results: dict[str, Any], figures: Path) -> str:
    from scratchformer.app.report_benchmarks import benchmark_section

    return benchmark_section(results, figures, FIGURES)


def _samples(run: Path, config: dict[str, Any]) -> list[str]:
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.tasks.inference import task_samples

    if not all(p.is_file() for p, _ in _files(config)):
        return ["(none: the run's data is not here; set SCRATCHFORMER_DATA to the data folder)"]
    try:
        return task_samples(load_checkpoint(run))
    except (DataError, OSError) as err:
        return [f"(none: {err})"]


def _shown(samples: list[str]) -> str:
    if not samples:
        return ""
    return "## Samples\n\nAs the run shows them at its end (held-out data):\n\n```\n" + "\n".join(samples) + "\n```"


def cmd_report(args: Any) -> int:
    """``scratchformer report --ckpt RUN``."""
    out = write_report(args.ckpt)
    print(f"wrote {out} (figures in {out.parent / FIGURES})")
    return 0
