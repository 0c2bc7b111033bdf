"""What a task reads, whatever its data: ``TaskData``, its tokenizer and a view of each split.

A view is a range of a token stream (``TokenStream``: a running text) or a set of rows: rows of a prepared corpus
(``RowSet``), rows held in memory (``MemoryRows``: images, the built-in tasks' held-out strings) or rows drawn
fresh at every step (``FreshRows``: the built-in tasks' training strings). Rows are read alike: ``len``, ``head``,
``lengths``, ``ids``, ``texts``, and for training ``batches`` (step -> the positions of its rows).

Each form of data has its reader (``data.pipeline.READERS``), and every reader takes a ``DataRequest`` and
returns ``TaskData``. Text of every form is prepared into corpora (``data.prepared.prepared_data``), then cut here
into the splits of its plan (``task_data``: a held-out part carved from a training source is chosen from the
corpus's index alone, ``data.splits``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from scratchformer.data.corpus.store import PreparedCorpus
from scratchformer.data.corpus.views import RowSet, TokenStream
from scratchformer.data.plan import DataPlan, Source, SplitSpec, carving
from scratchformer.data.roles import DataFiles
from scratchformer.data.splits import carve_documents, carve_part, carve_tokens
from scratchformer.distributed import DistInfo
from scratchformer.registry import TaskSpec
from scratchformer.tokenizers import Tokenizer

__all__ = ["NO_TRAINING_DATA", "DataRequest", "DataSettings", "Prepared", "TaskData", "task_data"]

NO_TRAINING_DATA = "no training data: --data names the training file (--val and --test alone cannot train)"


class DataSettings(Protocol):
    """The settings the data readers use (a ``TrainConfig`` has them)."""

    dataset: str | None
    data_dir: str | None
    tokenizer: str
    bpe_vocab_size: int
    lowercase: bool
    tokenizer_sample: int
    val_fraction: float
    seed: int
    batch_size: int
    n_symbols: int
    min_seq_len: int
    max_seq_len: int
    n_test: int


@dataclass(frozen=True)
class DataRequest:
    """What a reader is asked for: ``task``'s data from ``files`` (or ``cfg.dataset``). ``tokenizer``: a checkpoint's,
    used as it is (else one is trained on the training data). ``labels``: a trained classifier's classes.
    ``dist``: the distributed run (rank 0 prepares, the others wait); ``say``: where to report; ``quiet``."""

    task: TaskSpec
    cfg: DataSettings
    files: DataFiles
    tokenizer: Tokenizer | None
    labels: list[str] | None
    dist: DistInfo
    say: Callable[[str], None]
    quiet: bool
    template: dict[str, str] | None = None  # instruction records: a checkpoint's prompt template, used as it is
    base: Path | None = None  # the folder of the model a run starts from (init_from): its chat template is there


@dataclass
class Prepared:
    """A source's prepared corpus, and whether it was found in the cache (else prepared by this run)."""

    source: Source
    corpus: PreparedCorpus
    reused: bool


@dataclass
class TaskData:
    """A task's data: its tokenizer (None for images), each split's view and where it came from, the prepared
    corpora behind them, what was skipped while reading; for a classifier the class names and each split's
    label ids (one per row of its view, in order); for instruction records their prompt template."""

    tokenizer: Tokenizer | None
    views: dict[str, Any]
    origin: dict[str, str]
    prepared: list[Prepared] = field(default_factory=list)
    labels: list[str] | None = None
    label_ids: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    template: dict[str, str] | None = None  # instruction records: the prompt template they were put through

    def has(self, split: str) -> bool:
        return split in self.views

    def model_fields(self) -> dict[str, int]:
        """The model's fields the data decides: its vocabulary, and a classifier's number of classes."""
        tok = self.tokenizer
        fields = {} if tok is None else {"vocab_size": tok.vocab_size, "pad_id": tok.pad_id}
        return fields | ({} if self.labels is None else {"n_classes": len(self.labels)})


def task_data(plan: DataPlan, tokenizer: Tokenizer, prepared: list[Prepared]) -> TaskData:
    """Cut the prepared corpora of ``plan`` into its splits."""
    corpora = {p.source: p.corpus for p in prepared}
    labels, source_labels = _labels(plan, corpora)
    notes = [note for p in prepared for note in p.corpus.notes]
    out = TaskData(tokenizer, {}, {}, prepared, labels, notes=notes)
    for split, spec in plan.splits.items():
        corpus = corpora[spec.source]
        if plan.task.data.kind == "text":
            out.views[split], out.origin[split] = _stream(plan, split, spec, corpus)
            continue
        n_rows = next(iter(corpus.fields.values())).n_rows
        rows = carve_part(spec.part, n_rows, plan.val_fraction, plan.seed, source_labels.get(spec.source))
        out.views[split], out.origin[split] = RowSet(corpus, rows, name=split), spec.origin
        if spec.source in source_labels:
            out.label_ids[split] = source_labels[spec.source][rows]
    return out


def _stream(plan: DataPlan, split: str, spec: SplitSpec, corpus: PreparedCorpus) -> tuple[TokenStream, str]:
    """A running text's split: all of it, or the part before or after the cut (a folder's last documents when
    they come close to ``val_fraction``, else its last tokens)."""
    name, origin = f"the {split} text", spec.origin
    if spec.part == "all":
        return TokenStream(corpus, name=name), origin
    text = corpus.fields["text"]
    cut = None
    if "documents" in corpus.manifest:
        cut = carve_documents(text.offsets.read(0, text.n_rows + 1), plan.val_fraction)
        if cut is not None and spec.part == "held_out":
            origin = f"{spec.source} ({carving(plan.task, plan.val_fraction, plan.seed, documents=True)})"
    cut = carve_tokens(text.n_items, plan.val_fraction) if cut is None else cut
    if spec.part == "rest":
        return TokenStream(corpus, 0, cut, name=name), origin
    return TokenStream(corpus, cut, None, name=name), origin


def _labels(plan: DataPlan, corpora: dict[Source, PreparedCorpus]) -> tuple[list[str] | None, dict[Source, Any]]:
    """A classifier's class names (fixed, or the training file's sorted) and each source's label ids."""
    if not plan.task.labels:
        return None, {}
    from scratchformer.data.labelled import map_labels  # the label files' reader: a classifier's data only

    names, ids = plan.labels, {}
    for source in plan.sources():  # training first: its labels decide the names when they are not fixed
        corpus = corpora[source]
        found = corpus.manifest["labels"]
        names, mapping = map_labels(dict(zip(found["names"], found["first_line"])), names, source.paths[0])
        table = np.array([mapping[name] for name in found["names"]], dtype=np.int64)
        ids[source] = table[corpus.labels()]
    return names, ids
