"""Sequence to sequence: copy / reverse / sort (built-in, fresh data every step) and translation.

Teacher forcing: the decoder reads ``<bos> target`` and predicts ``target <eos>``. Evaluation reports
the loss and perplexity of the held-out pairs, and exact match (``Seq2SeqTask``: the built-in tasks) or BLEU
(``TranslationTask``) of greedy decoding. Both read their pairs as rows, whatever holds them (a prepared
corpus, rows in memory, or fresh strings drawn for every step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch, sorted_batches
from scratchformer.data.task_data import TaskData
from scratchformer.generation.batched import translate_ids
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, clip
from scratchformer.tasks.metrics import bleu, chrf, exact_match, perplexity
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID

Pairs = list[tuple[list[int], list[int]]]
# Padded tokens per batch when held-out pairs are scored (EVAL_TOKENS) or greedily decoded (DECODE_TOKENS):
# sorted by length, many short ones or few long ones a batch.
EVAL_TOKENS = 4096  # the logits of a batch: EVAL_TOKENS x vocabulary floats (8,000 words: 131 MB)
DECODE_TOKENS = 2048


class Seq2SeqTask(Task):
    """Source ids -> ``<bos>`` target ids ``<eos>``; evaluation: the loss and the exact match of greedy decoding."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        for split, rows in self.views.items():
            self._check_lengths(rows.lengths("source"), self.max_len, f"{split} source")
            self._check_lengths(rows.lengths("target"), self.max_len - 1, f"{split} target")  # + <bos> or <eos>
        if "train" in self.views:
            train = self.views["train"]
            src = np.minimum(train.lengths("source"), self.max_len)
            tgt = np.minimum(train.lengths("target"), self.max_len - 1) + 1
            self.batches = train.batches(np.maximum(src, tgt), cfg)

    def pairs(self, split: str, positions: Any) -> Pairs:
        """(source ids, target ids) of the pairs at ``positions`` of a split, cut to what the model takes."""
        rows = self.views[split]
        return [(s[:self.max_len], t[:self.max_len - 1])
                for s, t in zip(rows.ids("source", positions), rows.ids("target", positions))]

    def source_ids(self, split: str) -> list[list[int]]:
        """The source ids of every pair of a split (what evaluation translates)."""
        return [s for s, _ in self.pairs(split, range(len(self.views[split])))]

    def texts(self, split: str, n: int | None = None) -> list[tuple[str, str]]:
        """The (source, target) texts of the first ``n`` pairs of a split (all by default), as in the file."""
        positions = range(len(self.views[split]) if n is None else min(n, len(self.views[split])))
        rows = self.views[split]
        return list(zip(rows.texts("source", positions), rows.texts("target", positions)))

    def references(self, split: str, n: int | None = None) -> list[str]:
        """The target texts of the first ``n`` pairs of a split (all by default), as in the file."""
        return self.views[split].texts("target", range(len(self.views[split]) if n is None else n))

    @staticmethod
    def collate(pairs: Pairs) -> Batch:
        src, src_mask = pad_batch([s for s, _ in pairs], PAD_ID)
        tgt_in, _ = pad_batch([[BOS_ID] + t for _, t in pairs], PAD_ID)
        tgt_out, _ = pad_batch([t + [EOS_ID] for _, t in pairs], PAD_ID)
        return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out}

    def global_batch(self, step: int) -> Batch:
        return self.collate(self.pairs("train", self.batches(step)))

    def count(self, batch: Batch) -> int:
        return int((batch["tgt_out"] != PAD_ID).sum())

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["src_mask"].sum()) + self.count(batch)

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["src"], batch["tgt_in"], batch["src_mask"])
        return F.cross_entropy(logits.float().flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=PAD_ID,
                               label_smoothing=label_smoothing, reduction="sum")

    @torch.no_grad()
    def loss(self, model: nn.Module, split: str) -> dict[str, float]:
        """The teacher-forced loss (mean over target tokens) and perplexity of ``split``, its pairs sorted by
        length into batches of at most ``EVAL_TOKENS`` padded tokens, each batch read when it is run."""
        rows = self.views[split]
        src = np.minimum(rows.lengths("source"), self.max_len)
        tgt = np.minimum(rows.lengths("target"), self.max_len - 1) + 1  # + <bos> or <eos>
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for idx in sorted_batches(np.maximum(src, tgt), EVAL_TOKENS):
            batch = {k: v.to(device) for k, v in self.collate(self.pairs(split, idx)).items()}
            total += self.loss_sum(model, batch, 0.0).item()
            count += self.count(batch)
        loss = total / max(count, 1)
        return {"loss": loss, "perplexity": perplexity(loss)}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        size = len(self.views[split])
        out = self.loss(model, split)
        n = size if split == "test" else min(self.cfg.eval_decode, size)
        if n:
            pairs = self.pairs(split, range(n))
            out.update(self.decoded_metrics(split, self.translate_ids([s for s, _ in pairs], model), pairs))
        return out

    def decoded_metrics(self, split: str, hyps: list[list[int]], pairs: Pairs) -> dict[str, float]:
        """What greedy decoding of the first pairs of a split scores: the share of outputs that are exactly the
        target (``eval_decode`` pairs at an evaluation, every pair of the test split)."""
        return {"exact_match": exact_match(hyps, [t for _, t in pairs])}

    def translate_ids(self, sources: list[list[int]], model: nn.Module) -> list[list[int]]:
        """Greedy decoding of many sources, in token-budget batches (``generation.translate_ids``)."""
        return translate_ids(model, sources, beam=1, max_tokens=DECODE_TOKENS)

    def samples(self, model: nn.Module) -> list[str]:
        split = self.sample_split()
        first = range(min(5, len(self.views[split])))
        pairs, rows = self.pairs(split, first), self.views[split]
        hyps = self.translate_ids([s for s, _ in pairs], model)
        lines = [f"{split} examples, greedy decoding (ok = the reference exactly):"]
        for src_text, tgt_text, h in zip(rows.texts("source", first), rows.texts("target", first), hyps):
            out = self.tokenizer.decode(h)
            same = out == tgt_text
            lines.append(f"{'ok ' if same else '   '} {clip(src_text, 40):>24} -> {clip(out)}"
                         + ("" if same else f"  (reference {clip(tgt_text)})"))
        return lines


class TranslationTask(Seq2SeqTask):
    """Sentence pairs: evaluation decodes with BLEU against the reference texts, as in the files; ``report`` (the
    ``evaluate`` command) gives beam search and greedy decoding, BLEU and chrF."""

    def decoded_metrics(self, split: str, hyps: list[list[int]], pairs: Pairs) -> dict[str, float]:
        """sacreBLEU's BLEU of the decoded outputs against the reference texts."""
        score, _ = bleu([self.tokenizer.decode(h) for h in hyps], self.references(split, len(pairs)))
        return {"bleu": score}

    def report(self, model: nn.Module, split: str, *, beam: int = 4, length_penalty: float = 0.6,
               progress: Any = None) -> dict[str, Any]:
        """The loss, and sacreBLEU BLEU and chrF (with their signatures) of beam search and greedy decoding of
        every sentence of ``split``."""
        sources, refs = self.source_ids(split), self.references(split)
        result: dict[str, Any] = {"examples": len(sources), **self.loss(model, split)}
        for name, k in (("beam", beam), ("greedy", 1)):
            bar = progress(len(sources), f"{name} decoding") if progress else None  # e.g. a tqdm bar
            ids = translate_ids(model, sources, beam=k, length_penalty=length_penalty,
                                progress=bar.update if bar is not None else None)
            if bar is not None:
                bar.close()
            hyps = [self.tokenizer.decode(h) for h in ids]
            (b, b_sig), (c, c_sig) = bleu(hyps, refs), chrf(hyps, refs)
            result[name] = {"beam_size": k, "bleu": round(b, 2), "chrf": round(c, 2)}
            if k > 1:
                result[name]["length_penalty"] = length_penalty
        result["bleu_signature"], result["chrf_signature"] = b_sig, c_sig
        result["bleu"], result["chrf"] = result["beam"]["bleu"], result["beam"]["chrf"]
        return result
