"""Package attributes imported on first use (PEP 562), so that ``scratchformer --help`` starts without PyTorch.

    __getattr__, __dir__ = lazy_exports(__name__, {"GPT": "scratchformer.models", ...})

``scratchformer.GPT`` then imports ``scratchformer.models`` the first time it is read, and is an ordinary
attribute afterwards.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose names ``exports`` maps to the modules defining them."""

    def getattr_(name: str) -> Any:
        if name not in exports:  # a submodule (``package.name``), else no such attribute
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as err:
                if err.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def dir_() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return getattr_, dir_
