"""What every task shares: the ``Task`` interface the training loop calls, and step-indexed batching.

Every step's batch is a pure function of ``(seed, step)``: nothing about the data order has to be saved
in a checkpoint, and resuming a run replays exactly the same batches. A task reads its splits from prepared
corpora on disk (``data.task_data.TaskData``), a batch at a time; only the built-in synthetic tasks and the
images hold their (small) data in memory.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor, nn

from scratchformer.data.task_data import TaskData
from scratchformer.errors import DataError
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import TaskSpec, spec
from scratchformer.settings.config import TrainConfig
from scratchformer.tokenizers import PAD_ID, Tokenizer

if TYPE_CHECKING:
    from scratchformer.data.batching import BucketedEpoch

Batch = dict[str, Tensor]


def step_generator(seed: int, step: int, salt: int = 0) -> torch.Generator:
    """A generator whose state depends only on (seed, step, salt)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 7919 + salt)


def split_rows(batch: Batch, parts: int) -> list[Batch]:
    """Split a batch into ``parts`` contiguous row shards (some may be empty when rows < parts)."""
    keys = list(batch)
    chunks = [torch.tensor_split(batch[k], parts) for k in keys]
    return [{k: chunks[j][i] for j, k in enumerate(keys)} for i in range(parts)]


class EpochBatches:
    """Length-bucketed batches of a fixed training set, epoch after epoch: step -> row indices.

    Epoch ``e`` is shuffled with ``(seed, e)``; the batches of one epoch are counted to find where the
    next begins, so any step maps to its batch without replaying the run. An epoch is held as arrays
    (``BucketedEpoch``: 8 bytes a row), so millions of rows cost megabytes, not Python lists.
    """

    def __init__(self, lengths: np.ndarray | list[int], cfg: TrainConfig) -> None:
        self.lengths, self.cfg = np.asarray(lengths, dtype=np.int64), cfg
        self._epoch: tuple[int, int, BucketedEpoch] | None = None  # (epoch, its first step, batches)

    def _make(self, epoch: int) -> BucketedEpoch:
        from scratchformer.data.batching import BucketedEpoch

        if self.cfg.max_tokens:
            return BucketedEpoch.make(self.lengths, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, epoch=epoch)
        return BucketedEpoch.make(self.lengths, self.cfg.batch_size, seed=self.cfg.seed, epoch=epoch)

    def __call__(self, step: int) -> np.ndarray:
        if self._epoch is None or step < self._epoch[1]:
            self._epoch = (0, 0, self._make(0))
        epoch, first, batches = self._epoch
        while step >= first + len(batches):
            epoch, first = epoch + 1, first + len(batches)
            batches = self._make(epoch)
        self._epoch = (epoch, first, batches)
        return batches[step - first]


class Task(ABC):
    """What the training loop and evaluation need from a task.

    A task is built from the run's settings, the model's config (``ModelConfig``, built once from the settings;
    the vocabulary and classes the task fills in: ``model_config``) and its data, ready (``data.load_data``):
    ``TaskData`` (its tokenizer and a view of a prepared corpus for each split), or for a task that makes its
    own data None. It builds the *global* batch of any step, computes the summed loss of a batch, evaluates,
    and says where each split came from.
    """

    tokenizer: Tokenizer | None
    extra_meta: dict[str, Any]

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: Any, log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None) -> None:
        self.cfg, self.log, self.data = cfg, log, data
        self.spec: TaskSpec = spec(cfg.task)
        self.settings_model = model  # the model the settings describe, before the data's fields
        self.max_len = model.max_len
        self.extra_meta = {}
        self.given_tokenizer = tokenizer  # a checkpoint's: used, never retrained
        self.tokenizer = data.tokenizer if isinstance(data, TaskData) else tokenizer

    @property
    def model_config(self) -> ModelConfig:
        """The model this task trains: the settings' model with the fields its data decides."""
        return dataclasses.replace(self.settings_model, **self.model_fields())

    def _tokenizer_for(self, texts: list[str]) -> Tokenizer:
        """Synthetic tasks: the given tokenizer, or a new one trained on ``texts``."""
        from scratchformer.tokenizers import BPETokenizer, CharTokenizer

        if self.given_tokenizer is not None:
            return self.given_tokenizer
        if self.cfg.tokenizer == "bpe":
            return BPETokenizer.train(texts, self.cfg.bpe_vocab_size, lowercase=self.cfg.lowercase)
        return CharTokenizer.train(texts)

    def _views(self, eval_limit: bool = True) -> dict[str, Any]:
        """Each split's view, with ``train_limit`` / ``eval_limit`` applied (a quick run on a slice)."""
        out = {}
        for split, view in self.data.views.items():
            limit = self.cfg.train_limit if split == "train" else (self.cfg.eval_limit if eval_limit else 0)
            out[split] = view.head(limit) if limit else view
        return out

    def training_module(self, model: nn.Module) -> nn.Module:
        """The module whose forward ``loss_sum`` calls while training (what DDP wraps): the model itself, or
        a view of it (masked-token pretraining trains the classifier's token predictions)."""
        return model

    def model_fields(self) -> dict[str, Any]:
        """Model config fields that follow from the data: the vocabulary (and a classifier's classes)."""
        assert self.tokenizer is not None
        return {"vocab_size": self.tokenizer.vocab_size, "pad_id": PAD_ID}

    # ---- where the data came from (the run's summary and config.json)
    def split_origins(self) -> list[tuple[str, str, str]]:
        """(split, where it came from, its size) for each split the task has."""
        unit = self.spec.data.unit if self.spec.data is not None else "examples"
        found = []
        for split in ("train", "val", "test"):
            if self.has_split(split):
                found.append((split, self.data.origin.get(split, split), f"{self.split_size(split):,} {unit}"))
        return found

    def data_notes(self) -> list[str]:
        """What was skipped or truncated while the data was read."""
        return self.data.notes if isinstance(self.data, TaskData) else []

    def prepared(self) -> list[Any]:
        """The prepared corpora the task reads (``data.prepared.Prepared``)."""
        return self.data.prepared if isinstance(self.data, TaskData) else []

    @abstractmethod
    def global_batch(self, step: int) -> Batch:
        """The whole batch of optimizer step ``step``: a pure function of (seed, step)."""

    @abstractmethod
    def count(self, batch: Batch) -> int:
        """How many loss terms (tokens or examples) the global batch has: the loss is divided by it."""

    def n_tokens(self, batch: Batch) -> int:
        """Input tokens in a batch (for the tokens/s figure)."""
        return self.count(batch)

    @abstractmethod
    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        """The *summed* loss of a batch (divided by the global ``count`` by the caller)."""

    @abstractmethod
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        """Metrics on a held-out split: ``loss`` and the task's own (perplexity, exact match, ...)."""

    @abstractmethod
    def split_size(self, split: str) -> int:
        """How many examples (or tokens, for language modelling) a split has."""

    def report(self, model: nn.Module, split: str, **decoding: Any) -> dict[str, Any]:
        """What ``scratchformer evaluate`` says of a split: how many examples, and the task's metrics."""
        return {"examples": self.split_size(split), **self.evaluate(model, split)}

    def samples(self, model: nn.Module) -> list[str]:
        """A few held-out examples with the model's output and the truth beside it."""
        return []

    def has_split(self, split: str) -> bool:
        return split == "val"

    def sample_split(self) -> str:
        """Where end-of-run samples come from: never the training data."""
        return "test" if self.has_split("test") else "val"

    # ---- shared helpers
    def _check_lengths(self, lengths: np.ndarray, limit: int, what: str) -> None:
        """Apply the stated policy to sequences longer than the model allows (they are cut when batched); say
        how many are empty (no tokens)."""
        empty = int((np.asarray(lengths) == 0).sum())
        if empty:
            self.log(f"warning: {empty:,} of {len(lengths):,} {what} sequences are empty (no tokens)")
        too_long = int((np.asarray(lengths) > limit).sum())
        if too_long:
            if self.cfg.truncate == "error":
                raise DataError(f"{too_long} {what} sequence(s) are longer than {limit} tokens (the model's max_len); "
                                "raise max_len or set truncate=warn")
            self.log(f"warning: truncated {too_long:,} of {len(lengths):,} {what} sequences to {limit} tokens "
                     "(the model's max_len; truncate=error refuses instead)")


def clip(text: str, limit: int = 60) -> str:
    """``repr`` of ``text``, shortened to about ``limit`` characters for a sample line."""
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return repr(text)
