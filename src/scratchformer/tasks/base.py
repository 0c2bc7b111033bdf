"""What every task shares: the ``Task`` interface the training loop calls, and step-indexed batching.

Every step's batch is a pure function of ``(seed, step)``: nothing about the data order has to be saved
in a checkpoint, and resuming a run replays exactly the same batches. A task reads its splits through the views
of its data (``data.task_data.TaskData``), a batch at a time, whatever holds them: prepared corpora on disk,
rows in memory, or the built-in tasks' fresh strings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from scratchformer.data.task_data import TaskData
from scratchformer.errors import DataError
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.experts import router_aux_loss
from scratchformer.registry import TaskSpec, spec
from scratchformer.settings.config import TrainConfig
from scratchformer.tokenizers import Tokenizer

Batch = dict[str, Tensor]


def step_generator(seed: int, step: int, salt: int = 0) -> torch.Generator:
    """A generator whose state depends only on (seed, step, salt)."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 7919 + salt)


def split_rows(batch: Batch, parts: int) -> list[Batch]:
    """Split a batch into ``parts`` contiguous row shards (some may be empty when rows < parts)."""
    keys = list(batch)
    chunks = [torch.tensor_split(batch[k], parts) for k in keys]
    return [{k: chunks[j][i] for j, k in enumerate(keys)} for i in range(parts)]


class Task(ABC):
    """What the training loop and evaluation need from a task.

    A task is built from the run's settings, its model (``ModelConfig``: the settings' model with the fields its
    data decides, its vocabulary and classes, filled in once: ``tasks.build.make_task``) and its data, ready
    (``data.load_data``): ``TaskData``, its tokenizer and a view of each split. It builds the *global* batch of
    any step, computes the summed loss of a batch, evaluates, and says where each split came from.
    """

    # eval_limit counts examples; a task that scores its held-out data otherwise (a text in windows) sets False
    limits_eval = True

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        self.cfg, self.log, self.data = cfg, log, data
        self.spec: TaskSpec = spec(cfg.task)
        self.model_config = model
        self.max_len = model.max_len
        self.tokenizer: Tokenizer | None = data.tokenizer
        self.extra_meta: dict[str, Any] = {} if data.labels is None else {"labels": list(data.labels)}
        self.views = self._views()

    def _views(self) -> dict[str, Any]:
        """Each split's view, with ``train_limit`` / ``eval_limit`` applied (a quick run on a slice)."""
        out = {}
        for split, view in self.data.views.items():
            limit = self.cfg.train_limit if split == "train" else (self.cfg.eval_limit if self.limits_eval else 0)
            out[split] = view.head(limit) if limit else view
        return out

    def training_module(self, model: nn.Module) -> nn.Module:
        """The module whose forward ``loss_sum`` calls while training (what DDP wraps): the model itself, or
        a view of it (masked-token pretraining trains the classifier's token predictions)."""
        return model

    def start(self, model: nn.Module, out: Path | None, writes: bool) -> None:
        """Called once by a training run before its first step, with the model it starts from, on its device (also
        when resuming: the saved weights are loaded later). What a task prepares from that model (a DPO run's
        reference log-probabilities). ``out``: the run's directory; ``writes``: this process writes the run's files
        (rank 0). Most tasks need nothing."""
        return None

    def train_metrics(self) -> dict[str, float]:
        """What the task measured on the training batches since the last call, beside the loss (a DPO run's rewards;
        a model with experts: its routers' load-balancing loss, ``router_aux``), for the run's train row."""
        seen, self._router_aux = getattr(self, "_router_aux", []), []
        return {"router_aux": float(torch.stack(seen).mean())} if seen else {}

    def router_loss(self, model: nn.Module, terms: int, mask: Tensor | None = None) -> Tensor | float:
        """Training a model with experts (``nn/experts.py``): ``router_aux_coef`` x its last forward pass's
        load-balancing loss, once per loss term of the summed loss (``terms``), as ``transformers`` adds it; 0 else."""
        aux = router_aux_loss(model, mask) if model.training else None
        if aux is None:
            return 0.0
        self._router_aux = [*getattr(self, "_router_aux", []), aux.detach()]
        return self.model_config.router_aux_coef * aux * terms

    # ---- where the data came from (the run's summary and config.json)
    def split_origins(self) -> list[tuple[str, str, str]]:
        """(split, where it came from, its size) for each split the task has."""
        origins = []
        for split in filter(self.has_split, ("train", "val", "test")):
            origins.append((split, self.data.origin.get(split, split), self.views[split].extent(self.spec.data.unit)))
        return origins

    def data_notes(self) -> list[str]:
        """What was skipped or truncated while the data was read."""
        return self.data.notes

    def prepared(self) -> list[Any]:
        """The prepared corpora the task reads (``data.task_data.Prepared``; none for data held in memory)."""
        return self.data.prepared

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

    def split_size(self, split: str) -> int:
        """How many examples (or tokens, for language modelling) a held-out split has."""
        return len(self.views[split])

    def report(self, model: nn.Module, split: str, **decoding: Any) -> dict[str, Any]:
        """What ``scratchformer evaluate`` says of a split: how many examples, and the task's metrics."""
        return {"examples": self.split_size(split), **self.evaluate(model, split)}

    def samples(self, model: nn.Module) -> list[str]:
        """A few held-out examples with the model's output and the truth beside it."""
        return []

    def has_split(self, split: str) -> bool:
        return split in self.views

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
