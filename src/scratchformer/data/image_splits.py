"""The image task's data, read into memory: scikit-learn's digits, or a user's folders of class sub-folders.

Every text task reads token ids from corpora prepared on disk (``data.corpus``), because a text corpus can
be bigger than memory. Images here are small (1,797 digits of 8 x 8, or a folder of PNG/JPEG files that the
task decodes once at the model's ``image_size``), so ``task=image`` keeps them in memory: each split is a
``MemoryRows`` of ``image`` (a file, or the digits' pixels) with its name (``image.text``), and its label ids.
The splits are planned as a text task's are (``data.plan.file_splits``: ``--data``, ``--val``, ``--test``, and
a validation set carved out of the training folder, seeded and stratified by label, when none is given).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scratchformer.data.images import DIGITS_SPLIT, load_digits, read_image_folder
from scratchformer.data.memory import MemoryRows
from scratchformer.data.plan import Source, file_splits
from scratchformer.data.roles import roles
from scratchformer.data.splits import carve_part
from scratchformer.data.task_data import DataRequest, TaskData

__all__ = ["image_data"]


def image_data(req: DataRequest) -> TaskData:
    """An image task's splits: ``dataset=digits`` (a user's ``--val``/``--test`` folders replace its own), or the
    user's folders (checked by their roles, ``data.roles``). The training folder fixes the classes (unless
    ``req.labels``, a trained classifier's, does); later folders must use them."""
    cfg = req.cfg
    train, val, test = roles(req.task, req.files, cfg.dataset)
    out = _digits(cfg.dataset) if cfg.dataset is not None else TaskData(None, {}, {}, labels=req.labels)
    read: dict[Source, list[tuple[Any, int]]] = {}  # each folder listed once (training first)
    for split, spec in file_splits(req.task, train, val, test, cfg.val_fraction, cfg.seed).items():
        if spec.source not in read:
            read[spec.source], out.labels = read_image_folder(spec.source.paths[0], out.labels, out.notes)
        found = read[spec.source]
        rows = carve_part(spec.part, len(found), cfg.val_fraction, cfg.seed, [y for _, y in found])
        _put(out, split, [found[i] for i in rows], [Path(found[i][0]).name for i in rows])
        out.origin[split] = spec.origin
    return out


def _digits(dataset: str) -> TaskData:
    where = f"dataset {dataset}"
    origin = {"train": f"{where} train (scikit-learn's 8 x 8 digits; {DIGITS_SPLIT})", "val": f"{where} validation",
              "test": f"{where} test"}
    out = TaskData(None, {}, origin, labels=[str(d) for d in range(10)])
    for split, rows in load_digits().items():
        _put(out, split, rows, [f"{split} image {i}" for i in range(len(rows))])
    return out


def _put(out: TaskData, split: str, rows: list[tuple[Any, int]], names: list[str]) -> None:
    """One split's images (files or pixels) with their names, and their label ids."""
    out.views[split] = MemoryRows({"image": [item for item, _ in rows], "image.text": names})
    out.label_ids[split] = np.array([y for _, y in rows], dtype=np.int64)
