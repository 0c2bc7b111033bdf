"""Which waiting requests the engine admits at a step: in the order they came, while a row is free for each of their
answers (``n`` rows each) and their prompts together stay within a token budget (the prefill of one step reads at
most ``prefill_tokens`` prompt tokens; a first prompt longer than that is admitted alone). Admitted prompts are read
together, in one pass of the model (``engine.Engine``).

Thread-safe for ``put`` (any thread); ``admit`` is the stepping thread's.
"""

from __future__ import annotations

import threading
from collections import deque

from scratchformer.generation.requests import Request

__all__ = ["Scheduler"]


class Scheduler:
    def __init__(self, prefill_tokens: int) -> None:
        self.prefill_tokens = prefill_tokens
        self.waiting: deque[Request] = deque()
        self.lock = threading.Lock()

    def put(self, request: Request) -> None:
        with self.lock:
            self.waiting.append(request)

    def __len__(self) -> int:
        return len(self.waiting)

    def admit(self, free_rows: int) -> list[Request]:
        """The requests to prefill now (taken off the queue): cancelled ones are taken too (the engine ends them)."""
        out: list[Request] = []
        tokens = 0
        with self.lock:
            while self.waiting:
                request = self.waiting[0]
                if request.cancelled:
                    out.append(self.waiting.popleft())
                    continue
                if request.n > free_rows or (tokens and tokens + len(request.prompt) > self.prefill_tokens):
                    break
                out.append(self.waiting.popleft())
                free_rows -= request.n
                tokens += len(request.prompt)
        return out

    def take_all(self) -> list[Request]:
        with self.lock:
            out = list(self.waiting)
            self.waiting.clear()
        return out
