"""A user's files by role, and the checks of those roles: the one place that decides what ``--data``, ``--val``
and ``--test`` may hold for a task.

- ``--data`` is the training data. For a task whose source is one path (``lm``, ``classify``, ``mlm``,
  ``image``), a second ``--data`` path is the validation source (the long-standing two-file form); for
  ``translate`` two paths are one line-aligned pair of files.
- ``--val`` and ``--test`` take the same forms as ``--data``.
- Folders are data only where the task's form allows them (``lm``: a folder of documents read as one
  corpus) or requires them (``image``: a folder of class sub-folders).
- One source of training data: a named dataset (``dataset=NAME``) or ``--data``, never both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scratchformer.errors import DataError
from scratchformer.registry import TaskSpec, data_tasks

__all__ = ["DataFiles", "describe", "one_source", "roles"]


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
    def from_dict(cls, data: dict[str, list[str]] | None) -> DataFiles:
        data = data or {}
        return cls(tuple(data.get("train", ())), tuple(data.get("val", ())), tuple(data.get("test", ())))


def describe(paths: Sequence[str]) -> str:
    return " + ".join(str(p) for p in paths)


def one_source(dataset: str | None, files: DataFiles, where: str = "") -> None:
    """Refuse a named dataset beside training files: two sources of training data."""
    if dataset not in (None, "none", "null") and files.train:
        said = f" ({where})" if where else ""
        raise DataError(f"two data sources: dataset={dataset}{said} and --data {describe(files.train)}; "
                        "give one of them")


def roles(task: TaskSpec, files: DataFiles, dataset: str | None = None) -> tuple[list[str], list[str], list[str]]:
    """(train paths, val paths, test paths) of a user's files for ``task``: one source each, checked; with a
    named ``dataset`` beside them, only a validation or test source of its own."""
    form = task.data
    if not form.paths:
        if files:
            raise DataError(f"the built-in task {task.name!r} makes its own data; --data, --val and --test need "
                            f"{data_tasks()}")
        return [], [], []
    if dataset is None and not files:
        raise DataError(f"task={task.name} needs data: --data PATH ({form.describe}), or dataset={task.datasets[0]}")
    if dataset is not None and dataset not in task.datasets:
        path = "FOLDER" if form.folders == "required" else "FILE"
        raise DataError(f"dataset {dataset!r} cannot be used for task={task.name}"
                        + (f" (try {' or '.join(task.datasets)}, or --data {path})" if task.datasets else ""))
    one_source(dataset, files)
    for p in (*files.train, *files.val, *files.test):
        if form.folders == "refused" and Path(p).is_dir():
            raise DataError(f"{p} is a folder; task={task.name} takes files: {form.describe}")
        if form.folders == "required" and Path(p).is_file():
            raise DataError(f"{p} is a file; task={task.name} takes {form.describe}")
    train, val, test = list(files.train), list(files.val), list(files.test)
    if form.paths == 1 and len(train) == 2:  # the two-file form: training + validation
        if val:
            raise DataError(f"two validation sources: the second --data path {train[1]} and --val "
                            f"{describe(val)}; give one of them")
        train, val = [train[0]], [train[1]]
    for role, paths in (("--data", train), ("--val", val), ("--test", test)):
        if len(paths) > form.paths:
            if form.paths > 1:
                raise DataError(f"{role} takes {form.describe.removeprefix('a TSV of ')}; got {len(paths)} paths")
            raise DataError(f"{role} takes one path for task={task.name} ({form.describe}), got {len(paths)}")
    return train, val, test
