"""What every task shares: the ``Task`` interface the training loop calls, and step-indexed batching.

Every step's batch is a pure function of ``(seed, step)``: nothing about the data order has to be saved
in a checkpoint, and resuming a run replays exactly the same batches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.data import bucket_batches
from scratchformer.data.errors import DataError
from scratchformer.data.sources import Splits
from scratchformer.tokenizers import PAD_ID, BPETokenizer, CharTokenizer, Tokenizer
from scratchformer.train.config import TrainConfig

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
    next begins, so any step maps to its batch without replaying the run.
    """

    def __init__(self, lengths: list[int], cfg: TrainConfig) -> None:
        self.lengths, self.cfg = lengths, cfg
        self._epoch: tuple[int, int, list[list[int]]] | None = None  # (epoch, its first step, batches)

    def _make(self, epoch: int) -> list[list[int]]:
        if self.cfg.max_tokens:
            return bucket_batches(self.lengths, max_tokens=self.cfg.max_tokens, seed=self.cfg.seed, epoch=epoch)
        return bucket_batches(self.lengths, self.cfg.batch_size, seed=self.cfg.seed, epoch=epoch)

    def __call__(self, step: int) -> list[int]:
        if self._epoch is None or step < self._epoch[1]:
            self._epoch = (0, 0, self._make(0))
        epoch, first, batches = self._epoch
        while step >= first + len(batches):
            epoch, first = epoch + 1, first + len(batches)
            batches = self._make(epoch)
        self._epoch = (epoch, first, batches)
        return batches[step - first]


class Task(ABC):
    """What the training loop needs from a task.

    A task is built from ``Splits`` (the raw examples of each split, see ``data.sources``): it trains or
    takes a tokenizer, encodes the examples, says which model fields follow from the data (vocabulary
    size, number of classes), builds the *global* batch of any step, computes the summed loss of a batch,
    and evaluates.
    """

    tokenizer: Tokenizer
    extra_meta: dict[str, Any]

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], splits: Splits | None,
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        self.cfg, self.model_kw, self.log = cfg, model_kw, log
        self.raw = splits
        self.extra_meta = {}
        self.given_tokenizer = tokenizer  # from a checkpoint: use it, never retrain

    def _tokenizer_for(self, texts: list[str], *, with_mask: bool = False) -> Tokenizer:
        """The given tokenizer, or a new one trained on the training texts (with ``<mask>``, if asked)."""
        if self.given_tokenizer is not None:
            return self.given_tokenizer
        if not texts:
            raise DataError("no training data: give --data FILE (a validation or test file alone cannot train)")
        if self.cfg.tokenizer == "bpe":
            return BPETokenizer.train(texts, self.cfg.bpe_vocab_size, lowercase=self.cfg.lowercase,
                                      with_mask=with_mask)
        return CharTokenizer.train(texts, with_mask=with_mask)

    def _limited(self, split: str, rows: list[Any]) -> list[Any]:
        """``train_limit`` / ``eval_limit`` applied to a split's rows (a quick run on a slice of the data)."""
        limit = self.cfg.train_limit if split == "train" else self.cfg.eval_limit
        return rows[:limit] if limit else rows

    def training_module(self, model: nn.Module) -> nn.Module:
        """The module whose forward ``loss_sum`` calls while training (what DDP wraps): the model itself, or
        a view of it (masked-token pretraining trains the classifier's token predictions)."""
        return model

    def model_fields(self) -> dict[str, Any]:
        """Model config fields that follow from the data (and defaults for this task)."""
        return {"vocab_size": self.tokenizer.vocab_size, "pad_id": PAD_ID}

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

    def samples(self, model: nn.Module) -> list[str]:
        """A few held-out examples with the model's output and the truth beside it."""
        return []

    def has_split(self, split: str) -> bool:
        return split == "val"

    def sample_split(self) -> str:
        """Where end-of-run samples come from: never the training data."""
        return "test" if self.has_split("test") else "val"

    # ---- shared helpers
    def _check_lengths(self, seqs: list[list[int]], limit: int, what: str) -> list[list[int]]:
        """Apply the stated policy to sequences longer than the model allows."""
        too_long = sum(len(s) > limit for s in seqs)
        if too_long:
            if self.cfg.truncate == "error":
                raise DataError(f"{too_long} {what} sequence(s) are longer than {limit} tokens (the model's max_len); "
                                "raise max_len or set truncate=warn")
            self.log(f"warning: truncated {too_long} of {len(seqs)} {what} sequences to {limit} tokens "
                     "(the model's max_len; truncate=error refuses instead)")
            seqs = [s[:limit] for s in seqs]
        return seqs


def clip(text: str, limit: int = 60) -> str:
    """``repr`` of ``text``, shortened to about ``limit`` characters for a sample line."""
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return repr(text)
