"""Learning from rewards a program gives (Group Relative Policy Optimization: Shao et al. 2024, "DeepSeekMath"): a
model that answers samples ``group_size`` answers to each problem, a program scores them (``rewards.py``), and the
answers better than their group's average are made more likely (``grpo_loss.py``: trl's loss, term for term).

A step of ``task=grpo``:

1. every ``updates`` steps, a new batch of answers: ``batch_size`` problems drawn (seeded by the seed and the step),
   ``group_size`` answers to each sampled at ``temperature`` by the decoding engine (each prompt read once for its
   group), each at most ``completion_tokens`` long; scored by each reward; each answer's advantage relative to its
   group; with ``updates > 1`` the policy's log-probabilities of them kept (pi_old), with ``beta > 0`` the
   reference's (the frozen start: a copy of it, or with LoRA the model with its adapters off);
2. the loss of that batch and one optimizer step (the loop's, ``train/trainer.py``: micro-batches, DDP, clipping as
   for every task).

The training row of each step logs each reward's mean and spread, the total reward's, ``accuracy`` (the share of
answers the ``answer`` reward finds right, whichever rewards train), the answers' mean length, the share of tokens
clipped, the KL to the reference (``beta > 0``), the entropy, and the seconds of sampling and of the step. An
evaluation answers held-out problems greedily (``eval_decode`` of them; the test split: all): ``accuracy``,
``format`` (ending in "#### N"), ``reward`` (the weighted sum) and ``length``. Dropout is off (trl's
``disable_dropout=True``): the old and new log-probabilities of an answer must be of the same function.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.data.batching import pad_batch
from scratchformer.data.memory import MemoryRows
from scratchformer.data.task_data import TaskData
from scratchformer.data.templates import ALPACA_PREAMBLE
from scratchformer.errors import ConfigError
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.lora import adapters_off, has_adapters
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, clip
from scratchformer.tasks.dpo_reference import dropout_off
from scratchformer.tasks.grpo_loss import PER_ANSWER, group_advantages, surrogate, token_logps
from scratchformer.tasks.rewards import answer_reward, format_reward, rewards_of, score

__all__ = ["GRPOTask"]

ANSWER_ROWS = 64  # greedy answers decoded together when held-out problems are scored


class GRPOTask(Task):
    """Problems with checkable answers -> the model ``init_from`` names, tuned by GRPO (module docstring)."""

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        self.extra_meta["template"] = data.template
        self.rows: dict[str, MemoryRows] = self.views
        self.group, self.new_tokens = cfg.group_size, cfg.completion_tokens
        self.temperature = float(cfg.temperature or 1.0)
        self.beta, self.updates = float(cfg.beta or 0.0), max(1, cfg.updates)
        self.loss_type, self.scale = cfg.loss_type or "dapo", cfg.scale_rewards or "group"
        self.epsilon, self.epsilon_high = float(cfg.epsilon or 0.2), cfg.epsilon_upper
        if self.new_tokens >= self.max_len:
            raise ConfigError(f"completion_tokens={self.new_tokens} leaves no room for a problem in the model's "
                              f"window of {self.max_len} tokens: give completion_tokens below {self.max_len}")
        self.rewards = rewards_of(cfg.reward or "answer", cfg.reward_weights)
        self.room = self.max_len - self.new_tokens  # the longest prompt, its left end cut beyond
        for split, rows in self.rows.items():
            long = sum(len(p) > self.room for p in rows.fields["prompt"])
            if long:
                self.log(f"warning: {long:,} of {len(rows):,} {split} problems are longer than the {self.room} tokens "
                         f"the window leaves beside completion_tokens={self.new_tokens}: their start is cut")
        self.policy: nn.Module | None = None  # the model being trained (``start``), which samples the answers
        self.reference: nn.Module | None = None  # the frozen start, with beta > 0 (without LoRA)
        self.batch: Batch | None = None
        self.drawn_at = -1  # the step whose answers ``batch`` holds
        self.seen: dict[str, list[float]] = {}  # what the steps since the last train row measured
        self.last_step_at: float | None = None

    # ----------------------------------------------------------------------------------- the run

    def start(self, model: nn.Module, out: Any, writes: bool) -> None:
        dropout_off(model)
        self.policy = model
        if self.beta and not has_adapters(model):
            self.reference = copy.deepcopy(model).eval().requires_grad_(False)

    def problems(self, split: str, positions: Sequence[int]) -> list[dict[str, Any]]:
        rows = self.rows[split]
        return [{"question": q, "answer": a} for q, a in zip(rows.values("question.text", positions),
                                                              rows.values("answer.text", positions))]

    def global_batch(self, step: int) -> Batch:
        """The batch of answers step ``step`` learns from: drawn anew every ``updates`` steps."""
        now = time.perf_counter()
        if self.last_step_at is not None:
            self._note("step_s", now - self.last_step_at)
        self.last_step_at = now
        first = step - step % self.updates
        if self.batch is None or self.drawn_at != first:
            self.batch, self.drawn_at = self._draw(first), first
            self._note("sample_s", time.perf_counter() - now)
        return self.batch

    @torch.no_grad()
    def _draw(self, step: int) -> Batch:
        """``batch_size`` problems, ``group_size`` sampled answers to each, scored; their advantages (and old and
        reference log-probabilities, where the loss needs them)."""
        from scratchformer.generation.engine import Engine
        from scratchformer.generation.requests import Request, Sampling, Stop

        assert self.policy is not None and self.tokenizer is not None
        rows = self.rows["train"]
        rng = random.Random((self.cfg.seed * 1_000_003 + step) * 7919)
        picked = rng.sample(range(len(rows)), min(self.cfg.batch_size, len(rows)))
        prompts = [p[-self.room:] for p in rows.ids("prompt", picked)]
        stop = Stop(frozenset(self.tokenizer.eos_ids))
        requests = [Request(p, self.new_tokens, Sampling(self.temperature, seed=rng.randrange(1 << 62)), stop,
                            self.group) for p in prompts]
        engine = Engine(self.policy, self.tokenizer, max_rows=max(self.group, min(256, len(requests) * self.group)))
        done = engine.run(requests)
        problems = self.problems("train", picked)
        answers, scores, right, completions = [], [], [], []
        for k, (request, problem) in enumerate(zip(done, problems)):
            for choice in request.choices:
                text = choice.text
                answers.append(text)
                scores.append(score(self.rewards, problem, text, f"training problem {picked[k] + 1}"))
                right.append(answer_reward(problem, text))
                completions.append(choice.tokens + ([choice.stop_id] if choice.stop_id is not None else []))
        each = torch.tensor(scores, dtype=torch.float32)  # (N, rewards)
        weights = torch.tensor([r.weight for r in self.rewards])
        total = (each * weights).sum(1)  # (N,)
        for j, reward in enumerate(self.rewards):
            self._note(f"reward_{reward.name}", float(each[:, j].mean()))
            self._note(f"reward_{reward.name}_std", float(each[:, j].std()) if len(each) > 1 else 0.0)
        self._note("reward", float(total.mean()))
        self._note("reward_std", float(total.std()) if len(total) > 1 else 0.0)
        self._note("accuracy", sum(right) / len(right))
        self._note("length", sum(len(c) for c in completions) / len(completions))
        device = next(self.policy.parameters()).device
        prompt, prompt_mask = pad_batch([p for p in prompts for _ in range(self.group)], self.tokenizer.pad_id,
                                        left=True)
        answer, answer_mask = pad_batch([c or [self.tokenizer.pad_id] for c in completions], self.tokenizer.pad_id)
        answer_mask &= torch.tensor([bool(c) for c in completions])[:, None]  # (an empty answer has no token)
        batch = {"prompt": prompt, "prompt_mask": prompt_mask, "answer": answer, "answer_mask": answer_mask,
                 "advantages": group_advantages(total, self.group, self.scale)}
        on = {k: v.to(device) for k, v in batch.items()}
        if self.updates > 1:  # the policy as it drew them: pi_old of the later updates
            batch["old"] = self._logps(self.policy, on).cpu()
        if self.beta:
            batch["ref"] = self._reference_logps(on).cpu()
        return batch

    def _logps(self, model: nn.Module, batch: Batch) -> Tensor:
        was = model.training
        model.eval()
        try:
            return token_logps(model, batch["prompt"], batch["prompt_mask"], batch["answer"], batch["answer_mask"],
                               self.temperature)[0]
        finally:
            model.train(was)

    def _reference_logps(self, batch: Batch) -> Tensor:
        if self.reference is not None:
            return self._logps(self.reference, batch)
        assert self.policy is not None
        with adapters_off(self.policy):  # LoRA: the base, its adapters off (no second copy of the weights)
            return self._logps(self.policy, batch)

    def count(self, batch: Batch) -> int:
        """What the summed loss is divided by: the answers (grpo), answers x the budget (dr_grpo), answer tokens
        (dapo)."""
        n = len(batch["advantages"])
        if self.loss_type == PER_ANSWER:
            return n
        if self.loss_type == "dr_grpo":
            return n * self.new_tokens
        return max(1, int(batch["answer_mask"].sum()))

    def n_tokens(self, batch: Batch) -> int:
        return int(batch["prompt_mask"].sum() + batch["answer_mask"].sum())

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logps, entropy = token_logps(model, batch["prompt"], batch["prompt_mask"], batch["answer"],
                                     batch["answer_mask"], self.temperature)
        mask = batch["answer_mask"]
        out = surrogate(logps, batch.get("old"), batch.get("ref"), batch["advantages"], mask, epsilon=self.epsilon,
                        epsilon_high=self.epsilon_high, beta=self.beta, loss_type=self.loss_type)
        self._note("clipped", out.clipped)
        if out.kl is not None:
            self._note("kl", out.kl)
        self._note("entropy", float((entropy.detach() * mask).sum() / mask.sum().clamp(min=1)))
        return out.loss_sum

    def _note(self, name: str, value: float) -> None:
        self.seen.setdefault(name, []).append(value)

    def train_metrics(self) -> dict[str, float]:
        """The means of what the steps since the last train row measured (module docstring)."""
        out = {name: sum(v) / len(v) for name, v in self.seen.items() if v}
        self.seen = {}
        return out

    # ----------------------------------------------------------------------------------- held-out problems

    def answers(self, model: nn.Module, split: str, positions: Sequence[int]) -> list[str]:
        """The model's greedy answers to the problems at ``positions``."""
        from scratchformer.generation.engine import Engine
        from scratchformer.generation.requests import Request, Stop

        assert self.tokenizer is not None
        stop = Stop(frozenset(self.tokenizer.eos_ids))
        prompts = [p[-self.room:] for p in self.rows[split].ids("prompt", positions)]
        done = Engine(model, self.tokenizer, max_rows=ANSWER_ROWS).run(
            [Request(p, self.new_tokens, stop=stop) for p in prompts])
        return [r.choices[0].text for r in done]

    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        n = len(self.rows[split]) if split == "test" else min(self.cfg.eval_decode or len(self.rows[split]),
                                                              len(self.rows[split]))
        positions = range(n)
        answers = self.answers(model, split, positions)
        problems = self.problems(split, positions)
        weights = [r.weight for r in self.rewards]
        totals = [sum(w * v for w, v in zip(weights, score(self.rewards, p, a, f"{split} problem {i + 1}")))
                  for i, (p, a) in enumerate(zip(problems, answers))]
        encoded = [len(self.tokenizer.encode(a)) for a in answers] if self.tokenizer is not None else [0]
        return {"accuracy": sum(answer_reward(p, a) for p, a in zip(problems, answers)) / max(1, n),
                "format": sum(format_reward(p, a) for p, a in zip(problems, answers)) / max(1, n),
                "reward": sum(totals) / max(1, n), "length": sum(encoded) / max(1, len(encoded))}

    def split_size(self, split: str) -> int:
        return len(self.rows[split])

    def samples(self, model: nn.Module) -> list[str]:
        """Three held-out problems, the model's greedy answer and the reference's."""
        split = self.sample_split()
        first = range(min(3, len(self.rows[split])))
        lines = [f"{split} problems, greedy answers (ok = the answer reward finds it right):"]
        for problem, answer in zip(self.problems(split, first), self.answers(model, split, first)):
            ok = answer_reward(problem, answer) == 1.0
            lines += [f"-- problem: {clip(problem['question'].removeprefix(ALPACA_PREAMBLE).strip(), 100)}",
                      f"   {'ok ' if ok else '   '} answer: {clip(answer, 90)}"]
            lines += [] if ok else [f"       the reference: {clip(problem['answer'], 90)}"]
        return lines
