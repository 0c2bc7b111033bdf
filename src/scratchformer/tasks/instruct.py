"""Instruction tuning: a GPT reads a prompt (an instruction in its template) and learns to write the answer.

Each row is ``prompt + response + <eos>`` (``data/records.py``). The model reads the row and predicts each next
token, as a language model does, but the loss is taken on the response's tokens (and the end token) only:

    ids      p0 p1 p2 p3 | r0 r1 r2 <eos>            n_prompt = 4
    x        p0 p1 p2 p3   r0 r1 r2                  (the row without its last token)
    y        -  -  -  r0   r1 r2 <eos>               (the next tokens; "-" = IGNORE: no loss)

The prompt's tokens are not predicted (the model is not taught to write instructions), nor is padding; the end
token is, so that the model learns to stop (``generate`` stops at it). Rows are padded on the right; the mask
keeps padding out of attention, and the causal mask keeps it out of every real token's view anyway.

Evaluation: the loss per response token (and its perplexity) over a whole split; with ``eval_decode=N``, also the
greedy answers to the first N prompts (every prompt of the test split), scored by exact match (after stripping
spaces) and chrF against the records' answers.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch, sorted_batches
from scratchformer.data.memory import MemoryRows
from scratchformer.data.task_data import TaskData
from scratchformer.data.templates import ALPACA_PREAMBLE
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, clip
from scratchformer.tasks.metrics import chrf, exact_match, perplexity
from scratchformer.tokenizers import Tokenizer

__all__ = ["IGNORE", "AnsweringTask", "InstructTask", "greedy_answers", "response_targets"]

IGNORE = -100  # a target that takes no loss (cross_entropy's ignore_index)
EVAL_TOKENS = 8192  # padded tokens per batch when a split's loss is measured
ANSWER_ROWS = 32  # prompts answered together (greedy, by the decoding engine)


def response_targets(rows: Sequence[Sequence[int]], n_prompt: Sequence[int], pad_id: int) -> Batch:
    """Rows of ``prompt + response + eos`` -> the batch a step trains on: ``x (B, T)`` (each row without its last
    token, right-padded), its ``mask`` (True = real) and ``y (B, T)``, the next token where it belongs to the
    response, else ``IGNORE`` (the prompt's and padding's positions)."""
    x, mask = pad_batch([r[:-1] for r in rows], pad_id)
    y = torch.full_like(x, IGNORE)
    for i, (row, n) in enumerate(zip(rows, n_prompt)):
        start = max(n - 1, 0)  # position n - 1 reads the prompt's last token and predicts the response's first
        y[i, start:len(row) - 1] = torch.tensor(row[start + 1:], dtype=torch.long)
    return {"x": x, "mask": mask, "y": y}


@torch.no_grad()
def greedy_answers(model: nn.Module, tok: Tokenizer, prompts: list[list[int]], max_len: int) -> list[str]:
    """The greedy answers of ``model`` to ``prompts`` (token ids; each cut to its last ``max_len - 1``), each until
    the end token or ``max_len`` tokens in all; ``ANSWER_ROWS`` at once, by the decoding engine."""
    from scratchformer.generation.engine import Engine
    from scratchformer.generation.requests import Request, Stop

    stop = Stop(frozenset(tok.eos_ids))
    requests = [Request(p[-(max_len - 1):], max_len - len(p[-(max_len - 1):]), stop=stop) for p in prompts]
    done = Engine(model, tok, max_rows=ANSWER_ROWS).run(requests)  # type: ignore[arg-type]
    return [tok.decode(r.choices[0].tokens) for r in done]


class AnsweringTask(Task):
    """A task whose model answers prompts (instruction tuning, DPO): a split is evaluated by its ``scores`` over every
    row and, with ``eval_decode=N``, by ``answer_scores`` of the greedy answers to its first N prompts (every prompt of
    the test split); ``scratchformer evaluate`` scores the answers to every prompt."""

    rows: dict[str, MemoryRows]

    @abstractmethod
    def scores(self, model: nn.Module, split: str) -> dict[str, float]:
        """What the model's log-probabilities say over the whole split (the loss, ...)."""

    @abstractmethod
    def answer_scores(self, model: nn.Module, split: str, n: int) -> dict[str, float]:
        """The greedy answers to the first ``n`` prompts of ``split``, scored."""

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        out = self.scores(model, split)
        n = len(self.rows[split]) if split == "test" else min(self.cfg.eval_decode, len(self.rows[split]))
        if self.cfg.eval_decode and n:
            out.update(self.answer_scores(model, split, n))
        return out

    def report(self, model: nn.Module, split: str, **decoding: Any) -> dict[str, Any]:
        """What ``scratchformer evaluate`` says: the scores, and the greedy answers to every prompt scored."""
        from scratchformer.models import eval_mode

        with eval_mode(model):
            return {"examples": len(self.rows[split]), **self.scores(model, split),
                    **self.answer_scores(model, split, len(self.rows[split]))}


class InstructTask(AnsweringTask):
    """Instruction records -> a GPT that answers them; the loss on the answers alone."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        self.rows: dict[str, MemoryRows] = self.views
        self.extra_meta["template"] = data.template
        for split, rows in self.rows.items():
            self._check_lengths(rows.lengths("ids") - 1, self.max_len, split)
            silent = int(sum(n >= self.max_len for n in rows.fields["n_prompt"]))
            if silent:
                self.log(f"warning: {silent:,} of {len(rows):,} {split} prompts fill max_len={self.max_len} tokens: "
                         "their answers are cut off and teach nothing; raise max_len")
        if "train" in self.rows:
            train = self.rows["train"]
            self.batches = train.batches(np.clip(train.lengths("ids"), 1, self.max_len + 1), cfg)

    def examples(self, split: str, positions: Sequence[int] | np.ndarray) -> Batch:
        """The batch of the rows at ``positions``, each cut to ``max_len + 1`` tokens (``max_len`` read)."""
        rows = self.rows[split]
        ids = [r[:self.max_len + 1] for r in rows.ids("ids", positions)]
        return response_targets(ids, rows.values("n_prompt", positions), self.tokenizer.pad_id)

    def global_batch(self, step: int) -> Batch:
        return self.examples("train", self.batches(step))

    def count(self, batch: Batch) -> int:
        return int((batch["y"] != IGNORE).sum())  # the response tokens: the loss is a mean over them

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["mask"].sum())

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["x"], batch["mask"])  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), batch["y"].flatten(), ignore_index=IGNORE,
                               label_smoothing=label_smoothing, reduction="sum") \
            + self.router_loss(model, self.count(batch), batch["mask"])  # a model with experts: their aux loss

    @torch.no_grad()
    def scores(self, model: nn.Module, split: str) -> dict[str, float]:
        """The loss per response token over the whole split, and its perplexity."""
        device = next(model.parameters()).device
        lengths = np.minimum(self.rows[split].lengths("ids"), self.max_len + 1)
        total, count = 0.0, 0
        for idx in sorted_batches(lengths.tolist(), EVAL_TOKENS):
            batch = {k: v.to(device) for k, v in self.examples(split, idx).items()}
            total += self.loss_sum(model, batch, 0.0).item()
            count += self.count(batch)
        loss = total / max(count, 1)
        return {"loss": loss, "perplexity": perplexity(loss)}

    def answer_scores(self, model: nn.Module, split: str, n: int) -> dict[str, float]:
        """Exact match (the share of answers equal to the record's, spaces stripped) and chrF of the greedy answers
        to the first ``n`` prompts of ``split``."""
        answers = self.answers(model, split, range(n))
        truth = self.rows[split].values("response.text", range(n))
        return {"exact_match": exact_match([a.strip() for a in answers], [t.strip() for t in truth]),
                "chrf": chrf(answers, truth)[0]}

    def answers(self, model: nn.Module, split: str, positions: Sequence[int]) -> list[str]:
        """The model's greedy answers to the prompts at ``positions`` (until its end token or ``max_len``)."""
        rows = self.rows[split]
        prompts = [ids[:n] for ids, n in zip(rows.ids("ids", positions), rows.values("n_prompt", positions))]
        return greedy_answers(model, self.tokenizer, prompts, self.max_len)

    def samples(self, model: nn.Module) -> list[str]:
        """Three held-out instructions, the model's greedy answer and the record's."""
        split = self.sample_split()
        first = range(min(3, len(self.rows[split])))
        answers = self.answers(model, split, first)
        lines = [f"{split} examples, greedy answers (ok = the record's answer exactly):"]
        for prompt, answer, truth in zip(self.rows[split].texts("ids", first),
                                         answers, self.rows[split].values("response.text", first)):
            ok = answer.strip() == truth.strip()
            lines += [f"-- prompt: {clip(prompt.removeprefix(ALPACA_PREAMBLE).strip(), 100)}",
                      f"   {'ok ' if ok else '   '} answer: {clip(answer, 90)}"]
            lines += [] if ok else [f"       the record's: {clip(truth, 90)}"]
        return lines
