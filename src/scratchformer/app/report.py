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

from scratchformer.app.report_benchmarks import evaluate_commands, shown_path
from scratchformer.atomic import atomic_write_text
from scratchformer.benchmarks.results import RESULTS_FILE, read_results
from scratchformer.data.benchmark_files import sha256_of
from scratchformer.errors import DataError
from scratchformer.train.logger import read_metrics

__all__ = ["cmd_report", "reproduce_command", "run_directory", "shown_path", "write_report"]

FIGURES = "report"  # the figures' folder, beside report.md
_NUMBERS = ("loss", "perplexity", "accuracy", "f1", "exact_match", "bleu", "chrf")
_FRACTIONS = ("accuracy", "f1", "exact_match")


def run_directory(path: str | Path) -> Path:
    """The run directory ``path`` names (or the run of a checkpoint inside it); anything else refused in one line."""
    from scratchformer.checkpoint import find_checkpoint

    path = Path(path)
    inside = find_checkpoint(path) == path  # a checkpoint (best/, last/): its run is the folder above
    for run in (path, path.parent) if inside else (path,):
        config = run / "config.json"
        if (run / "metrics.jsonl").is_file() and config.is_file():
            try:
                if "settings" in json.loads(config.read_text(encoding="utf-8")):
                    return run
            except (OSError, ValueError):
                break
    raise DataError(f"{path} is not a training run (a directory with the metrics.jsonl and config.json that "
                    "`scratchformer train --out DIR` writes): report describes a run")


def write_report(path: str | Path, *, samples: list[str] | None = None) -> Path:
    """Write ``RUN/report.md`` and its figures; returns its path. ``samples``: the lines to show as samples (None:
    the run's task makes them, ``inference.task_samples``)."""
    run = run_directory(path)
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    records = read_metrics(run)
    results = read_results(run / RESULTS_FILE)
    figures = run / FIGURES
    figures.mkdir(exist_ok=True)
    if samples is None:
        samples = _samples(run, config)
    parts = [_what(run, config), _data(config), _where(config, records, run), _curves(run, records, figures),
             _metrics(records), _benchmarks(results, figures), _shown(samples), _again(run, config)]
    out = run / "report.md"
    atomic_write_text(out, "\n\n".join(p for p in parts if p) + "\n", what="report.md")
    return out


def _what(run: Path, config: dict[str, Any]) -> str:
    summary = config.get("summary") or [""]
    model = config["model"]
    keys = ("arch", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "vocab_size", "norm", "activation",
            "positional", "dropout")
    changed = [line.strip() for line in summary[1:] if line.startswith("  ") and ":" in line and
               not line.strip().startswith(("train", "val", "test", "corpus", "note"))]
    lines = [f"# Run report: `{run.name}`", "", summary[0], "",
             f"**{config.get('parameters', 0):,} parameters**; task `{config['train'].get('task')}`, "
             f"{config['train'].get('max_steps', 0):,} steps of {config['train'].get('batch_size')} examples.", "",
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


def _curves(run: Path, records: list[dict[str, Any]], figures: Path) -> str:
    from scratchformer.app.plots.report import plot_training

    if not any(r.get("split") == "train" and "loss" in r for r in records):
        return "## Curves\n\nNo training step was logged."
    plot_training(records, figures / "training.png", f"{run.name}: loss, learning rate, throughput")
    return f"## Curves\n\n![loss, learning rate and throughput against the step]({FIGURES}/training.png)"


def _number(name: str, value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    return f"{100 * value:.2f} %" if name in _FRACTIONS else f"{value:.4g}"


def _metrics(records: list[dict[str, Any]]) -> str:
    vals = [r for r in records if r.get("split") == "val" and "loss" in r]
    rows = []
    if vals:
        best = min(vals, key=lambda r: r["loss"])
        rows += [("validation, last", vals[-1]), (f"validation, best (step {best['step']:,})", best)]
    rows += [("test", r) for r in records if r.get("split") == "test"]
    if not rows:
        return "## Final metrics\n\nNo evaluation was logged."
    names = [n for n in _NUMBERS if any(n in r for _, r in rows)]
    lines = ["## Final metrics", "", "| | step | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
    lines += [f"| {what} | {r['step']:,} | " + " | ".join(_number(n, r.get(n, "-")) for n in names) + " |"
              for what, r in rows]
    return "\n".join(lines)


def _benchmarks(results: dict[str, Any], figures: Path) -> str:
    from scratchformer.app.report_benchmarks import benchmark_section

    return benchmark_section(results, figures, FIGURES)


def _samples(run: Path, config: dict[str, Any]) -> list[str]:
    from scratchformer.checkpoint import load_checkpoint
    from scratchformer.inference import task_samples

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


def reproduce_command(run: Path, config: dict[str, Any], *, shown: bool = False) -> str:
    """The ``scratchformer train`` command that makes the run again: its preset and config file, its data by role,
    and each setting given on its command line (a resumed run's: every setting it kept). ``shown``: its paths as a
    page prints them (``shown_path``)."""
    import shlex

    name = shown_path if shown else str
    words = ["scratchformer", "train"]
    sources = config.get("sources", {})
    for prefix, flag in (("preset ", "--preset"), ("config ", "--config")):
        named = sorted({s[len(prefix):] for s in sources.values() if s.startswith(prefix)})
        words += [f"{flag} {shlex.quote(name(n) if flag == '--config' else n)}" for n in named]
    for role, paths in config.get("data", {}).items():
        words.append(f"--{'data' if role == 'train' else role} " + " ".join(shlex.quote(name(p)) for p in paths))
    settings = config.get("settings", {})
    words += [shlex.quote(f"{k}={settings[k]}") for k, s in sources.items()
              if s in ("command line", "the run") and k in settings]
    return " ".join([*words, "--out", shlex.quote(name(run))])


def _again(run: Path, config: dict[str, Any]) -> str:
    where = shown_path(run)
    scored = evaluate_commands(read_results(run / RESULTS_FILE), where, str(config["train"].get("task")))
    return ("## Make it again\n\n```\n" + reproduce_command(run, config, shown=True) + "\n```\n\nThen "
            + ("its benchmarks (with `SCRATCHFORMER_DATA` set to the data folder) and this page:\n\n```\n"
               + "\n".join([*scored, f"scratchformer report --ckpt {where}"]) + "\n```" if scored else
               f"`scratchformer evaluate --ckpt {where} --benchmark NAMES` for benchmarks, and "
               f"`scratchformer report --ckpt {where}` for this page."))


def cmd_report(args: Any) -> int:
    """``scratchformer report --ckpt RUN``."""
    out = write_report(args.ckpt)
    print(f"wrote {out} (figures in {out.parent / FIGURES})")
    return 0
