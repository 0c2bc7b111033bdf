"""What the pictures share: their resolution, and writing a figure as PNG atomically."""

from __future__ import annotations

import os
from pathlib import Path

from scratchformer.extras import require

require("matplotlib", "plots")

from matplotlib.figure import Figure  # noqa: E402 - after the check that it is installed
from matplotlib.ticker import MaxNLocator  # noqa: E402

__all__ = ["DPI", "Figure", "MaxNLocator", "save"]

DPI = 130


def save(fig: Figure, path: str | os.PathLike) -> Path:
    """Write the figure as PNG, atomically (temporary name, then rename)."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise ValueError(f"{path}: these plots are written as PNG; use a .png file name")
    if not path.parent.is_dir():
        raise ValueError(f"cannot write {path}: directory {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
