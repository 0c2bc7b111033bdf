"""Settings of a training run: the task defaults, the presets, and the one precedence rule.

Every run's settings are resolved by ``resolve`` in one order, for every task; a later level wins:

1. the task's own defaults (``TASK_DEFAULTS``: settings that suit the task, e.g. sub-word tokens and
   dropout for a classifier);
2. the preset, if one is named (``--preset``; it must be for the same task);
3. the ``--config`` file;
4. ``--data``/``--val``/``--test``: a user's files replace the preset's named ``dataset``;
5. ``key=value`` words on the command line.

``warmup_steps`` and ``warmup_fraction`` are two spellings of one setting: the later level's wins. So are
``precision`` and its old spelling ``bf16`` (``bf16=true`` is ``precision=bf16``), read as ``precision`` at
each level; given together at one level, they must agree. When
``max_time`` is given and ``max_steps`` is not given by the user (config file or command line), the run's
length is the time budget: its number of steps is estimated from the first steps' speed.

``resolve`` returns a ``Resolved``: the flat settings, where each came from, and the data files. The run
prints the settings that differ from the task's defaults at its start.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scratchformer.data.sources import DataFiles
from scratchformer.nn.config import ConfigError
from scratchformer.train.config import TrainConfig, with_aliases_resolved
from scratchformer.train.values import parse_overrides, split_settings

__all__ = ["RESUMABLE", "TASK_DEFAULTS", "Resolved", "load_config_file", "load_preset", "parse_overrides",
           "preset_names", "resolve", "resume_settings", "split_settings", "task_defaults"]

DEFAULT_TASK = "copy"

_SYNTHETIC = dict(n_symbols=10, min_seq_len=4, max_seq_len=16, d_model=128, n_heads=4, n_layers=2, d_ff=256,
                  dropout=0.0, max_steps=800, batch_size=64, lr=1e-3, warmup_fraction=0.125, schedule="cosine",
                  label_smoothing=0.0, eval_every=100, eval_decode=200, log_every=50)
_ENCODER = dict(tokenizer="bpe", bpe_vocab_size=8000, lowercase=True, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                norm="pre", pooling="mean", batch_size=64, schedule="cosine", weight_decay=0.01, log_every=50)

# What each task gets before any preset, config file or key=value: small, sensible models that train in
# minutes on a laptop CPU. The copy/reverse/sort defaults are the `copy` preset's.
TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "copy": _SYNTHETIC,
    "reverse": _SYNTHETIC,
    "sort": _SYNTHETIC,
    # a character-level GPT: nanoGPT's small CPU model with twice its context and some dropout
    "lm": dict(tokenizer="char", max_len=128, d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=0.1,
               bias=False, max_steps=2000, batch_size=16, lr=2e-3, min_lr=1e-4, schedule="cosine",
               warmup_fraction=0.1, beta2=0.99, adam_eps=1e-8, weight_decay=0.1, eval_every=250, eval_batches=20,
               log_every=25),
    # the multi30k preset's recipe: shared BPE, post-LN encoder-decoder, token batches, label smoothing
    "translate": dict(tokenizer="bpe", bpe_vocab_size=8000, max_len=128, d_model=256, n_heads=4, n_layers=3,
                      d_ff=1024, dropout=0.2, max_steps=1800, max_tokens=4000, batch_size=128, lr=1e-3, min_lr=1e-5,
                      schedule="cosine", warmup_fraction=0.2, weight_decay=0.0, label_smoothing=0.1, eval_every=500,
                      eval_decode=200, log_every=50),
    # the sst2 preset's recipe, with room for longer texts (reviews)
    "classify": dict(_ENCODER, max_len=256, dropout=0.3, max_steps=2000, lr=5e-4, warmup_fraction=0.15,
                     label_smoothing=0.1, eval_every=250),
    "mlm": dict(_ENCODER, max_len=128, dropout=0.1, max_steps=3000, lr=1e-3, warmup_fraction=0.1, eval_every=500),
    # a small ViT for a folder of images: 32 x 32 RGB in 64 patches of 4 x 4, shifted by up to 2 pixels
    "image": dict(image_size=32, patch_size=4, channels=3, d_model=128, n_heads=4, n_layers=4, d_ff=256, dropout=0.1,
                  max_steps=2000, batch_size=64, lr=1e-3, min_lr=1e-5, schedule="cosine", warmup_fraction=0.1,
                  weight_decay=0.05, label_smoothing=0.1, augment_shift=2, eval_every=200, log_every=50),
}
# Fine-tuning a pretrained encoder (init_from): its architecture and tokenizer come with it; a lower rate.
FINE_TUNE_DEFAULTS: dict[str, Any] = dict(max_len=128, pooling="mean", max_steps=2000, batch_size=32, lr=1e-4,
                                          schedule="cosine", warmup_fraction=0.1, weight_decay=0.01, eval_every=500,
                                          log_every=50)

# Settings a resumed run may change: how long it goes on and how it reports, never what it computes.
RESUMABLE = ("max_steps", "max_time", "eval_every", "save_every", "log_every", "patience", "test_at_end",
             "num_threads", "device", "data_dir", "compile", "average_last")
# Two spellings of one setting: giving one at a level drops the other from the levels below.
_EXCLUSIVE = {"warmup_steps": "warmup_fraction", "warmup_fraction": "warmup_steps"}


def task_defaults(task: str, init_from: str | None = None) -> dict[str, Any]:
    if task not in TASK_DEFAULTS:
        raise ConfigError(f"task={task!r} is not one of {', '.join(TASK_DEFAULTS)}")
    if init_from and task == "classify":
        return dict(FINE_TUNE_DEFAULTS)
    return dict(TASK_DEFAULTS[task])


# ------------------------------------------------------------------------------------ files and words


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("scratchformer.train").joinpath("presets").iterdir()
                  if p.name.endswith(".toml"))


def load_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        close = difflib.get_close_matches(name, preset_names(), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown preset {name!r}{hint}; choose from {', '.join(preset_names())}")
    return _toml_loads(resources.files("scratchformer.train").joinpath("presets", f"{name}.toml").read_text())


def load_config_file(path: str) -> dict[str, Any]:
    """A TOML (or JSON) file of ``key = value`` settings, the same keys as the presets."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if file.suffix == ".json" else _toml_loads(text)
    except ValueError as err:
        raise ConfigError(f"config file {path} is not valid {'JSON' if file.suffix == '.json' else 'TOML'}: "
                          f"{str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or any(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"config file {path} must hold flat key = value settings")
    return data


# ------------------------------------------------------------------------------------ resolution


@dataclass
class Resolved:
    """The flat settings of a run, where each came from, and its data files."""

    settings: dict[str, Any]
    source: dict[str, str]  # key -> "task default", "preset NAME", "config FILE", "--data", "command line"
    data: DataFiles = field(default_factory=DataFiles)

    @property
    def task(self) -> str:
        return self.settings["task"]

    def split(self) -> tuple[dict[str, Any], TrainConfig]:
        """(model fields chosen, TrainConfig)."""
        return split_settings(self.settings)

    def changed(self) -> list[str]:
        """``key=value (source)`` for each setting not at the task's default, in a stable order."""
        base = task_defaults(self.task, self.settings.get("init_from"))
        return [f"{k}={_show(v)} ({self.source[k]})" for k, v in self.settings.items()
                if k != "task" and base.get(k, _UNSET) != v]


_UNSET = object()


def _show(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) and (" " in value or not value) else str(value)


def resolve(*, preset: str | None = None, config: str | None = None, data: DataFiles | None = None,
            overrides: dict[str, Any] | None = None) -> Resolved:
    """Apply the levels in order (module docstring); refuse contradictions in one line."""
    data = data or DataFiles()
    overrides = with_aliases_resolved(dict(overrides or {}))  # old spellings, level by level: bf16 -> precision
    preset_settings = with_aliases_resolved(load_preset(preset)) if preset else {}
    file_settings = with_aliases_resolved(load_config_file(config)) if config else {}
    task = overrides.get("task") or file_settings.get("task") or preset_settings.get("task") or DEFAULT_TASK
    if preset and preset_settings.get("task", DEFAULT_TASK) != task:
        raise ConfigError(f"preset {preset} is for task={preset_settings.get('task', DEFAULT_TASK)}, but task={task} "
                          "was given; drop one of them")
    init_from = overrides.get("init_from") or file_settings.get("init_from") or preset_settings.get("init_from")
    levels: list[tuple[str, dict[str, Any]]] = [
        ("task default", {"task": task, **task_defaults(str(task), init_from)}),
        (f"preset {preset}", preset_settings),
        (f"config {config}", file_settings),
    ]
    named = [(name, values["dataset"]) for name, values in (levels[1:] + [("command line", overrides)])
             if values.get("dataset") not in (None, "none", "null")]
    if data.train:
        if any(name != f"preset {preset}" for name, _ in named):
            name, value = next((n, v) for n, v in named if n != f"preset {preset}")
            raise ConfigError(f"two data sources: dataset={value} ({name}) and --data {' '.join(data.train)}; "
                              "give one of them")
        levels.append(("--data", {"dataset": None}))  # the user's files win over the preset's dataset
    levels.append(("command line", overrides))

    settings: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, values in levels:
        for key, value in values.items():
            if key in _EXCLUSIVE:
                settings.pop(_EXCLUSIVE[key], None)
                source.pop(_EXCLUSIVE[key], None)
            settings[key], source[key] = value, name
    user_steps = any(source.get("max_steps", "").startswith(p) for p in ("config", "command line"))
    if settings.get("max_time") not in (None, "", "none", "null") and not user_steps:
        settings["max_steps"], source["max_steps"] = 0, "set from max_time"
    resolved = Resolved(settings, source, data)
    resolved.split()  # type-check everything now, before any data is read
    return resolved


def resume_settings(saved: dict[str, Any], given: Resolved | None, overrides: dict[str, Any]) -> Resolved:
    """The settings of a resumed run: its own (``saved``, from its config.json), changed only in what
    ``RESUMABLE`` allows. ``given``: the settings of a full command repeated with --resume (preset, config,
    data), which must agree with the run's; ``overrides``: key=value words."""
    settings = with_aliases_resolved(dict(saved["settings"]))  # a run saved before precision= had bf16=
    overrides = with_aliases_resolved(overrides)
    source = dict.fromkeys(settings, "the run")
    data = DataFiles.from_dict(saved.get("data"))
    if given is not None:
        differ = [k for k in sorted(set(given.settings) | set(settings)) if k not in RESUMABLE
                  and _norm(given.settings.get(k)) != _norm(settings.get(k))]
        if differ:
            k = differ[0]
            raise ConfigError(f"--resume continues the run with its own settings, but {k}={given.settings.get(k)} "
                              f"differs from the run's {k}={settings.get(k)}; start a new run with another --out")
        if given.data and given.data.to_dict() != data.to_dict():
            raise ConfigError("--resume continues the run on its own data, but other files were given; "
                              "start a new run with another --out")
    for key, value in overrides.items():
        if key not in RESUMABLE and _norm(value) != _norm(settings.get(key)):
            split_settings({**settings, key: value})  # an unknown key or a bad value: say that first
            raise ConfigError(f"{key} cannot change on --resume (the run has {key}={settings.get(key)}); only "
                              f"{', '.join(RESUMABLE)} can")
        settings[key], source[key] = value, "command line"
    if "max_steps" in overrides and "max_time" not in overrides:
        settings.pop("max_time", None)  # a new length in steps replaces the old time budget
    resolved = Resolved(settings, source, data)
    resolved.split()
    return resolved


def _norm(value: Any) -> str:
    return "" if value is None else str(value).lower()
