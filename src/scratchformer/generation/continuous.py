"""Continuous batching: many sequences decoded together, each joining and leaving between steps.

``generate`` decodes a batch that starts together and ends together. A server's requests do not: they arrive at
any time and want answers of any length. ``ContinuousBatcher`` keeps a list of live sequences and, at every
``step()``:

1. lets go of the sequences that were cancelled (their client went away) or are done: their cache rows are free
   at once, for the next sequence waiting;
2. admits waiting sequences into the free rows: each prompt is read in one pass (the prefill, as ``generate``
   reads it) and gives the sequence its first token;
3. decodes one token for every live sequence in one forward pass over all of them: one new token per row, each at
   its own position, over its own cached keys (``slots.SlotCache``).

So four clients cost about one forward pass of four rows a token, not four passes: decoding one token is bound by
reading the weights, and one read serves every row. Each sequence picks its tokens as ``generate`` does: greedy
(``temperature == 0``) or sampled with its own seeded generator, so a sequence gives the tokens ``generate`` gives
it alone, whoever else is in the batch. A model whose cache is not keys and values (``attention="linear"``: a
recurrent state) decodes its sequences one by one in the same loop.

The batcher is not thread-safe beyond ``submit`` and ``cancel``: one thread calls ``step`` (``app/serve``'s worker).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from scratchformer.generation.sampling import next_token, output_matrix
from scratchformer.generation.slots import SlotCache
from scratchformer.models import GPT
from scratchformer.nn.kv_cache import DecoderCache

__all__ = ["ContinuousBatcher", "Sampling", "Sequence"]


@dataclass(frozen=True)
class Sampling:
    """How a sequence picks its tokens: greedy at ``temperature == 0``, else sampled from ``softmax(logits /
    temperature)`` within ``top_k`` and the ``top_p`` nucleus, drawn with a generator seeded by ``seed``."""

    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0


@dataclass(eq=False)
class Sequence:
    """One prompt being continued: what it asks, and what it has so far.

    ``stop_ids``: tokens that end it (an end-of-text token; not kept in ``tokens``). ``on_update(seq)``: called by
    the stepping thread after each step that gave it tokens or ended it. ``finish_reason``: ``"stop"`` (a stop
    token, or cancelled by its owner after a stop text), ``"length"`` (``max_new_tokens`` reached), ``"cancelled"``
    or ``"error"``; None while it runs."""

    prompt: list[int]
    max_new_tokens: int
    sampling: Sampling = Sampling()
    stop_ids: frozenset[int] = frozenset()
    on_update: Callable[[Sequence], None] | None = None
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    cancelled: bool = False
    row: int = -1  # its cache row while live
    cache: DecoderCache | None = None  # its own cache, for a model decoded row by row
    generator: torch.Generator | None = None

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class ContinuousBatcher:
    """Decodes ``Sequence``s submitted at any time, up to ``max_batch`` at once (see the module docstring)."""

    def __init__(self, model: GPT, max_batch: int = 16) -> None:
        self.model, self.max_batch = model.eval(), max_batch
        self.max_len = model.config.max_len
        self.waiting: deque[Sequence] = deque()
        self.live: list[Sequence] = []  # live[i] holds cache row i
        self.lock = threading.Lock()
        self.generated = 0  # tokens decoded since the start (those of cancelled sequences too)
        self.peak = 0  # the most sequences decoded in one step
        probe = model.new_cache(1, 1)
        self.slots = SlotCache(probe, max_batch, self.max_len) if SlotCache.holds(probe) else None

    # ----------------------------------------------------------------------------- from any thread

    def submit(self, seq: Sequence) -> None:
        """Queue ``seq``; it is admitted at a coming step. ``ValueError`` if it cannot fit the model's window."""
        if not seq.prompt:
            raise ValueError("a sequence needs a prompt of at least one token")
        if seq.max_new_tokens < 1 or len(seq.prompt) + seq.max_new_tokens > self.max_len:
            raise ValueError(f"{len(seq.prompt)} prompt tokens and {seq.max_new_tokens} new ones do not fit the "
                             f"model's {self.max_len} positions")
        if not seq.sampling.greedy:
            seq.generator = torch.Generator(device=self.model.output_weight().device)
            if seq.sampling.seed is None:
                seq.generator.seed()
            else:
                seq.generator.manual_seed(seq.sampling.seed)
        with self.lock:
            self.waiting.append(seq)

    @staticmethod
    def cancel(seq: Sequence) -> None:
        """Stop ``seq`` at the next step (its row is freed then); safe from any thread."""
        seq.cancelled = True

    @property
    def busy(self) -> bool:
        return bool(self.live or self.waiting)

    def counts(self) -> dict[str, int]:
        return {"running": len(self.live), "waiting": len(self.waiting), "tokens_generated": self.generated,
                "peak_running": self.peak}

    # ------------------------------------------------------------------------ from the stepping thread

    @torch.no_grad()
    def step(self) -> None:
        """Let go of cancelled and done sequences, admit waiting ones (prefill), decode one token for all."""
        touched: list[Sequence] = []
        self._release()
        while len(self.live) < self.max_batch:
            with self.lock:
                seq = self.waiting.popleft() if self.waiting else None
            if seq is None:
                break
            if seq.cancelled:
                seq.finish_reason = "cancelled"
            else:
                self._admit(seq)
            touched.append(seq)
        self._release()
        if self.live:
            self.peak = max(self.peak, len(self.live))
            for seq, token in zip(list(self.live), self._decode()):
                self._take(seq, token)
            touched += self.live
            self._release()
        for seq in dict.fromkeys(touched):
            if seq.on_update is not None:
                seq.on_update(seq)

    def fail_all(self) -> list[Sequence]:
        """End every sequence with ``finish_reason="error"`` (after a failed step); returns them."""
        with self.lock:
            failed = [*self.live, *self.waiting]
            self.waiting.clear()
        for seq in failed:
            seq.finish_reason = seq.finish_reason or "error"
        self.live = []
        if self.slots is not None:
            self.slots.lengths.clear()
        return failed

    def _logits(self, hidden: Tensor) -> Tensor:
        """``(n, C)`` last hidden states -> ``(n, V)`` logits, through the same matrix as ``generate``."""
        out_t = output_matrix(self.model)
        return hidden @ out_t if out_t is not None else F.linear(hidden, self.model.output_weight())

    def _admit(self, seq: Sequence) -> None:
        """Prefill: the whole prompt in one pass (as ``generate`` reads it); the sequence's first token."""
        ids = torch.tensor([seq.prompt], device=self.model.output_weight().device)
        n = len(seq.prompt)
        cache = self.model.new_cache(1, n if self.slots is not None else n + seq.max_new_tokens)
        hidden = self.model.hidden_states(ids, cache=cache)[:, -1]  # (1, C)
        if self.slots is not None:
            seq.row = self.slots.add(cache, n)
        else:
            seq.cache, seq.row = cache, len(self.live)
        self.live.append(seq)
        self._take(seq, self._pick(self._logits(hidden), [seq])[0])

    def _decode(self) -> list[int]:
        """One new token for every live sequence: one pass over all rows, or (a recurrent model) row by row."""
        last = torch.tensor([[seq.tokens[-1]] for seq in self.live], device=self.model.output_weight().device)
        if self.slots is None:
            hidden = torch.cat([self.model.hidden_states(last[i:i + 1], cache=seq.cache)[:, -1]
                                for i, seq in enumerate(self.live)])
        else:
            positions, mask = self.slots.step_inputs()  # (n, 1), (n, W') or None
            hidden = self.model.hidden_states(last, mask, position_ids=positions,
                                              cache=self.slots.decoder_cache())[:, -1]  # (n, C)
            self.slots.advance()
        return self._pick(self._logits(hidden), self.live)

    @staticmethod
    def _pick(logits: Tensor, seqs: list[Sequence]) -> list[int]:
        """Each row's next token: the argmax, or a draw with the sequence's own settings and generator (the draw
        ``generate`` makes for a batch of one)."""
        chosen = logits.argmax(-1).tolist()
        for i, seq in enumerate(seqs):
            s = seq.sampling
            if not s.greedy:
                chosen[i] = int(next_token(logits[i:i + 1], True, s.temperature, s.top_k, s.top_p, seq.generator)[0])
        return chosen

    def _take(self, seq: Sequence, token: int) -> None:
        self.generated += 1
        if token in seq.stop_ids:
            seq.finish_reason = "stop"
            return
        seq.tokens.append(token)
        if len(seq.tokens) >= seq.max_new_tokens:
            seq.finish_reason = "length"

    def _release(self) -> None:
        """Free the rows of cancelled and finished sequences (the last live row moves into each freed one)."""
        for seq in [s for s in self.live if s.cancelled or s.done]:
            if not seq.done:
                seq.finish_reason = "cancelled"
            i = self.live.index(seq)
            if self.slots is not None:
                self.slots.remove(i)
            moved = self.live.pop()
            if moved is not seq:
                self.live[i] = moved
                moved.row = i
            seq.row, seq.cache = -1, None
