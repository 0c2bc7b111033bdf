"""The one data pipeline: a task's files by role -> its tokenizer -> its data, as one type (``TaskData``).

    roles.py         which files a user gave, checked against the task's data form (``roles``)
    plan.py          which source each split reads: the files, or a named dataset's splits (``plan``)
    prepared.py      the tokenizer (a checkpoint's, or trained once and cached) and each source's corpus on disk
    task_data.py     ``TaskData``: the tokenizer and a view of each split

``load_data`` is the only way in: the training run, ``evaluate`` and ``prepare`` all call it and receive ready
data. The reader is the one of the task's form of data (``READERS``): text of every form is prepared into
corpora on disk (``prepared.prepared_data``); images, instruction records and preference records are small and are
read into memory (``image_splits``, ``records``, ``preferences``); the built-in tasks make fresh strings at every
step (``synthetic``). Each returns ``TaskData``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from scratchformer.data.image_splits import image_data
from scratchformer.data.preferences import preferences_data
from scratchformer.data.prepared import prepared_data
from scratchformer.data.problems import problems_data
from scratchformer.data.records import records_data
from scratchformer.data.roles import DataFiles
from scratchformer.data.synthetic import synthetic_data
from scratchformer.data.task_data import NO_TRAINING_DATA, DataRequest, DataSettings, TaskData
from scratchformer.distributed import DistInfo
from scratchformer.errors import DataError
from scratchformer.registry import TaskSpec
from scratchformer.tokenizers import Tokenizer

__all__ = ["READERS", "load_data"]

# The reader of each form of data (``registry.DataForm.kind``).
READERS: dict[str, Callable[[DataRequest], TaskData]] = {
    "text": prepared_data, "pairs": prepared_data, "labelled": prepared_data, "lines": prepared_data,
    "images": image_data, "synthetic": synthetic_data, "records": records_data, "preferences": preferences_data,
    "problems": problems_data,
}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def load_data(task: TaskSpec, cfg: DataSettings, files: DataFiles, *, tokenizer: Tokenizer | None = None,
              labels: list[str] | None = None, training: bool = True, dist: DistInfo | None = None,
              say: Callable[[str], None] = _stderr, quiet: bool = False,
              template: dict[str, str] | None = None, base: Path | None = None) -> TaskData:
    """The data ``task`` reads from ``files`` (or its named ``cfg.dataset``), ready to batch.

    ``tokenizer``: a checkpoint's, used as it is (else one is trained on the training data, or found trained
    before). ``labels``: a trained classifier's classes. ``training``: refuse data without a training split.
    ``dist``: the distributed run this process is part of (rank 0 prepares, the others wait for it).
    ``template``: a checkpoint's prompt template (instruction records), used as it is. ``base``: the folder of the
    model a run starts from (``init_from``, found once), where a chat template is looked for."""
    data = READERS[task.data.kind](DataRequest(task, cfg, files, tokenizer, labels, dist or DistInfo(), say, quiet,
                                               template, base))
    if training and not data.has("train"):
        raise DataError(NO_TRAINING_DATA)
    return data
