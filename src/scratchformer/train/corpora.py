"""A run's data as prepared corpora: which tokenizer, which corpora, who prepares them, the splits a task reads.

    the plan (data.sources)       which source each split reads, and which part of it
    the tokenizer                 a checkpoint's (--resume, evaluate, fine-tuning), or else the one trained on
                                  the training source with these settings: remembered in the cache folder as
                                  tokenizers/KEY, trained from the stream (or a sample, tokenizer_sample=N)
    each source                   prepared once into the cache folder (data.corpus), or found there, checked
                                  and reused; a damaged one is said in one line and prepared again
    the splits                    views of the corpora; a held-out part chosen from the index alone

The data layer cannot import tokenizers (it is below them); this module, which may import both, trains the
tokenizer and hands it to the data layer as its ``Encoder``.

Under ``torchrun``, global rank 0 does all of the above while the other ranks wait in a collective (the
broadcast of rank 0's outcome: the tokenizer's and the corpora's paths, or its one-line error); then every
rank opens the same files read-only (only sizes checked: rank 0 has just verified the checksums). The
cache folder must therefore be one every rank sees (one machine, or a shared file system).
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scratchformer.data.corpus import cache
from scratchformer.data.corpus.prepare import source_bytes, training_texts, write_corpus
from scratchformer.data.corpus.store import FORMAT_VERSION, CorruptCorpus, PreparedCorpus
from scratchformer.data.corpus.views import RowSet, TokenStream
from scratchformer.data.errors import DataError
from scratchformer.data.labelled import map_labels
from scratchformer.data.sources import DataPlan, Source, carving
from scratchformer.data.splits import carve_documents, carve_indices, carve_tokens
from scratchformer.tokenizers import TOKENIZER_FILE, BPETokenizer, CharTokenizer, Tokenizer, load_tokenizer
from scratchformer.train.config import TrainConfig
from scratchformer.train.distributed import DistInfo, broadcast_object
from scratchformer.train.progress import ByteBar

__all__ = ["Prepared", "TaskData", "load_task_data", "prepare_sources"]

Say = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass
class Prepared:
    source: Source
    corpus: PreparedCorpus
    reused: bool  # found in the cache (else prepared by this run)


@dataclass
class TaskData:
    """What a task reads: its tokenizer, each split's view, where each came from, the corpora behind them."""

    plan: DataPlan
    tokenizer: Tokenizer
    views: dict[str, TokenStream | RowSet]
    origin: dict[str, str]
    prepared: list[Prepared]
    labels: list[str] | None = None
    label_ids: dict[str, np.ndarray] = field(default_factory=dict)  # classification: each split's label ids

    @property
    def notes(self) -> list[str]:
        return [note for p in self.prepared for note in p.corpus.notes]


def load_task_data(cfg: TrainConfig, plan: DataPlan, tokenizer: Tokenizer | None = None, *,
                   info: DistInfo | None = None, say: Say = _stderr, quiet: bool = False) -> TaskData:
    """Prepare (or reuse) the corpora of ``plan`` and cut them into the task's splits."""
    tokenizer, prepared = prepare_sources(cfg, plan, tokenizer, info=info, say=say, quiet=quiet)
    return _task_data(plan, tokenizer, prepared)


def prepare_sources(cfg: TrainConfig, plan: DataPlan, tokenizer: Tokenizer | None = None, *,
                    info: DistInfo | None = None, say: Say = _stderr,
                    quiet: bool = False) -> tuple[Tokenizer, list[Prepared]]:
    """The tokenizer and every source of ``plan`` prepared (rank 0 prepares, see the module docstring)."""
    info = info or DistInfo()
    outcome = _on_rank_zero(lambda: _prepare_here(cfg, plan, tokenizer, info, say, quiet), info)
    if outcome["tokenizer"] is not None:
        tokenizer = load_tokenizer(outcome["tokenizer"])
    assert tokenizer is not None
    sources = plan.sources()
    prepared = [Prepared(source, PreparedCorpus.open(path, verify=False), reused)
                for source, (path, reused) in zip(sources, outcome["corpora"])]
    return tokenizer, prepared


def _on_rank_zero(work: Callable[[], dict[str, Any]], info: DistInfo) -> dict[str, Any]:
    """``work()`` on rank 0; its result, or its ``DataError``, on every rank."""
    if not info.enabled:
        return work()
    if info.is_main:
        try:
            result = work()
        except DataError as err:
            broadcast_object(("error", str(err)), info)
            raise
        broadcast_object(("ok", result), info)
        return result
    status, value = broadcast_object(None, info)
    if status == "error":
        raise DataError(value)
    return value


def _prepare_here(cfg: TrainConfig, plan: DataPlan, tokenizer: Tokenizer | None, info: DistInfo, say: Say,
                  quiet: bool) -> dict[str, Any]:
    root = cache.corpora_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"cannot create the prepared-corpus folder {root} ({err.strerror or err}); set "
                        f"{cache.ENV_VAR} to a writable folder") from None
    cache.remove_stale(root)
    sources = plan.sources()
    prints = {source: _fingerprint(source, root, say, quiet) for source in sources}
    tokenizer_dir = None
    if tokenizer is None:
        tokenizer_dir = _recipe_tokenizer(cfg, plan, prints, root, say, quiet)
        tokenizer = load_tokenizer(tokenizer_dir)
    tokenizer_id = cache.digest(tokenizer.state())
    corpora = []
    for source in sources:
        done = _corpus(source, prints[source], tokenizer, tokenizer_id, root, info, say, quiet)
        corpora.append((str(done.corpus.path), done.reused))
    return {"tokenizer": tokenizer_dir, "corpora": corpora}


def _fingerprint(source: Source, root: Path, say: Say, quiet: bool) -> str:
    size = source_bytes(source)
    bar = ByteBar(f"hashing {source}", size, say if size > 256 << 20 else None, quiet=quiet)
    try:
        return cache.fingerprint(source, root, bar)
    finally:
        bar.close()


def tokenizer_settings(cfg: TrainConfig, task: str) -> dict[str, Any]:
    """Every setting that changes the ids a trained tokenizer gives."""
    settings: dict[str, Any] = {"kind": cfg.tokenizer, "mask": task == "mlm", "sample": cfg.tokenizer_sample}
    if cfg.tokenizer == "bpe":
        settings |= {"vocab_size": cfg.bpe_vocab_size, "lowercase": cfg.lowercase}
    return settings


def _recipe_tokenizer(cfg: TrainConfig, plan: DataPlan, prints: dict[Source, str], root: Path, say: Say,
                      quiet: bool) -> str:
    """The folder of the tokenizer trained on the training source with these settings (trained if new)."""
    if not plan.has("train"):
        raise DataError("no training data: give --data FILE (a validation or test file alone cannot train)")
    source = plan.splits["train"].source
    settings = tokenizer_settings(cfg, plan.task)
    directory = root / "tokenizers" / cache.digest({"source": prints[source], **settings, "format": FORMAT_VERSION})
    if (directory / TOKENIZER_FILE).is_file():
        try:
            load_tokenizer(directory)
            return str(directory)
        except DataError as err:
            say(f"warning: {err}; training it again")
    kind = f"BPE tokenizer of {cfg.bpe_vocab_size:,} tokens" if cfg.tokenizer == "bpe" else "character tokenizer"
    sample = f" (a sample of {cfg.tokenizer_sample:,} characters)" if cfg.tokenizer_sample else ""
    bar = ByteBar(f"training a {kind} on {source}{sample}", source_bytes(source), say, quiet=quiet)
    texts = training_texts(source, cfg.tokenizer_sample, bar)
    if cfg.tokenizer == "bpe":
        tokenizer: Tokenizer = BPETokenizer.train(texts, cfg.bpe_vocab_size, lowercase=cfg.lowercase,
                                                  with_mask=plan.task == "mlm")
    else:
        tokenizer = CharTokenizer.train(texts, with_mask=plan.task == "mlm")
    seconds = bar.close()
    tokenizer.save(directory)
    if not quiet:
        say(f"trained a {kind} on {source}{sample} in {seconds:.0f} s")
    return str(directory)


def _corpus(source: Source, print_: str, tokenizer: Tokenizer, tokenizer_id: str, root: Path, info: DistInfo,
            say: Say, quiet: bool) -> Prepared:
    key = cache.digest({"format": FORMAT_VERSION, "source": print_, "tokenizer": tokenizer_id})
    path = root / key
    if path.exists():
        try:
            return Prepared(source, PreparedCorpus.open(path), True)
        except CorruptCorpus as err:
            say(f"warning: the prepared corpus of {source} in {path} is damaged ({err}); preparing it again")
            shutil.rmtree(path, ignore_errors=True)
    bar = ByteBar(f"preparing {source}", source_bytes(source), say, quiet=quiet)
    meta = {"key": key, "fingerprint": print_, "tokenizer": tokenizer_id, "tokenizer_kind": tokenizer.kind,
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "prepared_by": {"host": socket.gethostname(), "pid": os.getpid(), "rank": info.rank}}
    try:
        corpus = write_corpus(source, tokenizer, path, meta, bar)
    finally:
        seconds = bar.close()
    if not quiet:
        say(f"prepared {source}: {describe(corpus)} in {seconds:.1f} s; {size_text(corpus.n_bytes())} in {path}")
    return Prepared(source, corpus, False)


def describe(corpus: PreparedCorpus) -> str:
    """A corpus in words: tokens, rows, id type."""
    fields = {name: f for name, f in corpus.fields.items() if not name.endswith(".text")}
    tokens = " + ".join(f"{f.n_items:,}" for f in fields.values())
    rows = next(iter(fields.values())).n_rows
    unit = ("document" if rows == 1 else "documents") if corpus.kind == "text" else ("row" if rows == 1 else "rows")
    return f"{tokens} tokens in {rows:,} {unit}, ids {corpus.id_type} (vocabulary {corpus.vocab_size:,})"


def size_text(n: int) -> str:
    """Bytes for a person: ``812 B``, ``7.1 kB``, ``55.0 MB``, ``1.24 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.{2 if unit == 'GB' else 1}f} {unit}"
    return f"{n} B"


# ------------------------------------------------------------------------------------------ splits


def _task_data(plan: DataPlan, tokenizer: Tokenizer, prepared: list[Prepared]) -> TaskData:
    corpora = {p.source: p.corpus for p in prepared}
    labels, source_labels = _labels(plan, corpora)
    views: dict[str, TokenStream | RowSet] = {}
    origin: dict[str, str] = {}
    label_ids: dict[str, np.ndarray] = {}
    carved: dict[Source, tuple[np.ndarray, np.ndarray]] = {}  # (rest, held out) of a source, carved once
    for split, spec in plan.splits.items():
        corpus, origin[split] = corpora[spec.source], spec.origin
        if plan.task == "lm":
            views[split], origin[split] = _lm_view(plan, split, spec.part, corpus, spec.origin, spec.source)
            continue
        n = next(iter(corpus.fields.values())).n_rows
        rows = np.arange(n)
        if spec.part != "all":
            if spec.source not in carved:
                carved[spec.source] = carve_indices(n, plan.val_fraction, plan.seed, source_labels.get(spec.source))
            rows = carved[spec.source][0 if spec.part == "rest" else 1]
        views[split] = RowSet(corpus, rows, name=split)
        if spec.source in source_labels:
            label_ids[split] = source_labels[spec.source][rows]
    return TaskData(plan, tokenizer, views, origin, prepared, labels, label_ids)


def _lm_view(plan: DataPlan, split: str, part: str, corpus: PreparedCorpus, origin: str,
             source: Source) -> tuple[TokenStream, str]:
    if part == "all":
        return TokenStream(corpus, name=f"the {split} text"), origin
    text = corpus.fields["text"]
    cut = None
    if "documents" in corpus.manifest:
        cut = carve_documents(text.offsets.read(0, text.n_rows + 1), plan.val_fraction)
        if cut is not None and part == "held_out":
            origin = f"{source} ({carving('lm', plan.val_fraction, plan.seed, documents=True)})"
    cut = carve_tokens(text.n_items, plan.val_fraction) if cut is None else cut
    if part == "rest":
        return TokenStream(corpus, 0, cut, name=f"the {split} text"), origin
    return TokenStream(corpus, cut, None, name=f"the {split} text"), origin


def _labels(plan: DataPlan, corpora: dict[Source, PreparedCorpus]) -> tuple[list[str] | None, dict[Source, Any]]:
    """Classification: the class names (fixed, or the training file's sorted) and each source's label ids."""
    if plan.task != "classify":
        return None, {}
    names, ids = plan.labels, {}
    for source in plan.sources():  # training first: its labels decide the names when they are not fixed
        corpus = corpora[source]
        found = corpus.manifest["labels"]
        names, mapping = map_labels(dict(zip(found["names"], found["first_line"])), names, source.paths[0])
        table = np.array([mapping[name] for name in found["names"]], dtype=np.int64)
        ids[source] = table[corpus.labels()]
    return names, ids
