"""Classification of labelled text: an encoder, a pooled sentence vector, a linear head.

Inputs longer than ``max_len`` tokens follow the ``truncate`` policy. Evaluation reports the loss (mean
negative log-probability of the true class), accuracy and macro-F1. Many texts are classified in batches
of similar length (``class_probabilities``), which the ``classify`` command uses too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch, sorted_batches
from scratchformer.data.corpus.views import RowSet
from scratchformer.data.task_data import TaskData
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, clip, step_generator
from scratchformer.tasks.metrics import accuracy, macro_f1
from scratchformer.tokenizers import PAD_ID


def drop_tokens(ids: list[int], prob: float, keep: Collection[int], gen: torch.Generator) -> list[int]:
    """Word dropout (Iyyer et al. 2015, "Deep unordered composition"): remove each token with
    probability ``prob``, never one of ``keep`` (special tokens), and never all of the others."""
    coins = torch.rand(len(ids), generator=gen).tolist()
    out = [t for t, c in zip(ids, coins) if t in keep or c >= prob]
    return out if any(t not in keep for t in out) or all(t in keep for t in ids) else ids


def class_scores(probs: Tensor, labels: list[int], n_classes: int) -> dict[str, float]:
    """Loss (mean negative log-probability of the true class), accuracy and macro-F1 of class probabilities
    ``probs (N, n_classes)`` against ``labels``."""
    truth = probs[torch.arange(len(labels)), torch.tensor(labels, dtype=torch.long)]
    loss = float(-truth.clamp(min=1e-12).log().mean()) if labels else 0.0
    preds = probs.argmax(-1).tolist()
    return {"loss": loss, "accuracy": accuracy(preds, labels), "f1": macro_f1(preds, labels, n_classes)}


# Padded tokens per batch when classifying many texts (``class_probabilities``). Measured with MiniLM (d 384,
# 6 layers, 1 thread) on 1,000 SST-2 sentences: 2,048 took 18.0 s, 4,096 21.2 s, 8,192 26.3 s (larger batches
# fall out of the CPU's caches; RESULTS.md, "Inference over a file").
CLASSIFY_TOKENS = 2048
# Rows of a split read from its corpus at a time when evaluating (each chunk sorted and batched as above):
# memory stays bounded whatever the split's size.
EVAL_CHUNK = 8192


@torch.no_grad()
def class_probabilities(model: nn.Module, rows: list[list[int]], n_classes: int, max_tokens: int = CLASSIFY_TOKENS,
                        progress: Callable[[int], object] | None = None) -> Tensor:
    """Class probabilities ``(N, n_classes)`` of token-id rows, in the rows' order.

    The rows are sorted by length and run in batches of at most ``max_tokens`` padded tokens
    (``data.batching.sorted_batches``): many short rows or few long ones, next to no padding. Each batch's
    probabilities go back to its rows' places. ``progress(n)``: told after each batch of n rows.
    """
    device = next(model.parameters()).device
    out = torch.zeros(len(rows), n_classes)
    for idx in sorted_batches([len(r) for r in rows], max_tokens):
        ids, mask = pad_batch([rows[i] for i in idx], model.config.pad_id)  # (B, T), (B, T) True = real token
        out[idx] = model(ids.to(device), mask.to(device)).float().softmax(-1).cpu()  # (B, n_classes)
        if progress is not None:
            progress(len(idx))
    return out


class ClassifyTask(Task):
    """Labelled text -> class."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        assert data.labels is not None
        self.labels = list(data.labels)
        self.rows: dict[str, RowSet] = self.views
        self.label_ids = {split: data.label_ids[split][:len(rows)] for split, rows in self.rows.items()}
        for split, rows in self.rows.items():
            self._check_lengths(rows.lengths("text"), self.max_len, split)
        if "train" in self.rows:
            train = self.rows["train"]
            self.batches = train.batches(np.clip(train.lengths("text"), 1, self.max_len), cfg)

    def examples(self, split: str, positions: Sequence[int] | np.ndarray) -> list[tuple[list[int], int]]:
        """(token ids cut to max_len, label id) of the rows at ``positions`` of a split; an empty text is one
        ``<pad>`` (a row of nothing cannot be pooled)."""
        ids = self.rows[split].ids("text", positions)
        labels = self.label_ids[split][np.asarray(positions, dtype=np.int64)].tolist()
        return [(row[:self.max_len] or [self.tokenizer.pad_id], y) for row, y in zip(ids, labels)]

    def truth(self, split: str) -> list[int]:
        """The label id of every example of a split, in order."""
        return self.label_ids[split].tolist()

    @staticmethod
    def collate(rows: list[tuple[list[int], int]]) -> Batch:
        ids, mask = pad_batch([r for r, _ in rows], PAD_ID)  # any filler id: the mask says what is padding
        return {"ids": ids, "mask": mask, "labels": torch.tensor([y for _, y in rows])}

    def global_batch(self, step: int) -> Batch:
        rows = self.examples("train", self.batches(step))
        if self.cfg.word_dropout:
            gen = step_generator(self.cfg.seed, step, salt=23)
            keep = self.tokenizer.special_ids
            rows = [(drop_tokens(ids, self.cfg.word_dropout, keep, gen), y) for ids, y in rows]
        return self.collate(rows)

    def count(self, batch: Batch) -> int:
        return batch["labels"].numel()

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["mask"].sum())

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["ids"], batch["mask"])
        return F.cross_entropy(logits.float(), batch["labels"], label_smoothing=label_smoothing, reduction="sum")

    def probabilities(self, model: nn.Module, split: str) -> Tensor:
        """The model's class probabilities ``(N, n_classes)`` for the examples of ``split``, in order: read
        ``EVAL_CHUNK`` rows at a time, each chunk in sorted token-budget batches (``class_probabilities``)."""
        n, step = len(self.rows[split]), EVAL_CHUNK
        out = [class_probabilities(model, [ids for ids, _ in self.examples(split, np.arange(i, min(n, i + step)))],
                                   len(self.labels)) for i in range(0, n, step)]
        return torch.cat(out) if out else torch.zeros(0, len(self.labels))

    def score(self, probs: Tensor, split: str) -> dict[str, float]:
        """Loss (mean negative log-probability of the true class), accuracy and macro-F1 of ``probs``."""
        return class_scores(probs, self.truth(split), len(self.labels))

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        return self.score(self.probabilities(model, split), split)

    @torch.no_grad()
    def samples(self, model: nn.Module) -> list[str]:
        split = self.sample_split()
        first = np.arange(min(8, len(self.rows[split])))
        texts, truths = self.rows[split].texts("text", first), self.truth(split)[:8]
        device = next(model.parameters()).device
        batch = self.collate(self.examples(split, first)) if len(first) else None
        probs = model(batch["ids"].to(device), batch["mask"].to(device)).float().softmax(-1).cpu() if batch else []
        lines = [f"{split} examples: predicted label, its probability, the true label"]
        for p, text, truth in zip(probs, texts, truths):
            guess = int(p.argmax())
            mark = "ok " if guess == truth else "   "
            lines.append(f"{mark} {self.labels[guess]:>10} {p.max().item():.2f}  (true: {self.labels[truth]})  "
                         f"{clip(text, 70)}")
        return lines
