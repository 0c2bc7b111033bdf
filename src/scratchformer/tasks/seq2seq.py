"""Sequence to sequence: copy / reverse / sort (built-in, fresh data every step) and translation.

Teacher forcing: the decoder reads ``<bos> target`` and predicts ``target <eos>``. Evaluation reports
the loss and perplexity of the held-out pairs, and exact match (built-in tasks) or BLEU (translation) of
greedy decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data import SyntheticTask, pad_batch, sorted_batches
from scratchformer.data.corpus.views import RowSet
from scratchformer.data.task_data import TaskData
from scratchformer.generation.batched import translate_ids
from scratchformer.metrics import bleu, chrf, exact_match, perplexity
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, EpochBatches, Task, clip
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID, Tokenizer

Pairs = list[tuple[list[int], list[int]]]
# Padded tokens per batch when held-out pairs are scored (EVAL_TOKENS) or greedily decoded (DECODE_TOKENS):
# sorted by length, many short ones or few long ones a batch.
EVAL_TOKENS = 4096  # the logits of a batch: EVAL_TOKENS x vocabulary floats (8,000 words: 131 MB)
DECODE_TOKENS = 2048


class _ListRows:
    """The built-in tasks' held-out pairs, generated and held in memory, read like a ``RowSet``."""

    def __init__(self, fields: dict[str, list[Any]]) -> None:
        self.fields = fields

    def __len__(self) -> int:
        return len(self.fields["source"])

    def head(self, n: int) -> _ListRows:
        return _ListRows({name: values[:n] for name, values in self.fields.items()})

    def lengths(self, field: str) -> np.ndarray:
        return np.array([len(ids) for ids in self.fields[field]], dtype=np.int64)

    def ids(self, field: str, positions: Any) -> list[list[int]]:
        return [self.fields[field][i] for i in positions]

    def texts(self, field: str, positions: Any) -> list[str]:
        return [self.fields[f"{field}.text"][i] for i in positions]


class Seq2SeqTask(Task):
    """Source ids -> ``<bos>`` target ids ``<eos>``."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData | None, log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model, data, log, tokenizer)
        self.synthetic: SyntheticTask | None = None
        self.rows: dict[str, RowSet | _ListRows]
        if data is None:  # copy, reverse, sort
            self.synthetic = SyntheticTask(cfg.task, n_symbols=cfg.n_symbols, min_len=cfg.min_seq_len,
                                           max_len=cfg.max_seq_len, seed=cfg.seed, n_test=cfg.n_test)
            alphabet = sorted({c for s, t in self.synthetic.test_pairs()[:200] for c in s + t}
                              | set("abcdefghijklmnopqrstuvwxyz0123456789"[:cfg.n_symbols]))
            self.tokenizer = self._tokenizer_for(["".join(alphabet)])
            held_out = {"val": self.synthetic.val_pairs(), "test": self.synthetic.test_pairs()}
            limit = cfg.eval_limit or None
            self.rows = {split: self._in_memory(pairs[:limit], split) for split, pairs in held_out.items()}
            return
        self.rows = self._views()
        for split, rows in self.rows.items():
            self._check_lengths(rows.lengths("source"), self.max_len, f"{split} source")
            self._check_lengths(rows.lengths("target"), self.max_len - 1, f"{split} target")  # + <bos> or <eos>
        if "train" in self.rows:
            train = self.rows["train"]
            src = np.minimum(train.lengths("source"), self.max_len)
            tgt = np.minimum(train.lengths("target"), self.max_len - 1) + 1
            self.batches = EpochBatches(np.maximum(src, tgt), cfg)

    def _encode(self, pairs: list[tuple[str, str]], split: str) -> Pairs:
        src = self.tokenizer.encode_batch([s for s, _ in pairs], add_eos=True)
        tgt = self.tokenizer.encode_batch([t for _, t in pairs])
        self._check_lengths(np.array([len(s) for s in src]), self.max_len, f"{split} source")
        self._check_lengths(np.array([len(t) for t in tgt]), self.max_len - 1, f"{split} target")
        return [(s[:self.max_len], t[:self.max_len - 1]) for s, t in zip(src, tgt)]

    def _in_memory(self, pairs: list[tuple[str, str]], split: str) -> _ListRows:
        encoded = self._encode(pairs, split)
        return _ListRows({"source": [s for s, _ in encoded], "target": [t for _, t in encoded],
                          "source.text": [s for s, _ in pairs], "target.text": [t for _, t in pairs]})

    def pairs(self, split: str, positions: Any) -> Pairs:
        """(source ids, target ids) of the pairs at ``positions`` of a split, cut to what the model takes."""
        rows = self.rows[split]
        return [(s[:self.max_len], t[:self.max_len - 1])
                for s, t in zip(rows.ids("source", positions), rows.ids("target", positions))]

    def source_ids(self, split: str) -> list[list[int]]:
        """The source ids of every pair of a split (what evaluation translates)."""
        return [s for s, _ in self.pairs(split, range(len(self.rows[split])))]

    def texts(self, split: str, n: int | None = None) -> list[tuple[str, str]]:
        """The (source, target) texts of the first ``n`` pairs of a split (all by default), as in the file."""
        positions = range(len(self.rows[split]) if n is None else min(n, len(self.rows[split])))
        rows = self.rows[split]
        return list(zip(rows.texts("source", positions), rows.texts("target", positions)))

    def references(self, split: str, n: int | None = None) -> list[str]:
        """The target texts of the first ``n`` pairs of a split (all by default), as in the file."""
        return self.rows[split].texts("target", range(len(self.rows[split]) if n is None else n))

    def has_split(self, split: str) -> bool:
        return split in self.rows or (split == "train" and self.synthetic is not None)

    def split_origins(self) -> list[tuple[str, str, str]]:
        if self.synthetic is None:
            return super().split_origins()
        n = self.cfg.n_test
        return [("train", "fresh random strings at every step (never a held-out one)", "unlimited"),
                ("val", f"{n:,} held-out strings", f"{n:,} examples"),
                ("test", f"{n:,} other held-out strings", f"{n:,} examples")]

    def split_size(self, split: str) -> int:
        return len(self.rows[split])

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
        rows = self.rows[split]
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
        size = len(self.rows[split])
        out = self.loss(model, split)
        n = size if split == "test" else min(self.cfg.eval_decode, size)
        if n:
            pairs = self.pairs(split, range(n))
            hyps = self.translate_ids([s for s, _ in pairs], model)
            if self.synthetic is not None:
                out["exact_match"] = exact_match(hyps, [t for _, t in pairs])
            else:
                out["bleu"], _ = bleu([self.tokenizer.decode(h) for h in hyps], self.references(split, n))
        return out

    def translate_ids(self, sources: list[list[int]], model: nn.Module) -> list[list[int]]:
        """Greedy decoding of many sources, in token-budget batches (``generation.translate_ids``)."""
        return translate_ids(model, sources, beam=1, max_tokens=DECODE_TOKENS)

    def report(self, model: nn.Module, split: str, *, beam: int = 4, length_penalty: float = 0.6,
               progress: Any = None) -> dict[str, Any]:
        """Translation: the loss, and sacreBLEU BLEU and chrF (with their signatures) of beam search and greedy
        decoding of every sentence of ``split``; the built-in tasks: their metrics."""
        if self.synthetic is not None:
            return super().report(model, split)
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

    def samples(self, model: nn.Module) -> list[str]:
        split = self.sample_split()
        first = range(min(5, len(self.rows[split])))
        pairs, rows = self.pairs(split, first), self.rows[split]
        hyps = self.translate_ids([s for s, _ in pairs], model)
        lines = [f"{split} examples, greedy decoding (ok = the reference exactly):"]
        for src_text, tgt_text, h in zip(rows.texts("source", first), rows.texts("target", first), hyps):
            out = self.tokenizer.decode(h)
            same = out == tgt_text
            lines.append(f"{'ok ' if same else '   '} {clip(src_text, 40):>24} -> {clip(out)}"
                         + ("" if same else f"  (reference {clip(tgt_text)})"))
        return lines
