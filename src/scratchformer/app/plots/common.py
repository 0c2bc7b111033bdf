"""What the pictures share: their resolution, and writing a figure as PNG or SVG atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scratchformer.extras import require

require("matplotlib", "plots")

from matplotlib import rc_context  # noqa: E402 - after the check that it is installed
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

__all__ = ["DPI", "FORMATS", "integer_ticks", "new_figure", "save"]

DPI = 130
# File name ending -> (matplotlib's format, metadata). No date or version inside: the same figure, the same file.
FORMATS = {".png": ("png", {"Software": None}), ".svg": ("svg", {"Date": None, "Creator": None})}


def new_figure(**layout: Any) -> Figure:
    """A figure at the pictures' resolution (``DPI``), drawn without ``pyplot`` (``figsize=``, ``layout=``)."""
    return Figure(dpi=DPI, **layout)


def integer_ticks() -> MaxNLocator:
    """Ticks at whole numbers only (steps)."""
    return MaxNLocator(integer=True)


def save(fig: Figure, path: str | os.PathLike) -> Path:
    """Write the figure as PNG or SVG (by the file name's ending), atomically (temporary name, then rename)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"{path}: these plots are written as PNG or SVG; use a .png or .svg file name")
    if not path.parent.is_dir():
        raise ValueError(f"cannot write {path}: directory {path.parent} does not exist")
    fmt, metadata = FORMATS[path.suffix.lower()]
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with rc_context({"svg.hashsalt": "scratchformer"}):  # fixed ids inside an SVG
            fig.savefig(tmp, format=fmt, dpi=DPI, metadata=metadata)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
