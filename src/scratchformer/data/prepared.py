"""The reader of text of every form (``prepared_data``): the tokenizer and the prepared corpora of its plan, trained
and written once, found and reused after, and each split cut from them.

    the tokenizer     a checkpoint's (--resume, evaluate, fine-tuning), or else the one trained on the training
                      source with these settings: remembered in the cache folder as tokenizers/KEY, trained
                      from the stream (or a sample, tokenizer_sample=N)
    each source       prepared once into the cache folder (data.corpus), or found there, checked and reused; a
                      damaged one is said in one line and prepared again

Under ``torchrun``, global rank 0 does all of this while the other ranks wait in a collective (the broadcast of
rank 0's outcome: the tokenizer's and the corpora's paths, or its one-line error); then every rank opens the
same files read-only (only sizes checked: rank 0 has just verified the checksums). The cache folder must
therefore be one every rank sees (one machine, or a shared file system).
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from scratchformer.atomic import size_text
from scratchformer.data.corpus import cache
from scratchformer.data.corpus.prepare import source_bytes, training_texts, write_corpus
from scratchformer.data.corpus.store import FORMAT_VERSION, CorruptCorpus, PreparedCorpus
from scratchformer.data.plan import DataPlan, Source, plan
from scratchformer.data.progress import ByteBar
from scratchformer.data.task_data import NO_TRAINING_DATA, DataRequest, Prepared, TaskData, task_data
from scratchformer.distributed import DistInfo, broadcast_object
from scratchformer.errors import DataError
from scratchformer.tokenizers import TOKENIZER_FILE, Tokenizer, load_tokenizer
from scratchformer.tokenizers.train import described, id_settings, trainer

__all__ = ["TokenizerSettings", "describe", "prepared_data", "tokenizer_settings", "tokenizer_trainer"]

Say = Callable[[str], None]


class TokenizerSettings(Protocol):
    """The settings a trained tokenizer depends on (a ``TrainConfig`` has them)."""

    tokenizer: str
    bpe_vocab_size: int
    lowercase: bool
    tokenizer_sample: int


def prepared_data(req: DataRequest) -> TaskData:
    """Text of any form, ready: its plan (``data.plan``), the tokenizer and every source prepared, by this process
    or under ``torchrun`` by rank 0 while the others wait for its outcome (module docstring), then each split
    cut from the corpora (``task_data``)."""
    cfg, dist, say, quiet = req.cfg, req.dist, req.say, req.quiet
    the_plan = plan(req.task, req.files, dataset=cfg.dataset, data_dir=cfg.data_dir, val_fraction=cfg.val_fraction,
                    seed=cfg.seed, labels=req.labels)
    if req.tokenizer is None and not the_plan.has("train"):
        raise DataError(NO_TRAINING_DATA)  # nothing to train a tokenizer on
    outcome: Any = None
    if dist.is_main:
        try:
            root, prints = _corpora_root(), {}
            for source in the_plan.sources():
                size = source_bytes(source)
                with ByteBar(f"hashing {source}", size, say if size > 256 << 20 else None, quiet=quiet) as bar:
                    prints[source] = cache.fingerprint(source, root, bar)
            trained = _trained_tokenizer(cfg, the_plan, prints, root, say, quiet) if req.tokenizer is None else None
            tok = load_tokenizer(trained) if trained is not None else req.tokenizer
            assert tok is not None
            tokenizer_id = cache.digest(tok.state())
            corpora = []
            for source in the_plan.sources():  # each found in the cache, or written now with its own lines
                path = _cached(source, prints[source], tokenizer_id, root, say)
                reused = path.exists()
                if not reused:
                    with ByteBar(f"preparing {source}", source_bytes(source), say, quiet=quiet) as bar:
                        corpus = write_corpus(source, tok, path, _meta(path, prints[source], tok, tokenizer_id, dist),
                                              bar)
                    if not quiet:
                        say(f"prepared {source}: {describe(corpus)} in {bar.seconds:.1f} s; "
                            f"{size_text(corpus.n_bytes())} in {path}")
                corpora.append((str(path), reused))
            outcome = ("ok", {"tokenizer": trained, "corpora": corpora})
        except DataError as err:
            broadcast_object(("error", str(err)), dist)
            raise
    status, value = broadcast_object(outcome, dist)
    if status == "error":
        raise DataError(value)
    tokenizer = load_tokenizer(value["tokenizer"]) if value["tokenizer"] is not None else req.tokenizer
    assert tokenizer is not None
    prepared = [Prepared(source, PreparedCorpus.open(path, verify=False), reused)
                for source, (path, reused) in zip(the_plan.sources(), value["corpora"])]
    return task_data(the_plan, tokenizer, prepared)


def _corpora_root() -> Path:
    """The prepared-corpus folder, made if new, cleared of what dead preparations left."""
    root = cache.corpora_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"cannot create the prepared-corpus folder {root} ({err.strerror or err}); set "
                        f"{cache.ENV_VAR} to a writable folder") from None
    cache.remove_stale(root)
    return root


def tokenizer_settings(cfg: TokenizerSettings, mask_token: bool) -> dict[str, Any]:
    """Every setting that changes the ids a trained tokenizer gives."""
    return {"kind": cfg.tokenizer, "mask": mask_token, "sample": cfg.tokenizer_sample,
            **id_settings(cfg.tokenizer, vocab_size=cfg.bpe_vocab_size, lowercase=cfg.lowercase)}


def tokenizer_trainer(cfg: TokenizerSettings, mask_token: bool) -> Callable[[Iterable[str]], Tokenizer]:
    """How a new tokenizer of the kind the settings name is trained: ``tokenizer_trainer(cfg, mask)(texts)``. The
    one trainer of every task's tokenizer (``mask_token``: reserve ``<mask>``, for masked-token pretraining)."""
    return trainer(cfg.tokenizer, vocab_size=cfg.bpe_vocab_size, lowercase=cfg.lowercase, with_mask=mask_token)


def _trained_tokenizer(cfg: TokenizerSettings, plan: DataPlan, prints: dict[Source, str], root: Path, say: Say,
                       quiet: bool) -> str:
    """The folder of the tokenizer trained on the training source with these settings (trained if new)."""
    source = plan.splits["train"].source
    mask = plan.task.mask_token
    settings = tokenizer_settings(cfg, mask)
    directory = root / "tokenizers" / cache.digest({"source": prints[source], **settings, "format": FORMAT_VERSION})
    if (directory / TOKENIZER_FILE).is_file():
        try:
            load_tokenizer(directory)
            return str(directory)
        except DataError as err:
            say(f"warning: {err}; training it again")
    kind = described(cfg.tokenizer, cfg.bpe_vocab_size)
    sample = f" (a sample of {cfg.tokenizer_sample:,} characters)" if cfg.tokenizer_sample else ""
    train = tokenizer_trainer(cfg, mask)
    with ByteBar(f"training a {kind} on {source}{sample}", source_bytes(source), say, quiet=quiet) as bar:
        tokenizer = train(training_texts(source, cfg.tokenizer_sample, bar))
    try:
        tokenizer.save(directory)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)  # no empty folder in place of a tokenizer
        raise
    if not quiet:
        say(f"trained a {kind} on {source}{sample} in {bar.seconds:.0f} s")
    return str(directory)


def _cached(source: Source, print_: str, tokenizer_id: str, root: Path, say: Say) -> Path:
    """The cache's folder for the corpus of ``source`` with this tokenizer: present if a sound copy is there (a
    damaged one is removed, to be written again)."""
    path = root / cache.digest({"format": FORMAT_VERSION, "source": print_, "tokenizer": tokenizer_id})
    if path.exists():
        try:
            PreparedCorpus.open(path)
        except CorruptCorpus as err:
            say(f"warning: the prepared corpus of {source} in {path} is damaged ({err}); preparing it again")
            shutil.rmtree(path, ignore_errors=True)
    return path


def _meta(path: Path, print_: str, tokenizer: Tokenizer, tokenizer_id: str, dist: DistInfo) -> dict[str, Any]:
    """What a new corpus's manifest says of where it came from."""
    return {"key": path.name, "fingerprint": print_, "tokenizer": tokenizer_id, "tokenizer_kind": tokenizer.kind,
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "prepared_by": {"host": socket.gethostname(), "pid": os.getpid(), "rank": dist.rank}}


def describe(corpus: PreparedCorpus) -> str:
    """A corpus in words: tokens, rows, id type."""
    counts, rows = [], 0
    for name, f in corpus.fields.items():  # the token fields, not the raw text kept beside them
        if not name.endswith(".text"):
            counts.append(f"{f.n_items:,}")
            rows = f.n_rows
    tokens = " + ".join(counts)
    unit = ("document" if rows == 1 else "documents") if corpus.kind == "text" else ("row" if rows == 1 else "rows")
    return f"{tokens} tokens in {rows:,} {unit}, ids {corpus.id_type} (vocabulary {corpus.vocab_size:,})"
