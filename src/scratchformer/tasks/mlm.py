"""Masked-token prediction (BERT's pretraining objective, Devlin et al. 2019, §3.1) on texts.

An encoder is pretrained to predict chosen tokens from their context; a classifier is then fine-tuned
from its run (``task=classify init_from=RUN_DIR``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch
from scratchformer.data.corpus.views import RowSet
from scratchformer.data.task_data import TaskData
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, step_generator
from scratchformer.tasks.metrics import perplexity
from scratchformer.tokenizers import MASK_ID


def mask_tokens(ids: Tensor, real: Tensor, prob: float, vocab_size: int, gen: torch.Generator, *,
                mask_id: int = MASK_ID, n_special: int = MASK_ID + 1) -> tuple[Tensor, Tensor]:
    """BERT's corruption: choose each real token with probability ``prob``; of the chosen, 80 % become
    ``mask_id`` (the tokenizer's ``<mask>``), 10 % a random ordinary token (an id from ``n_special`` on),
    10 % stay. Returns (inputs, chosen), both ``(B, T)``; at least one token is chosen, so a batch always
    has something to predict."""
    chosen = (torch.rand(ids.shape, generator=gen) < prob) & real
    if not chosen.any():
        chosen[0, 0] = bool(real[0, 0])
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[chosen & (r < 0.8)] = mask_id
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(n_special, vocab_size, (int(swap.sum()),), generator=gen)
    return inputs, chosen


class TokenPredictor(nn.Module):
    """A classifier seen as a masked-token predictor: ``forward(ids, mask, chosen) -> (N, V)`` logits.

    What masked-token training calls (and DDP wraps); it holds the classifier, so both share their weights."""

    def __init__(self, classifier: nn.Module) -> None:
        super().__init__()
        self.classifier = classifier

    def forward(self, ids: Tensor, mask: Tensor, chosen: Tensor) -> Tensor:
        return self.classifier.predict_tokens(ids, mask, chosen)


class MaskedLMTask(Task):
    """Masked-token prediction on texts (one example a line, or the text column of labelled data).

    The model is an ``EncoderClassifier``; ``model.predict_tokens(inputs, mask, chosen)`` returns the
    logits over the vocabulary at the chosen positions, through the (tied) token embedding matrix, so
    pretraining adds no parameters and the classifier head is left as it was. The validation masks are
    drawn once with a fixed seed, so the validation loss of every evaluation is comparable.
    """

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        self.mask_id = self.tokenizer.mask_id
        self.rows: dict[str, RowSet] = self.views
        for split, rows in self.rows.items():
            self._check_lengths(rows.lengths("text"), self.max_len, split)
        if "train" in self.rows:
            train = self.rows["train"]
            self.batches = train.batches(np.clip(train.lengths("text"), 1, self.max_len), cfg)

    def examples(self, split: str, positions: np.ndarray | list[int]) -> list[list[int]]:
        """Token ids of the texts at ``positions`` of a split, cut to max_len (an empty text: one ``<pad>``)."""
        return [ids[:self.max_len] or [self.tokenizer.pad_id] for ids in self.rows[split].ids("text", positions)]

    def training_module(self, model: nn.Module) -> nn.Module:
        return TokenPredictor(model)

    def _masked(self, rows: list[list[int]], gen: torch.Generator) -> Batch:
        ids, real = pad_batch(rows, self.tokenizer.pad_id)
        inputs, chosen = mask_tokens(ids, real.bool(), self.cfg.mask_prob, self.tokenizer.vocab_size, gen,
                                     mask_id=self.mask_id, n_special=len(self.tokenizer.special_ids))
        return {"ids": inputs, "mask": real, "targets": ids, "chosen": chosen}

    def global_batch(self, step: int) -> Batch:
        rows = self.examples("train", self.batches(step))
        return self._masked(rows, step_generator(self.cfg.seed, step, salt=17))

    def count(self, batch: Batch) -> int:
        return int(batch["chosen"].sum())

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["mask"].sum())

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["ids"], batch["mask"], batch["chosen"])  # a TokenPredictor: (chosen tokens, V)
        return F.cross_entropy(logits.float(), batch["targets"][batch["chosen"]], label_smoothing=label_smoothing,
                               reduction="sum")

    def _val_batches(self, split: str) -> Iterator[Batch]:
        gen = torch.Generator().manual_seed(1234)  # the same masks at every evaluation
        n = len(self.rows[split])
        for i in range(0, n, 256):
            yield self._masked(self.examples(split, np.arange(i, min(n, i + 256))), gen)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        device = next(model.parameters()).device
        total, right, count = 0.0, 0, 0
        for batch in self._val_batches(split):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model.predict_tokens(batch["ids"], batch["mask"], batch["chosen"]).float()
            targets = batch["targets"][batch["chosen"]]
            total += F.cross_entropy(logits, targets, reduction="sum").item()
            right += int((logits.argmax(-1) == targets).sum())
            count += targets.numel()
        loss = total / max(1, count)
        return {"loss": loss, "perplexity": perplexity(loss), "accuracy": right / max(1, count)}

    @torch.no_grad()
    def samples(self, model: nn.Module) -> list[str]:
        """A few held-out texts with their masked tokens, each as ``[true -> predicted]``."""
        split = self.sample_split()
        device = next(model.parameters()).device
        batch = self._masked(self.examples(split, np.arange(min(5, len(self.rows[split])))),
                             torch.Generator().manual_seed(99))
        predicted = model.predict_tokens(batch["ids"].to(device), batch["mask"].to(device),
                                         batch["chosen"].to(device)).argmax(-1).tolist()
        lines, k = [f"{split} texts, each masked token as [true -> predicted]:"], 0
        piece = self.tokenizer.decode
        for row in range(batch["ids"].size(0)):
            text = ""
            for t in range(int(batch["mask"][row].sum())):
                true = int(batch["targets"][row, t])
                if batch["chosen"][row, t]:
                    text += f"[{piece([true])!r} -> {piece([predicted[k]])!r}]"
                    k += 1
                else:
                    text += piece([true])
            lines.append(text)
        return lines
