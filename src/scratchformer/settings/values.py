"""Settings as typed values: ``key=value`` words and config-file entries checked (and converted) against the
type each field of ``ModelConfig`` and ``TrainConfig`` declares, then split between the two."""

from __future__ import annotations

import contextlib
import types
import typing
from typing import Any, Literal

from scratchformer.errors import ConfigError, did_you_mean
from scratchformer.families import check_built
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import spec
from scratchformer.settings.checks import parse_bool
from scratchformer.settings.config import TrainConfig


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["d_model=64", "norm=pre"]`` -> ``{"d_model": "64", "norm": "pre"}``; types are checked later
    against each field's declared type."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def field_types(cls: type) -> dict[str, Any]:
    """The declared type of each field of a config dataclass."""
    return typing.get_type_hints(cls)


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """Check (and, for strings from the command line, convert) ``value`` against a field's type."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        # "none" means "unset" unless it is one of the field's own choices (positional="none")
        own_choice = typing.get_origin(inner[0]) is Literal and value in typing.get_args(inner[0])
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null") and not own_choice):
            if type(None) in args:
                return None
        return coerce(name, value, inner[0])
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(str, args))}")
        return value
    if annotation is bool:
        return parse_bool(name, value)
    if annotation in (int, float):
        kind = "an integer" if annotation is int else "a number"
        numeric = (int,) if annotation is int else (int, float)
        if isinstance(value, numeric) and not isinstance(value, bool):
            return annotation(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # a string that does not parse falls through to the error
                return annotation(value)
        raise ConfigError(f"{name}={value!r} must be {kind}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name}={value!r} must be a string")
    if origin is list and args == (int,):  # dense_layers=0,2 (or [0, 2]; empty: none)
        items = value.strip().strip("[]").split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{name}={value!r} must be a list of integers (0,2)")
        return [coerce(name, item.strip() if isinstance(item, str) else item, int) for item in items
                if not isinstance(item, str) or item.strip()]
    return value


def split_settings(settings: dict[str, Any]) -> tuple[ModelConfig, TrainConfig]:
    """Flat ``key -> value`` settings (preset, config file, command line) -> the run's (ModelConfig, TrainConfig),
    each built once.

    Every key must be a ``ModelConfig`` or ``TrainConfig`` field; values are type-checked (and strings
    converted) against the field's type. ``arch`` is one of the task's families (the registry says which fit,
    ``TaskSpec.family_for``): its first when none is given. ``max_len`` comes from the task when no setting gives
    one. The vocabulary (and a classifier's classes) follow from the data: they are filled in when the task is
    made (``tasks.build.make_task``).
    """
    model_types, train_types = field_types(ModelConfig), field_types(TrainConfig)
    model_fields: dict[str, Any] = {}
    train_fields: dict[str, Any] = {}
    for key, value in settings.items():
        if key in train_types:
            train_fields[key] = coerce(key, value, train_types[key])
        elif key in model_types:
            model_fields[key] = coerce(key, value, model_types[key])
        else:
            raise ConfigError(f"unknown config key {key!r}{did_you_mean(key, [*model_types, *train_types])}")
    train = TrainConfig(**train_fields)
    task = spec(train.task)
    arch = model_fields["arch"] = task.family_for(model_fields.get("arch"))
    default = task.default_max_len(train.max_seq_len)
    if "max_len" not in model_fields and default is not None:
        model_fields["max_len"] = default
    model = ModelConfig(**model_fields)
    check_built(model.arch, arch, model.pooling, task.name, "" if task.labels else " and has no classes to learn")
    return model, train
