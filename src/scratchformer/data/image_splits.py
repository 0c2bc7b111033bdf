"""The image task's splits, read into memory: scikit-learn's digits, or a user's folders of class sub-folders.

Every text task reads token ids from corpora prepared on disk (``data.corpus``), because a text corpus can
be bigger than memory. Images here are small (1,797 digits of 8 x 8, or a folder of PNG/JPEG files that the
task decodes once at the model's ``image_size``), so ``task=image`` keeps the simpler path: its files are
listed into ``Splits`` by the roles of ``data.roles`` (``--data``, ``--val``, ``--test``; a validation set
carved out of the training folder, seeded and stratified by label, when none is given), and the task holds
the decoded pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratchformer.data.images import DIGITS_SPLIT, load_digits, read_image_folder
from scratchformer.data.plan import carving
from scratchformer.data.roles import DataFiles, roles
from scratchformer.data.splits import carve_rows
from scratchformer.registry import TaskSpec

__all__ = ["Splits", "folder_splits", "image_splits"]


@dataclass
class Splits:
    """Labelled images by split, before decoding.

    ``rows[split]``: ``(image file or pixels (ch, H, W) uint8, label id)`` pairs. ``origin[split]``: where the
    split came from, in words. ``labels``: class names. ``notes``: what was skipped while listing the files.
    """

    rows: dict[str, list[Any]]
    origin: dict[str, str]
    labels: list[str] | None = None
    notes: list[str] = field(default_factory=list)

    def has(self, split: str) -> bool:
        return split in self.rows


def image_splits(task: TaskSpec, dataset: str | None, data_dir: str | Path | None, files: DataFiles, *,
                 val_fraction: float, seed: int, label_names: Sequence[str] | None = None) -> Splits:
    """An image task's splits: ``dataset=digits`` (a user's ``--val``/``--test`` folders replace its own), or
    the user's folders (checked by their roles, ``data.roles``)."""
    train, val, test = roles(task, files, dataset)
    if dataset is None:
        return folder_splits(train, val, test, val_fraction=val_fraction, seed=seed, label_names=label_names,
                             carved=carving(task, val_fraction, seed))
    where = f"dataset {dataset}"
    splits = Splits(dict(load_digits()), {"train": f"{where} train (scikit-learn's 8 x 8 digits; {DIGITS_SPLIT})",
                                          "val": f"{where} validation", "test": f"{where} test"},
                    [str(d) for d in range(10)])
    if val or test:  # the user's own validation or test folder replaces the dataset's
        own = folder_splits([], val, test, val_fraction=val_fraction, seed=seed, label_names=splits.labels)
        splits.rows.update(own.rows)
        splits.origin.update(own.origin)
        splits.notes.extend(own.notes)
    return splits


def folder_splits(train: list[str], val: list[str], test: list[str], *, val_fraction: float, seed: int,
                  label_names: Sequence[str] | None = None, carved: str = "") -> Splits:
    """The splits of folders already checked and grouped by role (``roles``). The training folder
    fixes the classes (unless ``label_names`` does); later folders must use them."""
    out = Splits({}, {}, list(label_names) if label_names is not None else None)

    def read(path: str) -> list[tuple[str, int]]:
        rows, out.labels = read_image_folder(path, out.labels, out.notes)
        return rows

    if train:
        found = read(train[0])
        if val:
            out.rows["train"], out.origin["train"] = found, train[0]
            out.rows["val"], out.origin["val"] = read(val[0]), val[0]
        else:
            kept, held = carve_rows(len(found), val_fraction, seed, [y for _, y in found])
            out.rows["train"], out.origin["train"] = [found[i] for i in kept], f"{train[0]} (the rest)"
            out.rows["val"] = [found[i] for i in held]
            out.origin["val"] = f"{train[0]} ({carved})"
    elif val:
        out.rows["val"], out.origin["val"] = read(val[0]), val[0]
    if test:
        out.rows["test"], out.origin["test"] = read(test[0]), f"{test[0]} (all of it)"
    return out
