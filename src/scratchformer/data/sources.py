"""Where a run's examples come from: a user's files by role, or a named dataset, split into train/val/test.

A user names files by role (the CLI's ``--data``, ``--val``, ``--test``); ``DataFiles`` holds them.
``plan_files`` (or ``plan_named`` for a named dataset) turns them into a ``DataPlan``: for each split, the
``Source`` it reads and which part of it, and where it came from in words. Nothing is read here: each source
is prepared once into a corpus on disk (``data.corpus``), and the splits are chosen from its index. The
rules, the same for every task:

- ``--data`` is the training data. For ``lm``, ``classify`` and ``mlm`` a second ``--data`` path is the
  validation file (the long-standing two-file form); for ``translate`` two paths are one line-aligned pair of
  files. For ``lm``, ``--data DIR`` is a folder of ``.txt``/``.txt.gz`` documents read as one corpus; for
  ``image``, a folder with one sub-folder of images per class (``images.py``).
- ``--val`` and ``--test`` take the same forms as ``--data``. A test file is scored once at the end of a
  run and never used to choose a checkpoint or to stop early.
- Without a validation file one is carved out of the training data: for language modelling the last
  ``val_fraction`` of the tokens, one contiguous block (nanoGPT's convention: no validation sentence is a
  neighbour of a training one), or for a folder of documents its last whole documents; for rows (pairs,
  labelled texts, lines, images) a seeded random ``val_fraction`` of them, stratified by label for classification
  (text or images), so a file sorted by label or by length still validates on every class and every length
  (``data.splits``).
- A named dataset (``dataset=multi30k``, ...) brings its own splits; ``--val``/``--test`` replace them.

Images are the exception to "nothing is read here": they are small (the digits, a folder of PNG/JPEG files),
so ``task=image`` lists its files into in-memory ``Splits`` (``load_splits``, ``data.image_splits``) by the
same rules, and is never prepared into a corpus on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scratchformer.data.errors import DataError
from scratchformer.data.images import FORMAT as IMAGE_FORMAT
from scratchformer.data.labelled import FORMAT as LABELLED_FORMAT
from scratchformer.data.parallel import FORMAT as PARALLEL_FORMAT

if TYPE_CHECKING:
    from scratchformer.data.image_splits import Splits

__all__ = ["KIND", "DataFiles", "DataPlan", "Source", "SplitSpec", "carving", "data_formats", "load_splits",
           "plan_files", "plan_named"]

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


KIND = {"lm": "text", "translate": "pairs", "classify": "labelled", "mlm": "lines"}


@dataclass(frozen=True)
class Source:
    """One source of examples, read as one prepared corpus: a ``text`` (a file, or a folder of documents), a
    TSV of ``pairs`` or two line-aligned files, a ``labelled`` TSV/CSV, a file of ``lines`` (one example each)."""

    kind: str
    paths: tuple[str, ...]

    def __str__(self) -> str:
        return _describe(self.paths)


@dataclass(frozen=True)
class SplitSpec:
    """Where one split comes from: a source, and which part of it: ``all`` of it, or, when validation data is
    carved out of the training source, the ``rest`` (training) or the ``held_out`` part (validation)."""

    source: Source
    part: str = "all"
    origin: str = ""


@dataclass
class DataPlan:
    """Which source each split (``train``, ``val``, ``test``) reads, before anything is read.

    ``labels``: the class names when they are fixed (a named dataset's, a trained classifier's); otherwise
    the training file's own labels decide them. ``val_fraction`` and ``seed`` say how a held-out part is carved.
    """

    task: str
    splits: dict[str, SplitSpec]
    labels: list[str] | None = None
    val_fraction: float = 0.1
    seed: int = 0

    def has(self, split: str) -> bool:
        return split in self.splits

    def sources(self) -> list[Source]:
        """Each distinct source once, training first (its tokenizer is trained on it)."""
        seen: list[Source] = []
        for split in ("train", "val", "test"):
            if split in self.splits and self.splits[split].source not in seen:
                seen.append(self.splits[split].source)
        return seen


# ------------------------------------------------------------------------------------------ planning


def _describe(paths: Sequence[str]) -> str:
    return " + ".join(str(p) for p in paths)


def _refuse_dirs(task: str, paths: Sequence[str]) -> None:
    """Folders are data for lm (a corpus) and image (classes) only; image takes nothing but folders."""
    for p in paths:
        if task not in ("lm", "image") and Path(p).is_dir():
            raise DataError(f"{p} is a folder; task={task} takes files: {FORMATS[task]}")
        if task == "image" and Path(p).is_file():
            raise DataError(f"{p} is a file; task=image takes {FORMATS[task]}")


def plan_named(task: str, dataset: str, data_dir: str | Path | None, files: DataFiles, *, val_fraction: float,
               seed: int) -> DataPlan:
    """A named dataset's own splits for a task family; a user's ``--val``/``--test`` files replace them."""
    from scratchformer.data.named import SST2_LABELS, find_dataset

    fits = {"lm": ("tinyshakespeare",), "translate": ("multi30k",), "classify": ("sst2",), "mlm": ("sst2",)}
    if dataset not in fits.get(task, ()):
        raise DataError(f"dataset {dataset!r} cannot be used for task={task}"
                        + (f" (try {' or '.join(fits[task])}, or --data FILE)" if task in fits else ""))
    if files.train:
        raise DataError(f"two data sources: dataset={dataset} and --data {_describe(files.train)}; give one of them")
    where, kind = f"dataset {dataset}", KIND[task]
    folder = find_dataset(dataset, data_dir)
    labels = None
    if dataset == "tinyshakespeare":
        text = Source(kind, (str(folder),))
        splits = {"train": SplitSpec(text, "rest", f"{where} (the first 90 %)"),
                  "val": SplitSpec(text, "held_out", f"{where} (the last 10 %, nanoGPT's split)")}
        val_fraction = 0.1  # nanoGPT's split, whatever val_fraction says
    elif dataset == "multi30k":
        stems = {"train": "train", "val": "val", "test": "test_2016_flickr"}
        splits = {split: SplitSpec(Source(kind, (str(folder / f"{stem}.de.gz"), str(folder / f"{stem}.en.gz"))),
                                   origin=f"{where} {stem}")
                  for split, stem in stems.items()}
    else:
        names = {"train": ("train", "train"), "val": ("dev", "dev"), "test": ("test", "test (GLUE validation)")}
        if task == "mlm":  # texts only, no labels
            names.pop("test")
        else:
            labels = list(SST2_LABELS)
        splits = {split: SplitSpec(Source(kind, (str(folder / f"{name}.tsv"),)), origin=f"{where} {said}")
                  for split, (name, said) in names.items()}
    plan = DataPlan(task, splits, labels, val_fraction, seed)
    if files.val or files.test:  # the user's own validation or test file replaces the dataset's
        plan.splits.update(plan_files(task, files, val_fraction=val_fraction, seed=seed).splits)
    return plan


def plan_files(task: str, files: DataFiles, *, val_fraction: float, seed: int,
               label_names: Sequence[str] | None = None) -> DataPlan:
    """The splits of a user's ``files`` for a task family (``lm``, ``translate``, ``classify``, ``mlm``):
    ``train``/``val`` (when there is training data) and ``test`` (when a test file is given).

    ``label_names``: fix the classes (a trained classifier's), so that a label outside them is an error."""
    if task not in FORMATS:
        raise DataError(f"task={task} makes its own data; --data, --val and --test need task=lm, translate, "
                        "classify, mlm or image")
    if task == "image":
        raise DataError("task=image reads its images into memory, not into a prepared corpus (load_splits)")
    _refuse_dirs(task, [*files.train, *files.val, *files.test])
    train, val, test = _groups(task, files)
    kind = KIND[task]
    splits: dict[str, SplitSpec] = {}
    if train:
        source = Source(kind, tuple(train))
        if val:
            splits["train"] = SplitSpec(source, origin=_describe(train))
            splits["val"] = SplitSpec(Source(kind, tuple(val)), origin=_describe(val))
        else:
            splits["train"] = SplitSpec(source, "rest", f"{_describe(train)} (the rest)")
            splits["val"] = SplitSpec(source, "held_out", f"{_describe(train)} ({carving(task, val_fraction, seed)})")
    elif val:
        splits["val"] = SplitSpec(Source(kind, tuple(val)), origin=_describe(val))
    if test:
        splits["test"] = SplitSpec(Source(kind, tuple(test)), origin=f"{_describe(test)} (all of it)")
    return DataPlan(task, splits, list(label_names) if label_names is not None else None, val_fraction, seed)


def carving(task: str, val_fraction: float, seed: int, documents: bool = False) -> str:
    """How validation data is carved out of training data, in words."""
    if task == "lm":
        return (f"its last documents, about {val_fraction:.0%} of its tokens" if documents
                else f"its last {val_fraction:.0%}, one contiguous block")
    how = ", stratified by label" if task in ("classify", "image") else ""
    return f"a random {val_fraction:.0%} of its rows{how}, seed {seed}"


def _groups(task: str, files: DataFiles) -> tuple[list[str], list[str], list[str]]:
    """(train paths, val paths, test paths): one example source each."""
    train, val, test = list(files.train), list(files.val), list(files.test)
    limit = 2 if task == "translate" else 1
    if task != "translate" and len(train) == 2:  # the two-file form: training + validation
        if val:
            raise DataError(f"two validation sources: the second --data path {train[1]} and --val "
                            f"{_describe(val)}; give one of them")
        train, val = [train[0]], [train[1]]
    for role, paths in (("--data", train), ("--val", val), ("--test", test)):
        if len(paths) > limit and task == "translate":
            raise DataError(f"{role} takes {PARALLEL_FORMAT}; got {len(paths)} paths")
        if len(paths) > limit:
            raise DataError(f"{role} takes one path for task={task} ({FORMATS[task]}), got {len(paths)}")
    return train, val, test


def load_splits(task: str, files: DataFiles, *, val_fraction: float, seed: int,
                label_names: Sequence[str] | None = None) -> Splits:
    """The images of ``files`` for ``task=image``, read into memory by the rules above (``data.image_splits``).
    Text tasks are planned (``plan_files``) and prepared on disk instead."""
    if task != "image":
        raise DataError(f"task={task} reads prepared corpora (plan_files); load_splits is for task=image")
    _refuse_dirs(task, [*files.train, *files.val, *files.test])
    train, val, test = _groups(task, files)
    from scratchformer.data.image_splits import folder_splits  # here, not above: it imports this module

    return folder_splits(train, val, test, val_fraction=val_fraction, seed=seed, label_names=label_names)
