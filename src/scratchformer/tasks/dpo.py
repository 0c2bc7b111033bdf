"""Direct Preference Optimization (Rafailov et al. 2023, "Direct Preference Optimization: Your Language Model is
Secretly a Reward Model"): a model that answers learns, from two answers to one prompt, to make the preferred one
(chosen, y_w) more likely and the other (rejected, y_l) less likely than its frozen start (the reference, pi_ref)
does, without a reward model.

    log pi(y | x)  = the sum, over the answer's tokens and its <eos>, of log p(token | all before it)
    r(y)           = beta (log pi(y | x) - log pi_ref(y | x))            the implicit reward (§5)
    loss           = -log sigmoid(r(y_w) - r(y_l))                        Eq. 7, a mean over pairs

At the first step pi = pi_ref: both rewards are 0 and the loss is ln 2. Logged at every step and over the whole
validation split, as ``trl`` logs them: the loss, the mean rewards of the chosen and the rejected answers, their
``reward_margin`` (r(y_w) - r(y_l)) and ``reward_accuracy`` (the share of pairs with r(y_w) > r(y_l)), and the
log-probabilities ``logp_chosen``, ``logp_rejected``. ``label_smoothing`` eps is conservative DPO's: the loss then
takes eps of the opposite preference, -(1 - eps) log sigmoid(d) - eps log sigmoid(-d).

A batch holds each record's two answers side by side: ``x``, ``mask``, ``y`` of shape (B, 2, T) (0: chosen,
1: rejected; each row is ``prompt + answer + <eos>`` without its last token, ``y`` the next tokens of the answer and
``IGNORE`` elsewhere, as instruction tuning makes them: ``instruct.response_targets``), and ``ref`` (B, 2) when the
reference is precomputed, so that micro-batches and DDP's shards split pairs, never a pair.

A record longer than the window is cut as instruction tuning cuts it (its first ``max_len + 1`` tokens are kept:
the prompt whole, the end of the answer cut off) and counted; one whose prompt fills the window has no answer left
to compare, and one whose two answers are the same within the window no preference: both are skipped and counted
(``trl`` drops the first kind too). Dropout is off (``dropout_off``). The reference: ``dpo_reference.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import sorted_batches
from scratchformer.data.memory import MemoryRows
from scratchformer.data.task_data import TaskData
from scratchformer.data.templates import ALPACA_PREAMBLE
from scratchformer.errors import DataError
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.lora import adapters_off, has_adapters
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, clip
from scratchformer.tasks.dpo_reference import base_model, compute_table, digest, dropout_off, read_tables, write_tables
from scratchformer.tasks.instruct import IGNORE, AnsweringTask, greedy_answers, response_targets

__all__ = ["DPOTask", "answer_logps", "dpo_loss"]

FIELDS = ("prompt", "chosen", "rejected")


def answer_logps(model: nn.Module, batch: Batch) -> Tensor:
    """``(B, 2)``: log pi of each pair's chosen and rejected answer, summed over the answer's tokens (and its
    ``<eos>``); the prompt's and the padding's positions (``y == IGNORE``) add nothing."""
    x, mask, y = (batch[k].flatten(0, 1) for k in ("x", "mask", "y"))  # (2B, T)
    logits = model(x, mask)  # (2B, T, V)
    token = -F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=IGNORE, reduction="none")
    return token.view_as(y).sum(-1).view(-1, 2)  # (B, 2): [chosen, rejected]


def dpo_loss(logps: Tensor, ref: Tensor, beta: float, eps: float = 0.0) -> tuple[Tensor, Tensor]:
    """The sigmoid DPO loss of each pair ``(B,)`` and the rewards ``(B, 2)``, beta times the log-ratios to the
    reference; ``eps``: conservative DPO's label smoothing (0: the paper's loss)."""
    rewards = beta * (logps - ref)  # (B, 2): r(y_w), r(y_l)
    margin = rewards[:, 0] - rewards[:, 1]
    return -(1 - eps) * F.logsigmoid(margin) - eps * F.logsigmoid(-margin), rewards


class Totals:
    """Sums of what a DPO loss measured over some pairs; ``means()`` reads them and starts again."""

    NAMES = ("loss", "reward_chosen", "reward_rejected", "reward_margin", "reward_accuracy", "logp_chosen",
             "logp_rejected")

    def __init__(self) -> None:
        self.n, self.sums = 0, dict.fromkeys(self.NAMES, 0.0)

    def add(self, losses: Tensor, rewards: Tensor, logps: Tensor) -> None:
        margin = rewards[:, 0] - rewards[:, 1]
        for name, value in zip(self.NAMES, (losses, rewards[:, 0], rewards[:, 1], margin, (margin > 0).float(),
                                            logps[:, 0], logps[:, 1])):
            self.sums[name] += float(value.detach().double().sum())
        self.n += len(losses)

    def means(self, with_loss: bool = True) -> dict[str, float]:
        out = {k: v / self.n for k, v in self.sums.items() if with_loss or k != "loss"} if self.n else {}
        self.__init__()  # type: ignore[misc]
        return out


class DPOTask(AnsweringTask):
    """Preference records -> the model ``init_from`` names, tuned by DPO against its own frozen start."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        self.beta = cfg.beta if cfg.beta is not None else 0.1
        self.strategy = cfg.reference or ("adapters" if cfg.lora_rank else "precomputed")
        self.extra_meta["template"] = data.template
        self.rows: dict[str, MemoryRows] = {split: self._fit(rows, split) for split, rows in self.views.items()}
        self.tables: dict[str, Tensor] = {}  # split -> (N, 2) reference log-probabilities, when kept
        self.seen = Totals()  # the training pairs since the last train row
        if "train" in self.rows:
            if not len(self.rows["train"]):
                raise DataError(f"no training record has room for an answer within max_len={self.max_len} tokens")
            self.batches = self.rows["train"].batches(self._lengths("train"), cfg)

    def _fit(self, rows: MemoryRows, split: str) -> MemoryRows:
        """The records that fit the window (``max_len + 1`` tokens kept of each row), skipping those with no answer
        or no difference left in it; each kind counted."""
        room = self.max_len + 1
        keep, cut, long = [], 0, 0
        for i, (p, c, r) in enumerate(zip(*(rows.fields[k] for k in FIELDS))):
            over = len(p) + max(len(c), len(r)) > room
            long += over
            if len(p) < room and c[:room - len(p)] != r[:room - len(p)]:
                keep.append(i)
                cut += over
        if long and self.cfg.truncate == "error":
            raise DataError(f"{long} {split} records are longer than {self.max_len} tokens (the model's max_len) "
                            "with their longer answer; raise max_len or set truncate=warn")
        if cut:
            self.log(f"warning: cut {cut:,} of {len(rows):,} {split} records to the first {room:,} tokens of prompt "
                     "and answer (the end of the longer answer is left out; truncate=error refuses instead)")
        if len(keep) < len(rows):
            self.log(f"warning: skipped {len(rows) - len(keep):,} of {len(rows):,} {split} records whose prompt fills "
                     f"max_len={self.max_len} or whose two answers are the same within it (nothing to compare)")
        return MemoryRows({k: [v[i] for i in keep] for k, v in rows.fields.items()})

    def _lengths(self, split: str) -> np.ndarray:
        """Each pair's longer row, in tokens as batched (at most ``max_len + 1``)."""
        p, c, r = (self.rows[split].lengths(k) for k in FIELDS)
        return np.minimum(p + np.maximum(c, r), self.max_len + 1)

    def examples(self, split: str, positions: Sequence[int] | np.ndarray) -> Batch:
        """The pairs at ``positions``: ``x``, ``mask``, ``y`` (B, 2, T), and ``ref`` (B, 2) when precomputed."""
        prompts, chosen, rejected = (self.rows[split].ids(k, positions) for k in FIELDS)
        rows = [(p + a)[:self.max_len + 1] for p, c, r in zip(prompts, chosen, rejected) for a in (c, r)]
        batch = response_targets(rows, [len(p) for p in prompts for _ in range(2)], self.tokenizer.pad_id)
        out = {k: v.view(len(prompts), 2, -1) for k, v in batch.items()}
        if split in self.tables:
            out["ref"] = self.tables[split][torch.as_tensor(np.asarray(positions, dtype=np.int64))]
        return out

    def global_batch(self, step: int) -> Batch:
        return self.examples("train", self.batches(step))

    def count(self, batch: Batch) -> int:
        return int(batch["x"].size(0))  # pairs: the loss is a mean over them

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["mask"].sum())

    def reference_logps(self, model: nn.Module, batch: Batch) -> Tensor:
        """The reference's ``(B, 2)``: precomputed, else the model with its adapters off."""
        if "ref" in batch:
            return batch["ref"]
        with torch.no_grad(), adapters_off(model):
            return answer_logps(model, batch)

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logps = answer_logps(model, batch)
        losses, rewards = dpo_loss(logps, self.reference_logps(model, batch), self.beta, label_smoothing)
        if torch.is_grad_enabled():  # a training step: its pairs are in the next train row
            self.seen.add(losses, rewards, logps)
        return losses.sum()

    def train_metrics(self) -> dict[str, float]:
        return self.seen.means(with_loss=False)  # the loss is the loop's own

    # ---- the reference
    def start(self, model: nn.Module, out: Path | None, writes: bool) -> None:
        """Dropout off; the reference's log-probabilities of every split computed now (or read back from the run's
        directory), unless the reference is the model with its adapters off."""
        dropout_off(model)
        if self.strategy == "adapters":
            self.log("the reference: the model with its LoRA adapters off, at every step (reference=adapters)")
            return
        digests, started = {split: digest(rows) for split, rows in self.rows.items()}, time.perf_counter()
        saved = read_tables(out, digests) if out is not None else None
        self.tables = saved or {split: self._table(model, split) for split in self.rows}
        if saved is None and writes and out is not None:
            write_tables(out, self.tables, digests)
        seconds = time.perf_counter() - started
        how = "read back from" if saved else f"computed once, before the first step ({seconds:.1f} s)"
        self.log(f"the reference: its log-probabilities of the {sum(len(r) for r in self.rows.values()):,} records, "
                 f"{how}, in reference.safetensors")

    def _table(self, model: nn.Module, split: str) -> Tensor:
        return compute_table(model, lambda idx: self.examples(split, idx), self._lengths(split).tolist(),
                             answer_logps)

    def _reference_for(self, model: nn.Module, split: str) -> None:
        """Outside a run (``scratchformer evaluate``), or for a split it did not have: the base's table."""
        if split not in self.tables and not (self.strategy == "adapters" and has_adapters(model)):
            device = next(model.parameters()).device
            self.tables[split] = self._table(base_model(self.cfg.init_from, device), split)

    # ---- evaluation
    @torch.no_grad()
    def scores(self, model: nn.Module, split: str) -> dict[str, float]:
        """The loss, rewards, margin, reward accuracy and log-probabilities over the whole split."""
        self._reference_for(model, split)
        device, totals = next(model.parameters()).device, Totals()
        for idx in sorted_batches(self._lengths(split).tolist(), 4096):
            batch = {k: v.to(device) for k, v in self.examples(split, idx).items()}
            logps = answer_logps(model, batch)
            totals.add(*dpo_loss(logps, self.reference_logps(model, batch), self.beta), logps)
        return totals.means()

    def answers(self, model: nn.Module, split: str, positions: Sequence[int]) -> list[str]:
        return greedy_answers(model, self.tokenizer, self.rows[split].ids("prompt", positions), self.max_len)

    def answer_scores(self, model: nn.Module, split: str, n: int) -> dict[str, float]:
        """The greedy answers to the first ``n`` prompts against both answers of each record: ``closer_to_chosen``,
        the share nearer the chosen answer than the rejected one by chrF (sentence chrF, ties not counted), and
        each side's corpus chrF."""
        from scratchformer.tasks.metrics import chrf, closer_by_chrf

        answers, rows = self.answers(model, split, range(n)), self.rows[split]
        chosen, rejected = rows.values("chosen.text", range(n)), rows.values("rejected.text", range(n))
        return {"closer_to_chosen": closer_by_chrf(answers, chosen, rejected),
                "chrf_chosen": chrf(answers, chosen)[0], "chrf_rejected": chrf(answers, rejected)[0]}

    def samples(self, model: nn.Module) -> list[str]:
        """Three held-out prompts, the model's greedy answer, and the record's two answers."""
        split = self.sample_split()
        first = range(min(3, len(self.rows[split])))
        rows = self.rows[split]
        lines = [f"{split} examples, greedy answers beside the record's chosen and rejected answers:"]
        for prompt, answer, chosen, rejected in zip(rows.texts("prompt", first), self.answers(model, split, first),
                                                    rows.values("chosen.text", first),
                                                    rows.values("rejected.text", first)):
            lines += [f"-- prompt: {clip(prompt.removeprefix(ALPACA_PREAMBLE).strip(), 100)}",
                      f"   answer:   {clip(answer, 90)}", f"   chosen:   {clip(chosen, 90)}",
                      f"   rejected: {clip(rejected, 90)}"]
        return lines
