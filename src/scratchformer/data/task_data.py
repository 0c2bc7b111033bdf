"""What a task reads: its tokenizer and a view of a prepared corpus for each split.

A split is a range of a token stream (``TokenStream``: a running text) or a set of rows (``RowSet``). A held-out
part carved from a training source is chosen from the corpus's index alone (``data.splits``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scratchformer.data.corpus.store import PreparedCorpus
from scratchformer.data.corpus.views import RowSet, TokenStream
from scratchformer.data.plan import DataPlan, Source, SplitSpec, carving
from scratchformer.data.prepared import Prepared
from scratchformer.data.splits import carve_documents, carve_indices, carve_tokens
from scratchformer.tokenizers import Tokenizer

__all__ = ["TaskData", "task_data"]


@dataclass
class TaskData:
    """A task's tokenizer, each split's view, where each came from, the corpora behind them; for a classifier
    the class names and each split's label ids."""

    plan: DataPlan
    tokenizer: Tokenizer
    views: dict[str, TokenStream | RowSet]
    origin: dict[str, str]
    prepared: list[Prepared]
    labels: list[str] | None = None
    label_ids: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def notes(self) -> list[str]:
        notes = []
        for p in self.prepared:
            notes += p.corpus.notes
        return notes

    def has(self, split: str) -> bool:
        return split in self.views


def task_data(plan: DataPlan, tokenizer: Tokenizer, prepared: list[Prepared]) -> TaskData:
    """Cut the prepared corpora of ``plan`` into its splits."""
    corpora = {p.source: p.corpus for p in prepared}
    labels, source_labels = _labels(plan, corpora)
    out = TaskData(plan, tokenizer, {}, {}, prepared, labels)
    carved: dict[Source, tuple[np.ndarray, np.ndarray]] = {}  # (rest, held out) of a source, carved once
    for split, spec in plan.splits.items():
        corpus = corpora[spec.source]
        if plan.task.data.kind == "text":  # type: ignore[union-attr]
            out.views[split], out.origin[split] = _stream(plan, split, spec, corpus)
            continue
        rows = np.arange(next(iter(corpus.fields.values())).n_rows)
        if spec.part != "all":
            if spec.source not in carved:
                carved[spec.source] = carve_indices(len(rows), plan.val_fraction, plan.seed,
                                                    source_labels.get(spec.source))
            rows = carved[spec.source][0 if spec.part == "rest" else 1]
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
