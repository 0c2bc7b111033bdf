"""A run as a report tells its story: its directory, the steps it took, the runs it started from (``init_from``,
followed back), and the commands that make each of them again from the folder it was started in (a run records it
in its ``config.json``, ``started``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scratchformer.app.report_benchmarks import evaluate_commands, shown_path
from scratchformer.benchmarks.results import RESULTS_FILE, read_results
from scratchformer.errors import DataError
from scratchformer.train.logger import read_metrics

__all__ = ["again", "chain", "reproduce_command", "run_directory", "started_from", "steps", "steps_taken"]


def run_directory(path: str | Path) -> Path:
    """The run directory ``path`` names (or the run of a checkpoint inside it); anything else refused in one line."""
    from scratchformer.checkpoints import find_checkpoint

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


def steps_taken(run: Path, records: list[dict[str, Any]]) -> int:
    """The steps a run took: its last checkpoint's step (the last logged step where it has none)."""
    from scratchformer.checkpoints import LAST, read_meta

    if (run / LAST / "config.json").is_file():
        return int(read_meta(run / LAST).get("step", 0))
    return max((int(r["step"]) for r in records if r.get("split") == "train"), default=0)


def steps(run: Path, config: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """``655 steps (of 733 planned: it stopped early)``, or ``733 steps``."""
    taken, planned = steps_taken(run, records), int(config["train"].get("max_steps") or 0)
    if planned and taken < planned:
        why = "the time budget max_time was spent" if config["train"].get("max_time") else "it stopped early"
        return f"{taken:,} steps (of {planned:,} planned: {why})"
    return f"{taken:,} steps"


def reproduce_command(run: Path, config: dict[str, Any], *, shown: bool = False) -> str:
    """The ``scratchformer train`` command that makes the run again, from the folder it was started in (its
    ``started``, recorded since reports could name it: then its files and ``--out`` as they were given there; an older
    run's paths as absolute, or as ``shown_path`` prints them where ``shown``): its preset and config file, its data
    by role, and each setting given on its command line (a resumed run's: every setting it kept)."""
    import shlex

    started = config.get("started") or {}
    name = shown_path if shown and not started else str
    words = ["scratchformer", "train"]
    sources = config.get("sources", {})
    for prefix, flag in (("preset ", "--preset"), ("config ", "--config")):
        named = sorted({s[len(prefix):] for s in sources.values() if s.startswith(prefix)})
        words += [f"{flag} {shlex.quote(name(n) if flag == '--config' else n)}" for n in named]
    for role, paths in (started.get("data") or config.get("data", {})).items():
        words.append(f"--{'data' if role == 'train' else role} " + " ".join(shlex.quote(name(p)) for p in paths))
    settings = config.get("settings", {})
    words += [shlex.quote(f"{k}={settings[k]}") for k, s in sources.items()
              if s in ("command line", "the run") and k in settings]
    return " ".join([*words, "--out", shlex.quote(started.get("out") or name(run))])


def chain(config: dict[str, Any]) -> list[tuple[Path | str, dict[str, Any] | None]]:
    """The runs a run started from (``init_from``), nearest first: each one's directory and config, ending with a
    model that is no run of ours (a Hugging Face folder, or one not found here: its name and None)."""
    found: list[tuple[Path | str, dict[str, Any] | None]] = []
    while init := (config.get("settings") or {}).get("init_from"):
        folder = Path((config.get("started") or {}).get("folder") or ".")
        try:
            run = run_directory(Path(init) if Path(init).is_absolute() else folder / init)
        except DataError:
            found.append((str(init), None))
            break
        if any(run == r for r, _ in found) or len(found) > 20:
            break
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        found.append((run, config))
    return found


def _about(run: Path, config: dict[str, Any]) -> str:
    records = read_metrics(run)
    return f"`{shown_path(run)}` (task={config['train'].get('task')}, {steps(run, config, records)})"


def started_from(run: Path, config: dict[str, Any]) -> str:
    ancestors = chain(config)
    if not ancestors:
        return ""
    lines = ["## Where it started", "", f"This run trained further `{config['settings']['init_from']}`:", ""]
    for where, cfg in ancestors:
        lines.append(f"- {_about(where, cfg)}" if cfg is not None and isinstance(where, Path) else
                     f"- `{where}`, a model that is not a run of this project (a Hugging Face folder, or not here)")
    return "\n".join(lines)


def _folder(config: dict[str, Any]) -> str | None:
    """The folder a run was started in, as the page names it (``.`` when it is where the report is written)."""
    folder = (config.get("started") or {}).get("folder")
    if folder is None:
        return None
    return "." if Path(folder).resolve() == Path.cwd().resolve() else folder


def again(run: Path, config: dict[str, Any]) -> str:
    import shlex

    where = shown_path(run)
    steps = [(r, c) for r, c in reversed(chain(config)) if c is not None and isinstance(r, Path)] + [(run, config)]
    commands, here = [], "."
    for r, c in steps:
        folder = _folder(c)
        if folder is not None and folder != here:
            commands.append(f"cd {shlex.quote(folder)}")
            here = folder
        commands.append(reproduce_command(r, c, shown=True))
    own = sorted({p for _, c in steps for paths in ((c.get("started") or {}).get("data") or {}).values()
                  for p in paths})
    note = (f"\n\nYour own files, which these commands read (at these paths, from the folder each runs in; their "
            f"sha256 under Data): {', '.join(f'`{p}`' for p in own)}." if own else "")
    first = ("From the folder each run was started in (`cd` where it changes)" if any(_folder(c) for _, c in steps)
             else "From the folder the run was started in")
    chained = " the runs it started from, then this one" if len(steps) > 1 else ""
    scored = evaluate_commands(read_results(run / RESULTS_FILE), where, str(config["train"].get("task")))
    return (f"## Make it again\n\n{first},{chained}:\n\n```\n" + "\n".join(commands) + f"\n```{note}\n\nThen "
            + ("its benchmarks (with `SCRATCHFORMER_DATA` set to the data folder) and this page:\n\n```\n"
               + "\n".join([*scored, f"scratchformer report --ckpt {where}"]) + "\n```" if scored else
               f"`scratchformer evaluate --ckpt {where} --benchmark NAMES` for benchmarks, and "
               f"`scratchformer report --ckpt {where}` for this page."))
