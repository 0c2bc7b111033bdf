"""Sequence to sequence: copy / reverse / sort (built-in, fresh data every step) and translation.

Teacher forcing: the decoder reads ``<bos> target`` and predicts ``target <eos>``. Evaluation reports
the loss and perplexity of the held-out pairs, and exact match (built-in tasks) or BLEU (translation) of
greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data import SyntheticTask, pad_batch, sorted_batches
from scratchformer.data.sources import Splits
from scratchformer.generation import greedy_translate
from scratchformer.metrics import bleu, exact_match, perplexity
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from scratchformer.train.config import TrainConfig
from scratchformer.train.tasks.base import Batch, EpochBatches, Task, clip

Pairs = list[tuple[list[int], list[int]]]
# Padded tokens per batch when held-out pairs are scored (EVAL_TOKENS) or greedily decoded (DECODE_TOKENS):
# sorted by length, many short ones or few long ones a batch.
EVAL_TOKENS = 4096  # the logits of a batch: EVAL_TOKENS x vocabulary floats (8,000 words: 131 MB)
DECODE_TOKENS = 2048


class Seq2SeqTask(Task):
    """Source ids -> ``<bos>`` target ids ``<eos>``."""

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], splits: Splits | None,
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model_kw, splits, log, tokenizer)
        self.synthetic: SyntheticTask | None = None
        self.splits: dict[str, Pairs] = {}
        self.texts: dict[str, list[tuple[str, str]]] = {}
        if splits is None:  # copy, reverse, sort
            self.synthetic = SyntheticTask(cfg.task, n_symbols=cfg.n_symbols, min_len=cfg.min_seq_len,
                                           max_len=cfg.max_seq_len, seed=cfg.seed, n_test=cfg.n_test)
            alphabet = sorted({c for s, t in self.synthetic.test_pairs()[:200] for c in s + t}
                              | set("abcdefghijklmnopqrstuvwxyz0123456789"[:cfg.n_symbols]))
            self.tokenizer = self._tokenizer_for(["".join(alphabet)])
            self.texts = {"val": self.synthetic.val_pairs(), "test": self.synthetic.test_pairs()}
            self.default_max_len = cfg.max_seq_len + 2
        else:
            self.texts = dict(splits.rows)
            train = self._limited("train", self.texts.get("train", []))
            self.tokenizer = self._tokenizer_for([s for s, _ in train] + [t for _, t in train])
            self.default_max_len = 128
        self.max_len = int(model_kw.get("max_len", self.default_max_len))
        self.texts = {split: self._limited(split, rows) for split, rows in self.texts.items()}
        for split, pairs in self.texts.items():
            self.splits[split] = self._encode(pairs, split)
        if "train" in self.splits:
            self.batches = EpochBatches([max(len(s), len(t) + 1) for s, t in self.splits["train"]], cfg)

    def _encode(self, pairs: list[tuple[str, str]], split: str) -> Pairs:
        src = self.tokenizer.encode_batch([s for s, _ in pairs], add_eos=True)
        tgt = self.tokenizer.encode_batch([t for _, t in pairs])
        src = self._check_lengths(src, self.max_len, f"{split} source")
        tgt = self._check_lengths(tgt, self.max_len - 1, f"{split} target")  # + <bos> or <eos>
        return list(zip(src, tgt))

    def model_fields(self) -> dict[str, Any]:
        return {**super().model_fields(), "max_len": self.default_max_len}

    def has_split(self, split: str) -> bool:
        return split in self.splits or (split == "train" and self.synthetic is not None)

    def split_size(self, split: str) -> int:
        return len(self.splits[split])

    @staticmethod
    def collate(pairs: Pairs) -> Batch:
        src, src_mask = pad_batch([s for s, _ in pairs], PAD_ID)
        tgt_in, _ = pad_batch([[BOS_ID] + t for _, t in pairs], PAD_ID)
        tgt_out, _ = pad_batch([t + [EOS_ID] for _, t in pairs], PAD_ID)
        return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out}

    def global_batch(self, step: int) -> Batch:
        if self.synthetic is not None:  # fresh sequences every step, never from the held-out sets
            pairs = self.synthetic.train_pairs(self.cfg.batch_size, seed=self.cfg.seed * 1_000_003 + step)
            return self.collate(self._encode(pairs, "train"))
        return self.collate([self.splits["train"][i] for i in self.batches(step)])

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
        length into batches of at most ``EVAL_TOKENS`` padded tokens."""
        pairs = self.splits[split]
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for idx in sorted_batches([max(len(s), len(t) + 1) for s, t in pairs], EVAL_TOKENS):
            batch = {k: v.to(device) for k, v in self.collate([pairs[i] for i in idx]).items()}
            total += self.loss_sum(model, batch, 0.0).item()
            count += self.count(batch)
        loss = total / max(count, 1)
        return {"loss": loss, "perplexity": perplexity(loss)}

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        pairs = self.splits[split]
        out = self.loss(model, split)
        n = len(pairs) if split == "test" else min(self.cfg.eval_decode, len(pairs))
        if n:
            hyps = self.translate_ids([s for s, _ in pairs[:n]], model)
            if self.synthetic is not None:
                out["exact_match"] = exact_match(hyps, [t for _, t in pairs[:n]])
            else:
                refs = [t for _, t in self.texts[split][:n]]
                out["bleu"], _ = bleu([self.tokenizer.decode(h) for h in hyps], refs)
        return out

    def translate_ids(self, sources: list[list[int]], model: nn.Module) -> list[list[int]]:
        """Greedy decoding of many sources, sorted by length into batches of at most ``DECODE_TOKENS``
        padded source tokens; results in input order."""
        device = next(model.parameters()).device
        results: list[list[int]] = [[] for _ in sources]
        for idx in sorted_batches([len(s) for s in sources], DECODE_TOKENS):
            src, mask = pad_batch([sources[j] for j in idx], PAD_ID)  # (B, S), (B, S) True = real token
            max_new = min(self.max_len, src.size(1) + 50)
            hyps = greedy_translate(model, src.to(device), mask.to(device), bos_id=BOS_ID, eos_id=EOS_ID,
                                    max_new_tokens=max_new)
            for i, h in zip(idx, hyps):
                results[i] = h
        return results

    def samples(self, model: nn.Module) -> list[str]:
        split = self.sample_split()
        pairs, texts = self.splits[split][:5], self.texts[split][:5]
        hyps = self.translate_ids([s for s, _ in pairs], model)
        lines = [f"{split} examples, greedy decoding (ok = the reference exactly):"]
        for (src_text, tgt_text), h in zip(texts, hyps):
            out = self.tokenizer.decode(h)
            same = out == tgt_text
            lines.append(f"{'ok ' if same else '   '} {clip(src_text, 40):>24} -> {clip(out)}"
                         + ("" if same else f"  (reference {clip(tgt_text)})"))
        return lines
