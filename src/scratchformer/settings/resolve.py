"""The one precedence rule: every run's settings are resolved by ``resolve`` in one order, for every task; a
later level wins:

1. the task's own defaults (its entry in the task registry, ``registry/``: settings that suit the task, e.g.
   sub-word tokens and dropout for a classifier);
2. the preset, if one is named (``--preset``; it must be for the same task);
3. the ``--config`` file;
4. ``--data``/``--val``/``--test``: a user's files replace the preset's named ``dataset``;
5. ``key=value`` words on the command line.

``warmup_steps`` and ``warmup_fraction`` are two spellings of one setting: the later level's wins. When
``max_time`` is given and ``max_steps`` is not given by the user (config file or command line), the run's
length is the time budget: its number of steps is estimated from the first steps' speed.

``resolve`` returns a ``Resolved``: the flat settings, where each came from, the data files, and the run's
``ModelConfig`` and ``TrainConfig``, built once from them (the model's vocabulary and classes are filled in
from the data when the task is made). A resumed run takes its own saved settings (``resume_settings``). A
caller in Python resolves its settings the same way: ``resolve(overrides={...}, data=[...])``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from scratchformer.data.roles import DataFiles, one_source
from scratchformer.errors import ConfigError
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import DEFAULT_TASK, TaskSpec, spec
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.presets import load_config_file, load_preset
from scratchformer.settings.values import split_settings

__all__ = ["RESUMABLE", "Resolved", "resolve", "resume_settings", "task_defaults"]

# Settings a resumed run may change: how long it goes on and how it reports, never what it computes.
RESUMABLE = ("max_steps", "max_time", "eval_every", "save_every", "log_every", "patience", "test_at_end",
             "num_threads", "device", "data_dir", "compile", "average_last")
# Two spellings of one setting: giving one at a level drops the other from the levels below.
_EXCLUSIVE = {"warmup_steps": "warmup_fraction", "warmup_fraction": "warmup_steps"}
_UNSET = object()


def task_defaults(task: str, init_from: str | None = None) -> dict[str, Any]:
    return spec(task).task_defaults(init_from)


@dataclass
class Resolved:
    """The flat settings of a run, where each came from, its data files, and its configs (built once)."""

    settings: dict[str, Any]
    source: dict[str, str]  # key -> "task default", "preset NAME", "config FILE", "--data", "command line"
    data: DataFiles = field(default_factory=DataFiles)

    @property
    def task(self) -> TaskSpec:
        return spec(self.settings["task"])

    @property
    def train(self) -> TrainConfig:
        return self._configs[1]

    @property
    def model(self) -> ModelConfig:
        """The model the settings describe (its vocabulary and classes follow from the data)."""
        return self._configs[0]

    @cached_property
    def _configs(self) -> tuple[ModelConfig, TrainConfig]:
        return split_settings(self.settings)

    def model_settings(self) -> dict[str, Any]:
        """The model's fields that the settings give (at any level), as typed in ``model``: what a run that takes
        its architecture from a pretrained model (``init_from``) checks against it."""
        return {key: getattr(self.model, key) for key in self.settings if key in _MODEL_FIELDS}

    def changed(self) -> dict[str, list[str]]:
        """Source -> ``key=value`` of each setting not at the task's default (or, for a key the task does not
        set, the field's own default), in a stable order."""
        base = {f: d for cls in (ModelConfig, TrainConfig) for f, d in _field_defaults(cls).items()}
        base |= task_defaults(self.settings["task"], self.settings.get("init_from")) | {"task": self.settings["task"]}
        out: dict[str, list[str]] = {}
        for key, value in sorted(self.settings.items()):
            if base.get(key, _UNSET) != value:
                out.setdefault(self.source.get(key, "given"), []).append(f"{key}={value}")
        return out


_MODEL_FIELDS = set(ModelConfig.__dataclass_fields__)


def _field_defaults(cls: type) -> dict[str, Any]:
    return {name: f.default for name, f in cls.__dataclass_fields__.items()}  # type: ignore[attr-defined]


def resolve(*, preset: str | None = None, config: str | None = None, data: DataFiles | Sequence[str] | None = None,
            overrides: dict[str, Any] | None = None) -> Resolved:
    """Apply the levels in order (module docstring); refuse contradictions in one line. ``data``: the files by
    role, or ``--data`` paths."""
    data = DataFiles.of(data)
    overrides = dict(overrides or {})
    preset_settings = load_preset(preset) if preset else {}
    file_settings = load_config_file(config) if config else {}
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
    if data.train:  # the user's files win over the preset's dataset, never over one named elsewhere
        for name, values in levels[2:] + [("command line", overrides)]:
            one_source(values.get("dataset"), data, where=name)
        levels.append(("--data", {"dataset": None}))
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
    resolved.model  # noqa: B018 - type-check everything and build the model's config now, before any data is read
    return resolved


def resume_settings(saved: dict[str, Any], given: Resolved | None, overrides: dict[str, Any]) -> Resolved:
    """The settings of a resumed run: its own (``saved``, from its config.json), changed only in what
    ``RESUMABLE`` allows. ``given``: the settings of a full command repeated with --resume (preset, config,
    data), which must agree with the run's; ``overrides``: key=value words."""
    settings = dict(saved["settings"])
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
    resolved.model  # noqa: B018
    return resolved


def _norm(value: Any) -> str:
    return "" if value is None else str(value).lower()
