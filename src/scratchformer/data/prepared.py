"""The tokenizer and the prepared corpora of a plan: trained and written once, found and reused after.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scratchformer.data.corpus import cache
from scratchformer.data.corpus.prepare import source_bytes, training_texts, write_corpus
from scratchformer.data.corpus.store import FORMAT_VERSION, CorruptCorpus, PreparedCorpus
from scratchformer.data.plan import DataPlan, Source
from scratchformer.data.progress import ByteBar
from scratchformer.distributed import DistInfo, broadcast_object
from scratchformer.errors import DataError
from scratchformer.tokenizers import TOKENIZER_FILE, Tokenizer, load_tokenizer

__all__ = ["Prepared", "TokenizerSettings", "describe", "prepare", "size_text", "tokenizer_settings",
           "train_tokenizer"]

Say = Callable[[str], None]


class TokenizerSettings(Protocol):
    """The settings a trained tokenizer depends on (a ``TrainConfig`` has them)."""

    tokenizer: str
    bpe_vocab_size: int
    lowercase: bool
    tokenizer_sample: int


@dataclass
class Prepared:
    source: Source
    corpus: PreparedCorpus
    reused: bool  # found in the cache (else prepared by this run)


def prepare(cfg: TokenizerSettings, plan: DataPlan, tokenizer: Tokenizer | None, dist: DistInfo, say: Say,
            quiet: bool) -> tuple[Tokenizer, list[Prepared]]:
    """The tokenizer and every source of ``plan`` prepared: by this process, or under ``torchrun`` by rank 0
    while the others wait for its outcome (module docstring)."""
    outcome: Any = None
    if dist.is_main:
        try:
            root = _corpora_root()
            sources = plan.sources()
            prints = {source: _fingerprint(source, root, say, quiet) for source in sources}
            trained = _trained_tokenizer(cfg, plan, prints, root, say, quiet) if tokenizer is None else None
            tok = load_tokenizer(trained) if trained is not None else tokenizer
            assert tok is not None
            tokenizer_id = cache.digest(tok.state())
            corpora = [_corpus(source, prints[source], tok, tokenizer_id, root, dist, say, quiet) for source in sources]
            outcome = ("ok", {"tokenizer": trained, "corpora": corpora})
        except DataError as err:
            broadcast_object(("error", str(err)), dist)
            raise
    status, value = broadcast_object(outcome, dist)
    if status == "error":
        raise DataError(value)
    tokenizer = load_tokenizer(value["tokenizer"]) if value["tokenizer"] is not None else tokenizer
    assert tokenizer is not None
    return tokenizer, [Prepared(source, PreparedCorpus.open(path, verify=False), reused)
                       for source, (path, reused) in zip(plan.sources(), value["corpora"])]


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


def _fingerprint(source: Source, root: Path, say: Say, quiet: bool) -> str:
    size = source_bytes(source)
    bar = ByteBar(f"hashing {source}", size, say if size > 256 << 20 else None, quiet=quiet)
    try:
        return cache.fingerprint(source, root, bar)
    finally:
        bar.close()


def tokenizer_settings(cfg: TokenizerSettings, mask_token: bool) -> dict[str, Any]:
    """Every setting that changes the ids a trained tokenizer gives."""
    settings: dict[str, Any] = {"kind": cfg.tokenizer, "mask": mask_token, "sample": cfg.tokenizer_sample}
    if cfg.tokenizer == "bpe":
        settings |= {"vocab_size": cfg.bpe_vocab_size, "lowercase": cfg.lowercase}
    return settings


def train_tokenizer(cfg: TokenizerSettings, texts: Iterable[str], mask_token: bool) -> Tokenizer:
    """A new tokenizer of the kind the settings name, trained on ``texts``: the one trainer of every task's
    tokenizer (``mask_token``: reserve ``<mask>``, for masked-token pretraining)."""
    if cfg.tokenizer == "bpe":  # each tokenizer's module is imported only when it is the one trained
        from scratchformer.tokenizers.bpe import BPETokenizer

        return BPETokenizer.train(texts, cfg.bpe_vocab_size, lowercase=cfg.lowercase, with_mask=mask_token)
    from scratchformer.tokenizers.char import CharTokenizer

    return CharTokenizer.train(texts, with_mask=mask_token)


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
    kind = f"BPE tokenizer of {cfg.bpe_vocab_size:,} tokens" if cfg.tokenizer == "bpe" else "character tokenizer"
    sample = f" (a sample of {cfg.tokenizer_sample:,} characters)" if cfg.tokenizer_sample else ""
    bar = ByteBar(f"training a {kind} on {source}{sample}", source_bytes(source), say, quiet=quiet)
    tokenizer = train_tokenizer(cfg, training_texts(source, cfg.tokenizer_sample, bar), mask)
    seconds = bar.close()
    try:
        tokenizer.save(directory)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)  # no empty folder in place of a tokenizer
        raise
    if not quiet:
        say(f"trained a {kind} on {source}{sample} in {seconds:.0f} s")
    return str(directory)


def _corpus(source: Source, print_: str, tokenizer: Tokenizer, tokenizer_id: str, root: Path, dist: DistInfo,
            say: Say, quiet: bool) -> tuple[str, bool]:
    """(path, reused) of the corpus of ``source``: found in the cache, or written now."""
    key = cache.digest({"format": FORMAT_VERSION, "source": print_, "tokenizer": tokenizer_id})
    path = root / key
    if path.exists():
        try:
            PreparedCorpus.open(path)
            return str(path), True
        except CorruptCorpus as err:
            say(f"warning: the prepared corpus of {source} in {path} is damaged ({err}); preparing it again")
            shutil.rmtree(path, ignore_errors=True)
    bar = ByteBar(f"preparing {source}", source_bytes(source), say, quiet=quiet)
    meta = {"key": key, "fingerprint": print_, "tokenizer": tokenizer_id, "tokenizer_kind": tokenizer.kind,
            "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "prepared_by": {"host": socket.gethostname(), "pid": os.getpid(), "rank": dist.rank}}
    try:
        corpus = write_corpus(source, tokenizer, path, meta, bar)
    finally:
        seconds = bar.close()
    if not quiet:
        say(f"prepared {source}: {describe(corpus)} in {seconds:.1f} s; {size_text(corpus.n_bytes())} in {path}")
    return str(path), False


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


def size_text(n: int) -> str:
    """Bytes for a person: ``812 B``, ``7.1 kB``, ``55.0 MB``, ``1.24 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.{2 if unit == 'GB' else 1}f} {unit}"
    return f"{n} B"
