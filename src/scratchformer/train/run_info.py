"""What a run says about itself: at its start on the terminal, and in its ``config.json``.

The block names the model, the settings that differ from the task's defaults (with where each came from:
a preset, a config file, the command line), the data actually used (each split's file, how it was split,
how many examples or tokens it has; each prepared corpus with its tokens, id type and whether this run
prepared it or reused it; what was skipped or truncated, and why), and the schedule.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch import nn

from scratchformer.data.corpus.cache import corpora_dir
from scratchformer.data.prepared import describe
from scratchformer.distributed import DistInfo
from scratchformer.families import family
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.base import Task
from scratchformer.train.optim import Schedule

__all__ = ["environment", "run_json", "summary"]

def summary(run: Resolved, task: Task, model: nn.Module, schedule: Schedule, info: DistInfo,
            device: torch.device, sharded: bool = False) -> list[str]:
    """The lines a run prints at its start (module docstring)."""
    cfg, model_cfg = run.train, model.config
    n = sum(p.numel() for p in model.parameters())
    lines = [f"task={cfg.task}: {family(model_cfg.arch).structure}, {n:,} parameters (d_model {model_cfg.d_model}, "
             f"{plural(model_cfg.n_layers, 'layer')}, {plural(model_cfg.n_heads, 'head')}, d_ff {model_cfg.d_ff}, "
             f"{_inputs(task, model_cfg)}; {plural(info.world_size, 'process', 'processes')} on {device}"
             + (", the model sharded across them (FSDP2)" if sharded else "")]
    changed = run.changed()
    timed = changed.pop("set from max_time", None)  # max_steps=0 there: the steps max_time buys, estimated
    lines.append(f"settings beyond task={cfg.task}'s defaults:" + ("" if changed or timed else " none"))
    lines += [f"  {source}: {' '.join(items)}" for source, items in changed.items()]
    if timed:
        lines.append(f"  max_time={cfg.max_time}: max_steps={schedule.total:,}, the steps that fit at the speed of "
                     "the first steps (fitted again as the run goes)")
    lines += data_lines(task)
    rates = f"from {schedule.lr:g} to {schedule.min_lr:g}" if schedule.kind == "cosine" else f"lr {schedule.lr:g}"
    lines.append(f"schedule: {schedule.total:,} steps, warm-up {schedule.warmup:,}, {schedule.kind} {rates}"
                 + (f", at most {cfg.max_time}" if cfg.max_time else ""))
    return lines


def data_lines(task: Task) -> list[str]:
    """The data block: each split's origin and size; each prepared corpus (tokens, id type, reused or prepared
    now); what was skipped."""
    prepared = task.prepared()
    lines = [f"data (prepared corpora in {corpora_dir()}):" if prepared else "data:"]
    for split, origin, size in task.split_origins():
        lines.append(f"  {split:<5} {origin}: {size}")
    for p in prepared:
        how = "reused" if p.reused else "prepared by this run"
        lines.append(f"  corpus {p.source}: {describe(p.corpus)}; {how}")
    for note in task.data_notes():
        lines.append(f"  note: {note}")
    return lines


def _corpora(task: Task) -> list[dict[str, Any]]:
    """Each prepared corpus the run reads, for ``config.json``."""
    out = []
    for p in task.prepared():
        fields = p.corpus.fields
        out.append({"source": str(p.source), "path": str(p.corpus.path), "reused": p.reused,
                    "id_type": p.corpus.id_type, "vocab_size": p.corpus.vocab_size,
                    "tokens": {name: f.n_items for name, f in fields.items() if not name.endswith(".text")},
                    "rows": next(iter(fields.values())).n_rows, "notes": p.corpus.notes})
    return out


def environment(device: torch.device | None = None) -> dict[str, Any]:
    """Where a run runs and with what (a run's report shows it): the versions, the machine, the device, the threads
    and processes, and when it started (the last start, for a resumed run)."""
    import datetime
    import os
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("scratchformer")
    except PackageNotFoundError:
        ours = "not installed as a package"
    device = device or torch.device("cpu")
    dist = torch.distributed.is_available() and torch.distributed.is_initialized()
    processes = torch.distributed.get_world_size() if dist else 1
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{os.cpu_count()} CPU cores"
    return {"started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": f"{device.type} ({name})", "processes": processes, "threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__, "scratchformer": ours,
            "platform": platform.platform()}


def run_json(run: Resolved, cfg: TrainConfig, task: Task, model: nn.Module, lines: list[str],
             device: torch.device | None = None, out: str | None = None) -> str:
    """A run's ``config.json``: the model and training configs, the settings and where each came from, the
    files, the splits and corpora, the summary it printed, where it ran (``environment``) and how it was started
    (``started``: the folder it was started in, its ``--out`` and its files as given there, so that a report's
    command that makes it again runs from that folder)."""
    import os

    given = {role: [str(p) for p in paths] for role, paths in
             (("train", run.data.train), ("val", run.data.val), ("test", run.data.test)) if paths}
    return json.dumps({
        "model": model.config.to_dict(), "train": cfg.__dict__,
        "settings": run.settings, "sources": run.source, "data": run.data.to_dict(),
        "splits": {split: {"from": origin, "size": size} for split, origin, size in task.split_origins()},
        "corpora": _corpora(task), "parameters": sum(p.numel() for p in model.parameters()), "summary": lines,
        "environment": environment(device),
        "started": {"folder": os.getcwd(), "out": out, "data": given},
    }, indent=2)


def _inputs(task: Task, cfg: ModelConfig) -> str:
    """What the model reads, for the first line of the summary: its tokens, or its images and their patches."""
    if family(cfg.arch).reads_pixels:
        S, P = cfg.image_size, cfg.patch_size
        return (f"{S} x {S} images with {plural(cfg.channels, 'channel')} in {cfg.n_patches} patches of {P} x {P} "
                f"and a class token), {plural(cfg.n_classes, 'class', 'classes')}")
    tok = type(task.tokenizer).__name__.removesuffix("Tokenizer").lower() or "custom"
    return f"max_len {cfg.max_len}), vocabulary {cfg.vocab_size:,} ({tok} tokens)"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
