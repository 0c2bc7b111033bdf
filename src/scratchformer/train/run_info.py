"""What a run says about itself: at its start on the terminal, and in its ``config.json``.

The block names the model, the settings that differ from the task's defaults (with where each came from:
a preset, a config file, the command line), the data actually used (each split's file, how it was split,
how many examples or tokens it has; each prepared corpus with its tokens, id type and whether this run
prepared it or reused it; what was skipped or truncated, and why), and the schedule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from scratchformer.data.corpus.cache import corpora_dir
from scratchformer.data.sources import DataFiles
from scratchformer.nn.config import ModelConfig
from scratchformer.train.config import TrainConfig
from scratchformer.train.corpora import describe
from scratchformer.train.distributed import DistInfo
from scratchformer.train.optim import Schedule
from scratchformer.train.settings import Resolved, task_defaults
from scratchformer.train.tasks import Task

FAMILY = {"seq2seq": "an encoder-decoder", "gpt": "a decoder-only GPT", "encoder": "an encoder",
          "vit": "a Vision Transformer"}


@dataclass
class RunInfo:
    """The flat settings of a run, where each came from, and its data files."""

    settings: dict[str, Any]
    source: dict[str, str]
    data: DataFiles

    @classmethod
    def from_resolved(cls, resolved: Resolved) -> RunInfo:
        return cls(dict(resolved.settings), dict(resolved.source), resolved.data)

    @classmethod
    def from_config(cls, model_kw: dict[str, Any], cfg: TrainConfig, data: DataFiles) -> RunInfo:
        """A run started from Python with ready-made configs: its settings are those that differ from the
        configs' own defaults."""
        defaults = TrainConfig(task=cfg.task)
        settings = {"task": cfg.task}
        settings |= {f.name: getattr(cfg, f.name) for f in fields(TrainConfig)
                     if getattr(cfg, f.name) != getattr(defaults, f.name)}
        settings |= {k: v for k, v in model_kw.items() if k != "arch"}
        return cls(settings, dict.fromkeys(settings, "given"), data)

    def changed(self) -> dict[str, list[str]]:
        """Source -> ``key=value`` of each setting not at the task's default (or, for a key the task does not
        set, the field's own default)."""
        task = self.settings["task"]
        base = {f.name: f.default for cls in (ModelConfig, TrainConfig) for f in fields(cls)}
        base |= task_defaults(task, self.settings.get("init_from")) | {"task": task}
        out: dict[str, list[str]] = {}
        for key, value in sorted(self.settings.items()):
            if base.get(key, _UNSET) != value:
                out.setdefault(self.source.get(key, "given"), []).append(f"{key}={value}")
        return out

    def summary(self, task: Task, model_cfg: ModelConfig, model: nn.Module, schedule: Schedule, info: DistInfo,
                device: torch.device) -> list[str]:
        cfg = task.cfg
        n = sum(p.numel() for p in model.parameters())
        lines = [f"task={cfg.task}: {FAMILY[model_cfg.arch]}, {n:,} parameters (d_model {model_cfg.d_model}, "
                 f"{plural(model_cfg.n_layers, 'layer')}, {plural(model_cfg.n_heads, 'head')}, d_ff {model_cfg.d_ff}, "
                 f"{_inputs(task, model_cfg)}; {plural(info.world_size, 'process', 'processes')} on {device}"]
        changed = self.changed()
        lines.append(f"settings beyond task={cfg.task}'s defaults:" + ("" if changed else " none"))
        lines += [f"  {source}: {' '.join(items)}" for source, items in changed.items()]
        lines += self.data_lines(task)
        rates = f"from {schedule.lr:g} to {schedule.min_lr:g}" if schedule.kind == "cosine" else f"lr {schedule.lr:g}"
        lines.append(f"schedule: {schedule.total:,} steps, warm-up {schedule.warmup:,}, {schedule.kind} {rates}"
                     + (f", at most {cfg.max_time}" if cfg.max_time else ""))
        return lines

    def data_lines(self, task: Task) -> list[str]:
        """The data block: each split's origin and size; each prepared corpus (tokens, id type, reused or
        prepared now); what was skipped."""
        if task.data is None:  # a built-in task, or images (read into memory: nothing prepared)
            notes = task.raw.notes if task.cfg.task == "image" else []
            return ["data:", *(f"  {split:<5} {origin}: {size}" for split, origin, size in self.splits(task)),
                    *(f"  note: {note}" for note in notes)]
        lines = [f"data (prepared corpora in {corpora_dir()}):"]
        lines += [f"  {split:<5} {origin}: {size}" for split, origin, size in self.splits(task)]
        for p in task.data.prepared:
            lines.append(f"  corpus {p.source}: {describe(p.corpus)}; "
                         + ("reused" if p.reused else "prepared by this run"))
        return lines + [f"  note: {note}" for note in task.data.notes]

    def splits(self, task: Task) -> list[tuple[str, str, str]]:
        """(split, where it came from, its size) for each split the task has."""
        unit = {"lm": "tokens", "image": "images"}.get(task.cfg.task, "examples")
        if task.cfg.task == "image":  # images in memory (data.image_splits), not prepared corpora
            return [(split, task.raw.origin.get(split, split), f"{task.split_size(split):,} {unit}")
                    for split in ("train", "val", "test") if task.has_split(split)]
        if task.data is None:  # a built-in task
            n = task.cfg.n_test
            return [("train", "fresh random strings at every step (never a held-out one)", "unlimited"),
                    ("val", f"{n:,} held-out strings", f"{n:,} examples"),
                    ("test", f"{n:,} other held-out strings", f"{n:,} examples")]
        return [(split, task.data.origin.get(split, split), f"{task.split_size(split):,} {unit}")
                for split in ("train", "val", "test") if task.has_split(split)]

    @staticmethod
    def corpora(task: Task) -> list[dict[str, Any]]:
        """Each prepared corpus the run reads, for ``config.json``."""
        if task.data is None:
            return []
        return [{"source": str(p.source), "path": str(p.corpus.path), "reused": p.reused,
                 "id_type": p.corpus.id_type, "vocab_size": p.corpus.vocab_size,
                 "tokens": {name: f.n_items for name, f in p.corpus.fields.items() if not name.endswith(".text")},
                 "rows": next(iter(p.corpus.fields.values())).n_rows, "notes": p.corpus.notes}
                for p in task.data.prepared]

    def to_json(self, model_cfg: ModelConfig, cfg: TrainConfig, task: Task, model: nn.Module,
                summary: list[str]) -> str:
        return json.dumps({
            "model": model_cfg.to_dict(), "train": cfg.__dict__,
            "settings": self.settings, "sources": self.source, "data": self.data.to_dict(),
            "splits": {split: {"from": origin, "size": size} for split, origin, size in self.splits(task)},
            "corpora": self.corpora(task),
            "parameters": sum(p.numel() for p in model.parameters()), "summary": summary,
        }, indent=2)


_UNSET = object()


def _inputs(task: Task, cfg: ModelConfig) -> str:
    """What the model reads, for the first line of the summary: its tokens, or its images and their patches."""
    if cfg.arch == "vit":
        S, P = cfg.image_size, cfg.patch_size
        return (f"{S} x {S} images with {plural(cfg.channels, 'channel')} in {cfg.n_patches} patches of {P} x {P} "
                f"and a class token), {plural(cfg.n_classes, 'class', 'classes')}")
    tok = type(task.tokenizer).__name__.removesuffix("Tokenizer").lower() or "custom"
    return f"max_len {cfg.max_len}), vocabulary {cfg.vocab_size:,} ({tok} tokens)"


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
