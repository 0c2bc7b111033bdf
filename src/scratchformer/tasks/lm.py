"""Language modelling: next-token prediction on a text, random windows of ``max_len`` tokens (nanoGPT's get_batch).

The text is a prepared corpus's token stream on disk; each batch reads only its windows.

Validation during training draws ``eval_batches`` batches of random windows with a fixed seed (the same
windows at every evaluation, comparable with nanoGPT's figures). A test text is scored whole: every
token predicted once, in consecutive windows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.data.corpus.views import TokenStream
from scratchformer.data.task_data import TaskData
from scratchformer.errors import DataError
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.base import Batch, Task, step_generator


class LMTask(Task):
    """Random windows of a token stream; the target is the window shifted by one."""

    limits_eval = False  # eval_limit counts examples; a language model's held-out text is scored in windows, whole

    def __init__(self, cfg: TrainConfig, model: ModelConfig, data: TaskData, log: Callable[[str], None]) -> None:
        super().__init__(cfg, model, data, log)
        self.block = model.max_len
        self.streams: dict[str, TokenStream] = self.views
        for split, stream in self.streams.items():
            if len(stream) < self.block + 1 and split != "test":
                raise DataError(f"the {split} text has {len(stream)} tokens, fewer than max_len + 1 = "
                                f"{self.block + 1}; give more text or a smaller max_len")

    def global_batch(self, step: int) -> Batch:
        x, y = self.streams["train"].get_batch(self.cfg.batch_size, self.block, step_generator(self.cfg.seed, step))
        return {"x": x, "y": y}

    def count(self, batch: Batch) -> int:
        return batch["y"].numel()

    def loss_sum(self, model: nn.Module, batch: Batch, label_smoothing: float) -> Tensor:
        logits = model(batch["x"])
        return F.cross_entropy(logits.float().flatten(0, 1), batch["y"].flatten(), label_smoothing=label_smoothing,
                               reduction="sum") + self.router_loss(model, batch["y"].numel())  # experts: their aux

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str) -> dict[str, float]:
        device = next(model.parameters()).device
        total, count = 0.0, 0
        for x, y in (self._sweep(split) if split == "test" else self._random_windows(split)):
            total += self.loss_sum(model, {"x": x.to(device), "y": y.to(device)}, 0.0).item()
            count += y.numel()
        from scratchformer.tasks.metrics import perplexity

        loss = total / max(count, 1)
        out = {"loss": loss, "perplexity": perplexity(loss)}
        return {**out, "tokens": count} if split == "test" else out

    def report(self, model: nn.Module, split: str, **decoding: Any) -> dict[str, Any]:
        """A test text scored whole (every token once, in consecutive windows); else the random windows."""
        from scratchformer.models import eval_mode

        with eval_mode(model):
            metrics = self.evaluate(model, split)
        if split == "test":
            return {"examples": metrics.pop("tokens"), "unit": "tokens", **metrics}
        return {"examples": f"{self.cfg.eval_batches} x {self.cfg.batch_size} windows of {self.block} tokens",
                **metrics}

    def _random_windows(self, split: str) -> list[tuple[Tensor, Tensor]]:
        gen = torch.Generator().manual_seed(1234)  # the same windows at every evaluation
        return [self.streams[split].get_batch(self.cfg.batch_size, self.block, gen)
                for _ in range(max(1, self.cfg.eval_batches))]

    def _sweep(self, split: str, per_batch: int = 32) -> Iterator[tuple[Tensor, Tensor]]:
        """Consecutive windows that predict every token of the split (but the first) exactly once, read
        ``per_batch`` windows at a time."""
        stream = self.streams[split]
        n = len(stream)
        if n < 2:
            raise DataError(f"the {split} text has {n} token(s); at least 2 are needed to score it")
        span = per_batch * self.block
        for first in range(0, n - 1, span):
            ids = stream.read(first, first + span + 1)
            windows = [(ids[s:s + self.block], ids[s + 1:s + self.block + 1]) for s in range(0, len(ids) - 1,
                                                                                             self.block)]
            full = [w for w in windows if len(w[1]) == self.block]
            if full:
                yield torch.stack([x for x, _ in full]), torch.stack([y for _, y in full])
            for x, y in (w for w in windows if len(w[1]) != self.block):
                yield x[:len(y)][None], y[None]

    @torch.no_grad()
    def samples(self, model: nn.Module) -> list[str]:
        """A held-out prompt, the model's continuation (sampled, temperature 0.8) and the real text after it."""
        split = self.sample_split()
        ids = self.streams[split].read(0, 100_000).tolist()  # the prompt and the truth come from its beginning
        n_prompt, n_new = min(64, self.block // 2), min(200, max(1, self.block))
        if len(ids) < n_prompt + 1:
            return []
        newline = self.tokenizer.encode("\n")
        start = 0
        if len(newline) == 1:  # start the prompt at the beginning of a line
            start = next((i + 1 for i, t in enumerate(ids[: len(ids) // 2]) if t == newline[0]), 0)
        prompt = ids[start:start + n_prompt]
        device = next(model.parameters()).device
        from scratchformer.generation.sampling import generate

        out = generate(model, torch.tensor([prompt], device=device), n_new, do_sample=True, temperature=0.8,
                       top_k=200, seed=self.cfg.seed)[0, len(prompt):].tolist()
        truth = ids[start + n_prompt:start + n_prompt + n_new]
        decode = self.tokenizer.decode
        return [f"-- a {split} prompt --", *decode(prompt).splitlines(),
                "-- the model's continuation (sampled, temperature 0.8) --", *decode(out).splitlines(),
                "-- the real text --", *decode(truth).splitlines()]
