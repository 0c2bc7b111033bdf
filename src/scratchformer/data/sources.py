"""Where a run's examples come from: a user's files by role, or a named dataset, split into train/val/test.

A user names files by role (the CLI's ``--data``, ``--val``, ``--test``); ``DataFiles`` holds them.
``load_splits`` reads them for a task family and returns ``Splits``: the raw examples of each split (no
tokenizer yet), where each split came from, and notes on what was skipped. The rules, the same for every
task:

- ``--data`` is the training data. For ``lm``, ``classify`` and ``mlm`` a second ``--data`` path is the
  validation file (the long-standing two-file form); for ``translate`` two paths are one line-aligned pair of
  files. For ``lm``, ``--data DIR`` is a folder of ``.txt``/``.txt.gz`` documents read as one corpus; for
  ``image``, a folder with one sub-folder of images per class (``images.py``).
- ``--val`` and ``--test`` take the same forms as ``--data``. A test file is scored once at the end of a
  run and never used to choose a checkpoint or to stop early.
- Without a validation file one is carved out of the training data: for language modelling the last
  ``val_fraction`` of the text, one contiguous block (nanoGPT's convention: no validation sentence is a
  neighbour of a training one); for rows (pairs, labelled texts, lines) a seeded random ``val_fraction`` of
  them, stratified by label for classification (text or images), so a file sorted by label or by length still
  validates on every class and every length.
- A named dataset (``dataset=multi30k``, ...) brings its own splits; ``--val``/``--test`` replace them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratchformer.data.errors import DataError
from scratchformer.data.files import read_text
from scratchformer.data.images import DIGITS_SPLIT, load_digits, read_image_folder
from scratchformer.data.images import FORMAT as IMAGE_FORMAT
from scratchformer.data.labelled import FORMAT as LABELLED_FORMAT
from scratchformer.data.labelled import read_labelled
from scratchformer.data.parallel import FORMAT as PARALLEL_FORMAT
from scratchformer.data.parallel import read_parallel
from scratchformer.data.splits import carve_rows, carve_text

__all__ = ["DataFiles", "Splits", "carve_rows", "carve_text", "data_formats", "load_named", "load_splits",
           "read_corpus"]

# What --data takes for each task family (used in every "expected format" message and in --help).
FORMATS = {
    "lm": "a UTF-8 text file, or a folder of .txt/.txt.gz files (one corpus); a second file is the validation text",
    "translate": f"a TSV of {PARALLEL_FORMAT}",
    "classify": f"a .tsv/.csv of {LABELLED_FORMAT}; a second file is the validation set",
    "mlm": "a text file of one example a line, or the text column of a .tsv/.csv; a second file is the validation set",
    "image": f"{IMAGE_FORMAT}; a second folder is the validation set",
}


def data_formats() -> str:
    """One line per task: what ``--data`` takes."""
    return "; ".join(f"task={task}: {text}" for task, text in FORMATS.items())


@dataclass(frozen=True)
class DataFiles:
    """A user's files by role. Each role is a tuple of paths (two for a line-aligned pair of files)."""

    train: tuple[str, ...] = ()
    val: tuple[str, ...] = ()
    test: tuple[str, ...] = ()

    @classmethod
    def of(cls, data: Sequence[str] | DataFiles | None = None, val: Sequence[str] = (),
           test: Sequence[str] = ()) -> DataFiles:
        if isinstance(data, DataFiles):
            return data
        return cls(tuple(map(str, data or ())), tuple(map(str, val)), tuple(map(str, test)))

    def __bool__(self) -> bool:
        return bool(self.train or self.val or self.test)

    def to_dict(self) -> dict[str, list[str]]:
        return {role: [str(Path(p).resolve()) for p in paths] for role, paths in
                (("train", self.train), ("val", self.val), ("test", self.test)) if paths}

    @classmethod
    def from_dict(cls, data: dict[str, list[str]] | list[str] | None) -> DataFiles:
        if isinstance(data, list):  # runs written before roles existed: a list of --data paths
            return cls(tuple(data))
        data = data or {}
        return cls(tuple(data.get("train", ())), tuple(data.get("val", ())), tuple(data.get("test", ())))


@dataclass
class Splits:
    """Raw examples by split, before tokenization.

    ``rows[split]``: a list of examples (for ``lm`` a one-element list holding the split's text; for
    ``translate`` (source, target) pairs; for ``classify`` (text, label id) pairs; for ``mlm`` texts; for
    ``image`` (image file or pixels, label id) pairs).
    ``origin[split]``: where the split came from, in words. ``labels``: class names (classification).
    """

    rows: dict[str, list[Any]]
    origin: dict[str, str]
    labels: list[str] | None = None
    notes: list[str] = field(default_factory=list)

    def has(self, split: str) -> bool:
        return split in self.rows

    def size(self, split: str) -> str:
        rows = self.rows[split]
        if rows and isinstance(rows[0], str) and len(rows) == 1:
            return f"{len(rows[0]):,} characters"
        return f"{len(rows):,} examples"


# ------------------------------------------------------------------------------------------ reading


def read_corpus(path: str | Path) -> str:
    """A language-modelling text: one file, or a folder of ``.txt``/``.txt.gz`` files (sorted by name, each
    document ending with a newline so none runs into the next)."""
    path = Path(path)
    if not path.is_dir():
        return read_text(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith((".txt", ".txt.gz")))
    if not files:
        raise DataError(f"{path} is a folder without .txt or .txt.gz files")
    return "".join(doc if doc.endswith("\n") else doc + "\n" for doc in map(read_text, files))


def _refuse_dirs(task: str, paths: Sequence[str]) -> None:
    """Folders are data for lm (a corpus) and image (classes) only; image takes nothing but folders."""
    for p in paths:
        if task not in ("lm", "image") and Path(p).is_dir():
            raise DataError(f"{p} is a folder; task={task} takes files: {FORMATS[task]}")
        if task == "image" and Path(p).is_file():
            raise DataError(f"{p} is a file; task=image takes {FORMATS[task]}")


def _describe(paths: Sequence[str]) -> str:
    return " + ".join(str(p) for p in paths)


def load_named(task: str, dataset: str, data_dir: str | Path | None, files: DataFiles, *, val_fraction: float,
               seed: int) -> Splits:
    """A named dataset's own splits for a task family; a user's ``--val``/``--test`` files replace them."""
    from scratchformer.data.named import SST2_LABELS, find_dataset, load_multi30k, load_sst2

    fits = {"lm": ("tinyshakespeare",), "translate": ("multi30k",), "classify": ("sst2",), "mlm": ("sst2",),
            "image": ("digits",)}
    if dataset not in fits.get(task, ()):
        raise DataError(f"dataset {dataset!r} cannot be used for task={task}"
                        + (f" (try {' or '.join(fits[task])}, or --data FILE)" if task in fits else ""))
    where = f"dataset {dataset}"
    labels = None
    if dataset == "tinyshakespeare":
        train, val = carve_text(read_text(find_dataset(dataset, data_dir)), 0.1)
        rows = {"train": [train], "val": [val]}
        origin = {"train": f"{where} (the first 90 %)", "val": f"{where} (the last 10 %, nanoGPT's split)"}
    elif dataset == "digits":
        rows = dict(load_digits())
        labels = [str(d) for d in range(10)]
        origin = {"train": f"{where} train (scikit-learn's 8 x 8 digits; {DIGITS_SPLIT})", "val": f"{where} validation",
                  "test": f"{where} test"}
    elif dataset == "multi30k":
        rows = dict(load_multi30k(data_dir))
        origin = {"train": f"{where} train", "val": f"{where} val", "test": f"{where} test_2016_flickr"}
    else:
        raw = load_sst2(data_dir)
        if task == "mlm":  # texts only, no labels
            rows = {"train": raw["train"][0], "val": raw["dev"][0]}
        else:
            rows = {split: list(zip(*raw[name])) for split, name in (("train", "train"), ("val", "dev"),
                                                                       ("test", "test"))}
            labels = list(SST2_LABELS)
        origin = {"train": f"{where} train", "val": f"{where} dev", "test": f"{where} test (GLUE validation)"}
        origin = {k: v for k, v in origin.items() if k in rows}
    splits = Splits(rows, origin, labels)
    if files.train:
        raise DataError(f"two data sources: dataset={dataset} and --data {_describe(files.train)}; give one of them")
    if files.val or files.test:  # the user's own validation or test file replaces the dataset's
        own = load_splits(task, files, val_fraction=val_fraction, seed=seed, label_names=labels)
        splits.rows.update(own.rows)
        splits.origin.update(own.origin)
        splits.notes.extend(own.notes)
    return splits


def load_splits(task: str, files: DataFiles, *, val_fraction: float, seed: int,
                label_names: Sequence[str] | None = None) -> Splits:
    """The examples of ``files`` for a task family (``lm``, ``translate``, ``classify``, ``mlm``), split
    into ``train``/``val`` (when there is training data) and ``test`` (when a test file is given).

    ``label_names``: fix the classes (a trained classifier's), so that a label outside them is an error."""
    if task not in FORMATS:
        raise DataError(f"task={task} makes its own data; --data, --val and --test need task=lm, translate, "
                        "classify, mlm or image")
    _refuse_dirs(task, [*files.train, *files.val, *files.test])
    reader = {"lm": _LMReader, "translate": _PairReader, "classify": _LabelledReader, "mlm": _LineReader,
              "image": _ImageReader}[task]
    return reader(task, files, val_fraction, seed, label_names).splits()


class _Reader(ABC):
    """Shared logic of the four families: roles -> files -> rows -> splits."""

    def __init__(self, task: str, files: DataFiles, val_fraction: float, seed: int,
                 label_names: Sequence[str] | None) -> None:
        self.task, self.files, self.val_fraction, self.seed = task, files, val_fraction, seed
        self.labels: list[str] | None = list(label_names) if label_names is not None else None
        self.notes: list[str] = []

    def groups(self) -> tuple[list[str], list[str], list[str]]:
        """(train paths, val paths, test paths): one example source each."""
        train, val = list(self.files.train), list(self.files.val)
        if len(train) == 2:  # the two-file form: training + validation
            if val:
                raise DataError(f"two validation sources: the second --data path {train[1]} and --val "
                                f"{_describe(val)}; give one of them")
            train, val = [train[0]], [train[1]]
        for role, paths in (("--data", train), ("--val", val), ("--test", list(self.files.test))):
            if len(paths) > 1:
                raise DataError(f"{role} takes one path for task={self.task} ({FORMATS[self.task]}), got {len(paths)}")
        return train, val, list(self.files.test)

    @abstractmethod
    def read(self, paths: list[str]) -> list[Any]:
        """The examples of one source (one file, or a line-aligned pair of files)."""

    def carve(self, rows: list[Any]) -> tuple[list[Any], list[Any], str]:
        train_idx, val_idx = carve_rows(len(rows), self.val_fraction, self.seed, self.stratify(rows))
        how = ", stratified by label" if self.stratify(rows) is not None else ""
        return ([rows[i] for i in train_idx], [rows[i] for i in val_idx],
                f"a random {self.val_fraction:.0%} of its rows{how}, seed {self.seed}")

    def stratify(self, rows: list[Any]) -> list[int] | None:
        return None

    def splits(self) -> Splits:
        train, val, test = self.groups()
        rows: dict[str, list[Any]] = {}
        origin: dict[str, str] = {}
        if train:
            found = self.read(train)
            if val:
                rows["train"], origin["train"] = found, _describe(train)
                rows["val"], origin["val"] = self.read(val), _describe(val)
            else:
                rows["train"], rows["val"], how = self.carve(found)
                origin["train"] = f"{_describe(train)} (the rest)"
                origin["val"] = f"{_describe(train)} ({how})"
        elif val:
            rows["val"], origin["val"] = self.read(val), _describe(val)
        if test:
            rows["test"], origin["test"] = self.read(test), f"{_describe(test)} (all of it)"
        return Splits(rows, origin, self.labels, self.notes)


class _LMReader(_Reader):
    def read(self, paths: list[str]) -> list[Any]:
        return [read_corpus(paths[0])]

    def carve(self, rows: list[Any]) -> tuple[list[Any], list[Any], str]:
        train, val = carve_text(rows[0], self.val_fraction)
        return [train], [val], f"its last {self.val_fraction:.0%}, one contiguous block"


class _PairReader(_Reader):
    def groups(self) -> tuple[list[str], list[str], list[str]]:
        for role, paths in (("--data", self.files.train), ("--val", self.files.val), ("--test", self.files.test)):
            if len(paths) > 2:
                raise DataError(f"{role} takes {PARALLEL_FORMAT}; got {len(paths)} paths")
        return list(self.files.train), list(self.files.val), list(self.files.test)

    def read(self, paths: list[str]) -> list[Any]:
        return read_parallel(paths, self.notes)


class _LabelledReader(_Reader):
    def read(self, paths: list[str]) -> list[Any]:
        texts, ids, names = read_labelled(paths[0], self.labels, self.notes)
        self.labels = names  # the first file (training) fixes the classes; later files must use them
        return list(zip(texts, ids))

    def stratify(self, rows: list[Any]) -> list[int] | None:
        return [y for _, y in rows]


class _ImageReader(_LabelledReader):
    def read(self, paths: list[str]) -> list[Any]:
        # the training folder fixes the classes; later folders must use them
        rows, self.labels = read_image_folder(paths[0], self.labels, self.notes)
        return rows


class _LineReader(_Reader):
    def read(self, paths: list[str]) -> list[Any]:
        path = paths[0]
        suffix = Path(Path(path).name.removesuffix(".gz")).suffix.lower()
        if suffix in (".tsv", ".csv"):
            return read_labelled(path, notes=self.notes)[0]
        lines = [line.strip() for line in read_text(path).splitlines() if line.strip()]
        if not lines:
            raise DataError(f"{path} has no text; task=mlm takes {FORMATS['mlm']}")
        return lines
