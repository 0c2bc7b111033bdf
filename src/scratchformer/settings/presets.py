"""Presets (commented TOML files of settings, in ``presets/``) and ``--config`` files: flat ``key = value``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError, did_you_mean

__all__ = ["load_config_file", "load_preset", "preset_names"]


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def preset_names() -> list[str]:
    folder = resources.files("scratchformer.settings").joinpath("presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}{did_you_mean(name, preset_names())}; choose from "
                          f"{', '.join(preset_names())}")
    return _toml_loads(resources.files("scratchformer.settings").joinpath("presets", f"{name}.toml").read_text())


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
