"""Tasks: what the training loop needs to know about each kind of data.

A task prepares the tokenizer and the data, says which model fields follow from the data (vocabulary
size, number of classes), builds the *global* batch of any step, computes the summed loss of a batch,
and evaluates. Every step's batch is a pure function of ``(seed, step)``: nothing about the data order
has to be saved in a checkpoint, and resuming a run replays exactly the same batches.

- ``Seq2SeqTask``: copy / reverse / sort (built-in, infinite fresh data) and translation.
- ``LMTask``: language modelling on a text (random windows of ``max_len`` tokens, as nanoGPT).
- ``ClassifyTask``: labelled text.
- ``MaskedLMTask``: masked-token prediction (BERT's pretraining objective) on text, to pretrain an encoder
  that a classifier is then fine-tuned from (``init_from=RUN_DIR``).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ModelConfig, TrainConfig
from ..data import (
    LMDataset,
    SyntheticTask,
    bucket_batches,
    lm_splits,
    load_multi30k,
    load_sst2,
    load_tinyshakespeare,
    pad_batch,
    read_labelled,
    read_parallel,
    read_text,
)
from ..data.errors import DataError
from ..generation import generate, greedy_translate
from ..metrics import accuracy, bleu, exact_match, macro_f1, perplexity
from ..tokenizers import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, BPETokenizer, CharTokenizer, Tokenizer

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
    """What the training loop needs from a task (see the module docstring)."""

    tokenizer: Tokenizer
    extra_meta: dict[str, Any]

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], log: Callable[[str], None],
                 tokenizer: Tokenizer | None = None) -> None:
        self.cfg, self.model_kw, self.log = cfg, model_kw, log
        self.extra_meta = {}
        self.given_tokenizer = tokenizer  # from a checkpoint: use it, never retrain

    def _tokenizer_for(self, texts: list[str]) -> Tokenizer:
        """The given tokenizer, or a new one trained on the training texts."""
        if self.given_tokenizer is not None:
            return self.given_tokenizer
        if self.cfg.tokenizer == "bpe":
            return BPETokenizer.train(texts, self.cfg.bpe_vocab_size, lowercase=self.cfg.lowercase)
        return CharTokenizer.train(texts)

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

    def samples(self, model: nn.Module) -> list[str]:
        return []

    def has_split(self, split: str) -> bool:
        return split == "val"

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


# ====================================================================================== seq2seq


class Seq2SeqTask(Task):
    """Sequence to sequence: source ids -> ``<bos>`` target ids ``<eos>`` (teacher forcing)."""

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], data_paths: list[str],
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model_kw, log, tokenizer)
        self.synthetic: SyntheticTask | None = None
        self.splits: dict[str, list[tuple[list[int], list[int]]]] = {}
        self.texts: dict[str, list[tuple[str, str]]] = {}
        if cfg.task in ("copy", "reverse", "sort"):
            if data_paths:
                raise DataError(f"the built-in task {cfg.task!r} makes its own data; --data needs "
                                "task=lm, translate or classify")
            self.synthetic = SyntheticTask(cfg.task, n_symbols=cfg.n_symbols, min_len=cfg.min_seq_len,
                                           max_len=cfg.max_seq_len, seed=cfg.seed, n_test=cfg.n_test)
            alphabet = sorted({c for s, t in self.synthetic.test_pairs()[:200] for c in s + t}
                              | set("abcdefghijklmnopqrstuvwxyz0123456789"[:cfg.n_symbols]))
            self.tokenizer = self._tokenizer_for(["".join(alphabet)])
            self.texts = {"val": self.synthetic.val_pairs(), "test": self.synthetic.test_pairs()}
            self.default_max_len = cfg.max_seq_len + 2
        else:
            if cfg.dataset == "multi30k":
                self.texts = load_multi30k(cfg.data_dir)
            elif cfg.dataset is not None:
                raise DataError(f"dataset {cfg.dataset!r} is not a translation dataset (try multi30k)")
            elif data_paths:
                pairs = read_parallel(data_paths)
                n_val = max(1, len(pairs) // 20)
                self.texts = {"train": pairs[n_val:], "val": pairs[:n_val]}
                self.log(f"held out the first {n_val} pairs of {len(pairs)} for validation")
            else:
                raise DataError("task=translate needs data: --data PAIRS.tsv, --data SRC TGT, or dataset=multi30k")
            if cfg.train_limit:
                self.texts["train"] = self.texts["train"][:cfg.train_limit]
            self.tokenizer = self._tokenizer_for([s for s, _ in self.texts["train"]]
                                                 + [t for _, t in self.texts["train"]])
            self.default_max_len = 128
        self.max_len = int(model_kw.get("max_len", self.default_max_len))
        if cfg.eval_limit:
            self.texts = {k: v if k == "train" else v[:cfg.eval_limit] for k, v in self.texts.items()}
        for split, pairs in self.texts.items():
            self.splits[split] = self._encode(pairs, split)
        if "train" in self.splits:
            self.batches = EpochBatches([max(len(s), len(t) + 1) for s, t in self.splits["train"]], cfg)

    def _encode(self, pairs: list[tuple[str, str]], split: str) -> list[tuple[list[int], list[int]]]:
        src = self.tokenizer.encode_batch([s for s, _ in pairs], add_eos=True)
        tgt = self.tokenizer.encode_batch([t for _, t in pairs])
        src = self._check_lengths(src, self.max_len, f"{split} source")
        tgt = self._check_lengths(tgt, self.max_len - 1, f"{split} target")  # + <bos> or <eos>
        return list(zip(src, tgt))

    def model_fields(self) -> dict[str, Any]:
        return {**super().model_fields(), "max_len": self.default_max_len}

    def has_split(self, split: str) -> bool:
        return split in self.splits

    @staticmethod
    def collate(pairs: list[tuple[list[int], list[int]]]) -> Batch:
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
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        pairs = self.splits[split]
        device = next(model.parameters()).device
        total, count = 0.0, 0
        bs = max(self.cfg.batch_size, 64)
        for i in range(0, len(pairs), bs):
            batch = {k: v.to(device) for k, v in self.collate(pairs[i:i + bs]).items()}
            total += self.loss_sum(model, batch, 0.0).item()
            count += self.count(batch)
        loss = total / max(count, 1)
        out = {"loss": loss, "perplexity": perplexity(loss)}
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
        device = next(model.parameters()).device
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))  # similar lengths together
        results: dict[int, list[int]] = {}
        for i in range(0, len(order), 128):
            idx = order[i:i + 128]
            src, mask = pad_batch([sources[j] for j in idx], PAD_ID)
            max_new = min(self.max_len, src.size(1) + 50)
            hyps = greedy_translate(model, src.to(device), mask.to(device), bos_id=BOS_ID, eos_id=EOS_ID,
                                    max_new_tokens=max_new)
            results.update(zip(idx, hyps))
        return [results[i] for i in range(len(sources))]

    def samples(self, model: nn.Module) -> list[str]:
        split = "test" if "test" in self.splits else "val"
        pairs, texts = self.splits[split][:5], self.texts[split][:5]
        hyps = self.translate_ids([s for s, _ in pairs], model)
        lines = []
        for (src_text, tgt_text), h in zip(texts, hyps):
            out = self.tokenizer.decode(h)
            mark = "ok " if out == tgt_text else "   "
            lines.append(f"{mark} {src_text!r:>24} -> {out!r}" + ("" if out == tgt_text else f"  (want {tgt_text!r})"))
        return lines


# ====================================================================================== language modelling


class LMTask(Task):
    """Next-token prediction on a text: random windows of ``max_len`` tokens (nanoGPT's get_batch)."""

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], data_paths: list[str],
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model_kw, log, tokenizer)
        if cfg.dataset == "tinyshakespeare":
            train_text, val_text = load_tinyshakespeare(cfg.data_dir)
        elif cfg.dataset is not None:
            raise DataError(f"dataset {cfg.dataset!r} is not a language-modelling dataset (try tinyshakespeare)")
        elif data_paths:
            if len(data_paths) > 2:
                raise DataError("task=lm takes one text file, or a training and a validation file")
            train_text, val_text = lm_splits(read_text(data_paths[0]),
                                             read_text(data_paths[1]) if len(data_paths) == 2 else None)
        else:
            raise DataError("task=lm needs data: --data TEXT_FILE [VAL_FILE], or dataset=tinyshakespeare")
        if cfg.train_limit:
            train_text = train_text[:cfg.train_limit]
        self.tokenizer = self._tokenizer_for([train_text])
        self.block = int(model_kw.get("max_len", 256))
        self.data = {"train": LMDataset(torch.tensor(self.tokenizer.encode(train_text), dtype=torch.long)),
                     "val": LMDataset(torch.tensor(self.tokenizer.encode(val_text), dtype=torch.long))}
        for split, ds in self.data.items():
            if len(ds.ids) < self.block + 1:
                raise DataError(f"the {split} text has {len(ds.ids)} tokens, fewer than max_len + 1 = {self.block + 1}")

    def model_fields(self) -> dict[str, Any]:
        return {**super().model_fields(), "max_len": 256}

    def global_batch(self, step: int) -> Batch:
        x, y = self.data["train"].get_batch(self.cfg.batch_size, self.block, step_generator(self.cfg.seed, step))
        return {"x": x, "y": y}

    def count(self, batch: Batch) -> int:
        return batch["y"].numel()

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["x"])
        return F.cross_entropy(logits.float().flatten(0, 1), batch["y"].flatten(), label_smoothing=label_smoothing,
                               reduction="sum")

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        device = next(model.parameters()).device
        gen = torch.Generator().manual_seed(1234)  # the same windows at every evaluation
        total, count = 0.0, 0
        for _ in range(max(1, self.cfg.eval_batches)):
            x, y = self.data[split].get_batch(self.cfg.batch_size, self.block, gen)
            total += self.loss_sum(model, {"x": x.to(device), "y": y.to(device)}, 0.0).item()
            count += y.numel()
        loss = total / count
        return {"loss": loss, "perplexity": perplexity(loss)}

    def samples(self, model: nn.Module) -> list[str]:
        device = next(model.parameters()).device
        prompt = torch.tensor([self.tokenizer.encode("\n") or [BOS_ID]], device=device)
        out = generate(model, prompt, 300, do_sample=True, temperature=0.8, top_k=200, seed=self.cfg.seed)
        return self.tokenizer.decode(out[0].tolist()).splitlines()


# ====================================================================================== classification


def drop_tokens(ids: list[int], prob: float, keep: Collection[int], gen: torch.Generator) -> list[int]:
    """Word dropout (Iyyer et al. 2015, "Deep unordered composition"): remove each token with
    probability ``prob``, never one of ``keep`` (special tokens), and never all of the others."""
    coins = torch.rand(len(ids), generator=gen).tolist()
    out = [t for t, c in zip(ids, coins) if t in keep or c >= prob]
    return out if any(t not in keep for t in out) or all(t in keep for t in ids) else ids


class ClassifyTask(Task):
    """Labelled text -> class. Input ids are truncated to ``max_len`` by the stated policy."""

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], data_paths: list[str],
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model_kw, log, tokenizer)
        if cfg.dataset == "sst2":
            raw = load_sst2(cfg.data_dir)
            from ..data import SST2_LABELS

            self.labels = list(SST2_LABELS)
            texts = {split: raw[split] for split in ("train", "dev", "test") if split in raw}
            texts["val"] = texts.pop("dev")
        elif cfg.dataset is not None:
            raise DataError(f"dataset {cfg.dataset!r} is not a classification dataset (try sst2)")
        elif data_paths:
            t, y, names = read_labelled(data_paths[0])
            self.labels = names
            texts = {"train": (t, y)}
            if len(data_paths) > 1:
                vt, vy, _ = read_labelled(data_paths[1], label_names=names)
                texts["val"] = (vt, vy)
            else:
                n_val = max(1, len(t) // 10)
                texts = {"train": (t[n_val:], y[n_val:]), "val": (t[:n_val], y[:n_val])}
                log(f"held out the first {n_val} examples of {len(t)} for validation")
        else:
            raise DataError("task=classify needs data: --data LABELLED.tsv [VAL.tsv], or dataset=sst2")
        for split, (t, y) in texts.items():
            limit = cfg.train_limit if split == "train" else cfg.eval_limit
            if limit:
                texts[split] = (t[:limit], y[:limit])
        self.texts = texts
        if cfg.init_from and self.given_tokenizer is None:  # fine-tuning: the pretrained model's own tokenizer
            from ..pretrained import find_pretrained
            from ..tokenizers import PretrainedTokenizer

            self.given_tokenizer = PretrainedTokenizer.from_file(find_pretrained(cfg.init_from, cfg.data_dir)
                                                                 / "tokenizer.json")
        self.tokenizer = self._tokenizer_for(texts["train"][0])
        self.max_len = int(model_kw.get("max_len", 128))
        self.splits = {}
        for split, (t, y) in texts.items():
            ids = self._check_lengths(self.tokenizer.encode_batch(t), self.max_len, split)
            self.splits[split] = [(i or [PAD_ID], label) for i, label in zip(ids, y)]
        self.extra_meta = {"labels": self.labels}
        self.batches = EpochBatches([len(ids) for ids, _ in self.splits["train"]], cfg)

    def model_fields(self) -> dict[str, Any]:
        return {**super().model_fields(), "n_classes": len(self.labels), "max_len": 128}

    def has_split(self, split: str) -> bool:
        return split in self.splits

    @staticmethod
    def collate(rows: list[tuple[list[int], int]]) -> Batch:
        ids, mask = pad_batch([r for r, _ in rows], PAD_ID)
        return {"ids": ids, "mask": mask, "labels": torch.tensor([y for _, y in rows])}

    def global_batch(self, step: int) -> Batch:
        rows = [self.splits["train"][i] for i in self.batches(step)]
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

    @torch.no_grad()
    def probabilities(self, model: nn.Module, split: str) -> Tensor:
        """The model's class probabilities ``(N, n_classes)`` for the examples of ``split``, in order."""
        rows = self.splits[split]
        device = next(model.parameters()).device
        out = [model(b["ids"].to(device), b["mask"].to(device)).float().softmax(-1).cpu()
               for b in (self.collate(rows[i:i + 256]) for i in range(0, len(rows), 256))]
        return torch.cat(out) if out else torch.zeros(0, len(self.labels))

    def score(self, probs: Tensor, split: str) -> dict[str, float]:
        """Loss (mean negative log-probability of the true class), accuracy and macro-F1 of ``probs``."""
        labels = [y for _, y in self.splits[split]]
        truth = probs[torch.arange(len(labels)), torch.tensor(labels, dtype=torch.long)]
        loss = float(-truth.clamp(min=1e-12).log().mean()) if labels else 0.0
        preds = probs.argmax(-1).tolist()
        return {"loss": loss, "accuracy": accuracy(preds, labels), "f1": macro_f1(preds, labels, len(self.labels))}

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        return self.score(self.probabilities(model, split), split)

    def samples(self, model: nn.Module) -> list[str]:
        split = "test" if "test" in self.splits else "val"
        rows, texts = self.splits[split][:5], self.texts[split][0][:5]
        batch = self.collate(rows)
        device = next(model.parameters()).device
        with torch.no_grad():
            probs = model(batch["ids"].to(device), batch["mask"].to(device)).softmax(-1)
        return [f"{self.labels[int(p.argmax())]:>10} {p.max().item():.2f}  {t[:70]!r}" for p, t in zip(probs, texts)]


# ====================================================================================== masked-token pretraining

MASK_ID = BOS_ID  # an encoder never sees <bos> otherwise, so masked-token pretraining uses it as [MASK]


def mask_tokens(ids: Tensor, real: Tensor, prob: float, vocab_size: int,
                gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """BERT's corruption (Devlin et al. 2019, §3.1): choose each real token with probability ``prob``;
    of the chosen, 80 % become ``MASK_ID``, 10 % a random token, 10 % stay. Returns (inputs, chosen),
    both ``(B, T)``; at least one token is chosen, so a batch always has something to predict."""
    chosen = (torch.rand(ids.shape, generator=gen) < prob) & real
    if not chosen.any():
        chosen[0, 0] = bool(real[0, 0])
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[chosen & (r < 0.8)] = MASK_ID
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(len(SPECIAL_TOKENS), vocab_size, (int(swap.sum()),), generator=gen)
    return inputs, chosen


class MaskedLMTask(Task):
    """Masked-token prediction on texts (one example a line, or the text column of labelled data).

    The model is an ``EncoderClassifier``; ``model(inputs, mask, predict_tokens=chosen)`` returns the
    logits over the vocabulary at the chosen positions, through the (tied) token embedding matrix, so
    pretraining adds no parameters and the classifier head is left as it was. The validation masks are
    drawn once with a fixed seed, so the validation loss of every evaluation is comparable.
    """

    def __init__(self, cfg: TrainConfig, model_kw: dict[str, Any], data_paths: list[str],
                 log: Callable[[str], None], tokenizer: Tokenizer | None = None) -> None:
        super().__init__(cfg, model_kw, log, tokenizer)
        if cfg.dataset == "sst2":  # the sentences and phrases of the training split; no labels are used
            raw = load_sst2(cfg.data_dir)
            texts = {"train": raw["train"][0], "val": raw["dev"][0]}
        elif cfg.dataset is not None:
            raise DataError(f"dataset {cfg.dataset!r} cannot be used for task=mlm (try sst2, or --data TEXT_FILE)")
        elif data_paths:
            if len(data_paths) > 2:
                raise DataError("task=mlm takes one file, or a training and a validation file")
            found = [_text_lines(path) for path in data_paths]
            if len(found) == 1:
                n_val = max(1, len(found[0]) // 10)
                found = [found[0][n_val:], found[0][:n_val]]
                log(f"held out the first {n_val} of {n_val + len(found[0])} lines for validation")
            texts = {"train": found[0], "val": found[1]}
        else:
            raise DataError("task=mlm needs data: --data TEXT_FILE [VAL_FILE] (one example a line, or a labelled "
                            "TSV/CSV), or dataset=sst2")
        if cfg.train_limit:
            texts["train"] = texts["train"][:cfg.train_limit]
        if cfg.eval_limit:
            texts["val"] = texts["val"][:cfg.eval_limit]
        self.texts = texts
        self.tokenizer = self._tokenizer_for(texts["train"])
        self.max_len = int(model_kw.get("max_len", 128))
        self.splits = {split: [ids or [PAD_ID] for ids in  # token ids of each text
                               self._check_lengths(self.tokenizer.encode_batch(t), self.max_len, split)]
                       for split, t in texts.items()}
        self.batches = EpochBatches([len(ids) for ids in self.splits["train"]], cfg)

    def model_fields(self) -> dict[str, Any]:
        return {**super().model_fields(), "n_classes": 2, "max_len": 128}

    def has_split(self, split: str) -> bool:
        return split in self.splits

    def _masked(self, rows: list[list[int]], gen: torch.Generator) -> Batch:
        ids, real = pad_batch(rows, PAD_ID)
        inputs, chosen = mask_tokens(ids, real.bool(), self.cfg.mask_prob, self.tokenizer.vocab_size, gen)
        return {"ids": inputs, "mask": real, "targets": ids, "chosen": chosen}

    def global_batch(self, step: int) -> Batch:
        rows = [self.splits["train"][i] for i in self.batches(step)]
        return self._masked(rows, step_generator(self.cfg.seed, step, salt=17))

    def count(self, batch: Batch) -> int:
        return int(batch["chosen"].sum())

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["mask"].sum())

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["ids"], batch["mask"], predict_tokens=batch["chosen"])  # (chosen tokens, V)
        return F.cross_entropy(logits.float(), batch["targets"][batch["chosen"]], label_smoothing=label_smoothing,
                               reduction="sum")

    def _val_batches(self, split: str) -> list[Batch]:
        gen = torch.Generator().manual_seed(1234)  # the same masks at every evaluation
        rows = self.splits[split]
        return [self._masked(rows[i:i + 256], gen) for i in range(0, len(rows), 256)]

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        device = next(model.parameters()).device
        total, right, count = 0.0, 0, 0
        for batch in self._val_batches(split):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model(batch["ids"], batch["mask"], predict_tokens=batch["chosen"]).float()
            targets = batch["targets"][batch["chosen"]]
            total += F.cross_entropy(logits, targets, reduction="sum").item()
            right += int((logits.argmax(-1) == targets).sum())
            count += targets.numel()
        loss = total / max(1, count)
        return {"loss": loss, "perplexity": perplexity(loss), "accuracy": right / max(1, count)}

    @torch.no_grad()
    def samples(self, model: nn.Module) -> list[str]:
        """A few validation texts with their masked tokens, each as ``[true -> predicted]``."""
        device = next(model.parameters()).device
        batch = self._masked(self.splits["val"][:5], torch.Generator().manual_seed(99))
        predicted = model(batch["ids"].to(device), batch["mask"].to(device),
                          predict_tokens=batch["chosen"].to(device)).argmax(-1).tolist()
        lines, k = [], 0
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


def _text_lines(path: str) -> list[str]:
    """Texts of a labelled ``.tsv``/``.csv`` file (the labels are ignored), or the non-empty lines of a text file."""
    suffix = Path(Path(path).name.removesuffix(".gz")).suffix.lower()
    if suffix in (".tsv", ".csv"):
        return read_labelled(path)[0]
    lines = [line.strip() for line in read_text(path).splitlines() if line.strip()]
    if not lines:
        raise DataError(f"{path} has no text")
    return lines


def build_task(cfg: TrainConfig, model_kw: dict[str, Any], data_paths: list[str],
               log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
               tokenizer: Tokenizer | None = None) -> Task:
    """The task for ``cfg.task``; pass ``tokenizer`` (a checkpoint's) to reuse it instead of training one."""
    if cfg.task == "mlm":
        return MaskedLMTask(cfg, model_kw, data_paths, log, tokenizer)
    cls = {"seq2seq": Seq2SeqTask, "gpt": LMTask, "encoder": ClassifyTask}[cfg.arch]
    return cls(cfg, model_kw, data_paths, log, tokenizer)


def resolve_model_config(task: Task, model_kw: dict[str, Any]) -> ModelConfig:
    """Task defaults, then the user's fields; the vocabulary always comes from the tokenizer."""
    fields = {**task.model_fields(), **model_kw}
    fields["vocab_size"] = task.tokenizer.vocab_size
    fields["pad_id"] = PAD_ID
    return ModelConfig(**fields)

