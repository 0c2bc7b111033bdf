"""Images for classification: a folder of class sub-folders, single image files, and scikit-learn's digits.

**A folder of images** (``--data DIR`` for ``task=image``) holds one sub-folder per class, named after the
class; each holds that class's PNG or JPEG files (``.png``, ``.jpg``, ``.jpeg``, in any letter case)::

    photos/cat/001.png  photos/cat/002.jpg  photos/dog/a.jpeg  ...   -> labels ["cat", "dog"]

Classes are the sub-folders' names sorted (numerically when all are integers, so ``"2"`` comes before
``"10"``), as ``labelled.py`` sorts text labels. Hidden entries and files of other types are skipped (the
run's notes count them); a sub-folder without images, a file directly in the folder and a class unknown to
the training folder (``label_names``) are refused.

**Pixels** are decoded by Pillow (the ``images`` extra), converted to RGB (``channels=3``) or greyscale
(``channels=1``; an alpha channel is dropped) and resized to ``size x size`` (stretched: the aspect ratio is
not kept; bilinear, with Pillow's antialiasing when shrinking). They are kept as bytes ``(ch, size, size)``,
0-255: a quarter of the memory of floats; the task scales them to [0, 1]. An image that cannot be decoded is
refused in one line naming its file.

**The digits** (``dataset=digits``) are the 1,797 8 x 8 greyscale handwritten digits scikit-learn ships inside
its package (no download; the UCI "optical recognition of handwritten digits" test set, 16 grey levels). They
are split once, stratified by digit and with a fixed seed whatever the run's own: 20 % test, then 10 % of the
rest validation (``DIGITS_SPLIT``). Grey levels 0-16 become bytes as ``round(v * 255 / 16)``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scratchformer.data.splits import carve_rows
from scratchformer.errors import DataError
from scratchformer.extras import require

if TYPE_CHECKING:  # torch is imported where pixels are made: reading the formats (the CLI's help) stays light
    from torch import Tensor

__all__ = ["DIGITS_SPLIT", "FORMAT", "IMAGE_SUFFIXES", "as_input", "load_digits", "read_image", "read_image_folder",
           "to_pixels"]

FORMAT = "a folder with one sub-folder of PNG/JPEG images per class (the sub-folder's name is the label)"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
DIGITS_SPLIT = "stratified by digit, seed 0: 20 % test, then 10 % of the rest validation"

ImageItem = "str | Tensor"  # a file to read, or pixels already in memory (uint8, (ch, H, W))


def read_image_folder(path: str | Path, label_names: Sequence[str] | None = None,
                      notes: list[str] | None = None) -> tuple[list[tuple[str, int]], list[str]]:
    """``([(file, label id), ...], label names)`` of a folder of class sub-folders (module docstring). Files are
    listed, not decoded: ``read_image`` decodes them. ``notes`` receives a line for what was skipped."""
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"{root} is not a folder; task=image takes {FORMAT}")
    entries = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    stray = [p for p in entries if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    if stray:
        raise DataError(f"{stray[0]} is directly in {root}; put each image in the sub-folder of its class")
    folders = {p.name: p for p in entries if p.is_dir()}
    if not folders:
        raise DataError(f"{root} has no sub-folders; task=image takes {FORMAT}")
    names = list(label_names) if label_names is not None else _sorted_names(folders)
    ids = {name: i for i, name in enumerate(names)}
    rows, skipped = [], 0
    for name in _sorted_names(folders):
        if name not in ids:
            raise DataError(f"{folders[name]}: unknown class {name!r}; expected one of {names}")
        files = sorted(p for p in folders[name].rglob("*") if p.is_file() and not p.name.startswith("."))
        images = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
        skipped += len(files) - len(images)
        if not images:
            raise DataError(f"{folders[name]} holds no PNG or JPEG images")
        rows += [(str(p), ids[name]) for p in images]
    if skipped and notes is not None:
        notes.append(f"{root}: skipped {skipped} file(s) that are not PNG or JPEG images")
    return rows, names


def _sorted_names(folders: dict[str, Path]) -> list[str]:
    return sorted(folders, key=int) if all(n.isdigit() for n in folders) else sorted(folders)


def read_image(path: str | os.PathLike, size: int, channels: int) -> Tensor:
    """The pixels of one image file as bytes ``(channels, size, size)``; ``DataError`` naming the file if it cannot
    be decoded."""
    import torch

    require("PIL", "images")
    import numpy as np
    from PIL import Image

    if channels not in (1, 3):
        raise DataError(f"channels={channels}: image files are read as RGB (channels=3) or greyscale (channels=1)")
    try:
        with Image.open(path) as image:
            image = image.convert("RGB" if channels == 3 else "L")  # decodes every pixel: a damaged file fails here
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.BILINEAR)
            pixels = np.asarray(image, dtype=np.uint8)  # (H, W) or (H, W, 3)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DataError(f"{path} is not a readable PNG or JPEG image ({reason})") from None
    tensor = torch.from_numpy(pixels.copy())
    return tensor.unsqueeze(0) if channels == 1 else tensor.permute(2, 0, 1).contiguous()  # (ch, H, W)


def to_pixels(item: ImageItem, size: int, channels: int) -> Tensor:
    """A file's or an in-memory image's pixels as bytes ``(channels, size, size)``."""
    import torch

    if isinstance(item, (str, os.PathLike)):
        return read_image(item, size, channels)
    x = item
    if x.size(0) != channels:  # grey <-> RGB: replicate, or the mean of the channels
        x = x.expand(channels, -1, -1) if x.size(0) == 1 else x.float().mean(0, keepdim=True).round().byte()
    if x.shape[1:] != (size, size):
        x = torch.nn.functional.interpolate(x[None].float(), size=(size, size), mode="bilinear", antialias=True,
                                            align_corners=False)[0].round().clamp(0, 255).byte()
    return x.contiguous()


def as_input(pixels: Tensor) -> Tensor:
    """Bytes ``(..., ch, H, W)`` -> what a ViT reads: floats in [0, 1]."""
    return pixels.float() / 255.0


def load_digits() -> dict[str, list[tuple[Tensor, int]]]:
    """scikit-learn's 8 x 8 digits as ``{split: [(pixels (1, 8, 8) uint8, digit), ...]}``, ``DIGITS_SPLIT``."""
    import torch

    require("sklearn", "images")
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    pixels = torch.from_numpy(digits.images).mul(255 / 16).round().to(torch.uint8).unsqueeze(1)  # (1797, 1, 8, 8)
    labels = [int(y) for y in digits.target]
    rest, test = carve_rows(len(labels), 0.2, 0, labels)
    train, val = carve_rows(len(rest), 0.1, 0, [labels[i] for i in rest])
    train, val = [rest[i] for i in train], [rest[i] for i in val]
    return {split: [(pixels[i], labels[i]) for i in idx] for split, idx in
            (("train", train), ("val", val), ("test", test))}
