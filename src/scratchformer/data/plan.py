"""Which source each split reads, before anything is read: a user's files by role, or a named dataset's splits.

Nothing is read here: each source is prepared once into a corpus on disk (``data.corpus``) and the splits are
chosen from its index (a folder of images is read into memory, ``data.image_splits``, and split the same way).
Without a validation file, one is carved out of the training source (``file_splits``): for a running text the
last ``val_fraction`` of its tokens, one contiguous block (nanoGPT's convention: no validation sentence is a
neighbour of a training one), or for a folder of documents its last whole documents; for rows (pairs, labelled
texts, lines, images) a seeded random ``val_fraction`` of them, stratified by label where the task has labels
(``data.splits``). A named dataset brings its own splits; ``--val``/``--test`` replace them.
A test file is scored once at the end of a run and never used to choose a checkpoint or to stop early.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scratchformer.data.roles import DataFiles, describe, roles
from scratchformer.registry import TaskSpec

__all__ = ["DataPlan", "Source", "SplitSpec", "carving", "file_splits", "plan"]


@dataclass(frozen=True)
class Source:
    """One source of examples, read as one prepared corpus: a ``text`` (a file, or a folder of documents), a
    TSV of ``pairs`` or two line-aligned files, a ``labelled`` TSV/CSV, a file of ``lines`` (one example each);
    or a folder of ``images``, read into memory."""

    kind: str
    paths: tuple[str, ...]

    def __str__(self) -> str:
        return describe(self.paths)


@dataclass(frozen=True)
class SplitSpec:
    """Where one split comes from: a source, and which part of it: ``all`` of it, or, when validation data is
    carved out of the training source, the ``rest`` (training) or the ``held_out`` part (validation)."""

    source: Source
    part: str = "all"
    origin: str = ""


@dataclass
class DataPlan:
    """Which source each split (``train``, ``val``, ``test``) reads. ``labels``: the class names when they are
    fixed (a named dataset's, a trained classifier's); otherwise the training file's own labels decide them."""

    task: TaskSpec
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


def carving(task: TaskSpec, val_fraction: float, seed: int, documents: bool = False) -> str:
    """How validation data is carved out of training data, in words."""
    if task.data.kind == "text":
        return (f"its last documents, about {val_fraction:.0%} of its tokens" if documents
                else f"its last {val_fraction:.0%}, one contiguous block")
    how = ", stratified by label" if task.data.stratified else ""
    return f"a random {val_fraction:.0%} of its rows{how}, seed {seed}"


def plan(task: TaskSpec, files: DataFiles, *, dataset: str | None, data_dir: str | Path | None,
         val_fraction: float, seed: int, labels: list[str] | None = None) -> DataPlan:
    """The plan of a task's data: a named dataset's splits (``--val``/``--test`` replace them), or the user's
    files. ``labels``: fix the classes (a trained classifier's)."""
    train, val, test = roles(task, files, dataset)
    out = DataPlan(task, {}, labels, val_fraction, seed)
    if dataset is not None:
        out = _named(task, dataset, data_dir, val_fraction, seed)
    out.splits.update(file_splits(task, train, val, test, val_fraction, seed))
    return out


def file_splits(task: TaskSpec, train: list[str], val: list[str], test: list[str], val_fraction: float,
                seed: int) -> dict[str, SplitSpec]:
    """Which source (and which part of it) each split reads, from a user's paths by role (``roles``): the one
    place that decides to carve validation data out of the training source (when no validation source is
    given), and says so."""
    kind, out = task.data.kind, {}
    if train:
        source = Source(kind, tuple(train))
        if val:
            out["train"] = SplitSpec(source, origin=describe(train))
        else:
            out["train"] = SplitSpec(source, "rest", f"{describe(train)} (the rest)")
            out["val"] = SplitSpec(source, "held_out", f"{describe(train)} ({carving(task, val_fraction, seed)})")
    if val:
        out["val"] = SplitSpec(Source(kind, tuple(val)), origin=describe(val))
    if test:
        out["test"] = SplitSpec(Source(kind, tuple(test)), origin=f"{describe(test)} (all of it)")
    return out


def _named(task: TaskSpec, dataset: str, data_dir: str | Path | None, val_fraction: float,
           seed: int) -> DataPlan:
    """A named dataset's own splits for ``task``."""
    from scratchformer.data.named import CARVED, SPLITS, SST2_LABELS, find_dataset

    where, kind = f"dataset {dataset}", task.data.kind  # type: ignore[union-attr]
    folder = find_dataset(dataset, data_dir)
    if dataset in CARVED:  # one text, split by position whatever val_fraction says
        fraction, (first, last) = CARVED[dataset]
        text = Source(kind, (str(folder),))
        return DataPlan(task, {"train": SplitSpec(text, "rest", f"{where} ({first})"),
                               "val": SplitSpec(text, "held_out", f"{where} ({last})")}, None, fraction, seed)
    splits = {split: SplitSpec(Source(kind, tuple(str(folder / name) for name in names)), origin=f"{where} {said}")
              for split, (names, said) in SPLITS[dataset].items() if split in task.dataset_splits}
    return DataPlan(task, splits, list(SST2_LABELS) if task.labels else None, val_fraction, seed)
