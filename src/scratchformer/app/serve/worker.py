"""Between the event loop and the model: one thread steps the ``ContinuousBatcher``; each request is a ``Job`` whose
sequence's tokens arrive in an asyncio queue, and a ``TextStream`` turns them into text, cut at a stop text.

The model runs in its own thread (PyTorch lets go of the interpreter while it computes), so the event loop keeps
answering, reading requests and writing streams while a step runs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable

from scratchformer.generation.continuous import ContinuousBatcher, Sequence


class Worker:
    """The thread that steps the batcher whenever it has sequences, and sleeps when it has none."""

    def __init__(self, batcher: ContinuousBatcher, max_waiting: int) -> None:
        self.batcher, self.max_waiting = batcher, max_waiting
        self.wake = threading.Condition()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="scratchformer-decoder", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending: list[tuple[asyncio.Queue, tuple[list[int], str | None]]] = []

    def start(self) -> None:
        """Start stepping; the updates go to the running event loop."""
        self.loop = asyncio.get_running_loop()
        self.thread.start()

    def post(self, queue: asyncio.Queue, update: tuple[list[int], str | None]) -> None:
        """An update for a job's queue, delivered with the others of its step (in the decoding thread)."""
        self.pending.append((queue, update))

    def _deliver(self) -> None:
        """Hand the step's updates to the event loop in one call (one wake-up a step, not one a sequence), then let
        it take the interpreter to write them while the next step starts."""
        pending, self.pending = self.pending, []
        if pending and self.loop is not None:
            self.loop.call_soon_threadsafe(lambda: [queue.put_nowait(update) for queue, update in pending])
            time.sleep(0)

    def stop(self) -> None:
        """Cancel what runs and waits, and end the thread (after the step in progress)."""
        with self.wake:
            self.stopping = True
            self.wake.notify()
        self.thread.join()
        for seq in self.batcher.fail_all():
            if seq.on_update is not None:
                seq.on_update(seq)
        self._deliver()

    @property
    def full(self) -> bool:
        return len(self.batcher.waiting) >= self.max_waiting

    def submit(self, seq: Sequence) -> None:
        self.batcher.submit(seq)
        with self.wake:
            self.wake.notify()

    def cancel(self, seq: Sequence) -> None:
        self.batcher.cancel(seq)
        with self.wake:
            self.wake.notify()

    def _run(self) -> None:
        while True:
            with self.wake:
                while not self.stopping and not self.batcher.busy:
                    self.wake.wait()
                if self.stopping:
                    return
            try:
                self.batcher.step()
            except Exception:  # noqa: BLE001 - the requests in the batch fail; the server goes on
                traceback.print_exc(file=sys.stderr)
                for seq in self.batcher.fail_all():
                    if seq.on_update is not None:
                        seq.on_update(seq)
            self._deliver()


class Job:
    """A request's sequence seen from the event loop: ``updates()`` yields (tokens so far, finish reason or None)
    as the decoding thread makes them."""

    def __init__(self, seq: Sequence, worker: Worker) -> None:
        self.seq, self.worker = seq, worker
        self.queue: asyncio.Queue[tuple[list[int], str | None]] = asyncio.Queue()
        seq.on_update = self._notify

    def _notify(self, seq: Sequence) -> None:  # in the decoding thread
        self.worker.post(self.queue, (list(seq.tokens), seq.finish_reason))

    def start(self) -> None:
        self.worker.submit(self.seq)

    def cancel(self) -> None:
        if not self.seq.done:
            self.worker.cancel(self.seq)

    async def updates(self, gone: asyncio.Future | None = None) -> AsyncIterator[tuple[list[int], str | None]]:
        """Each update until the sequence ends; stops early (cancelling it) if ``gone`` (the client left) is done."""
        try:
            while True:
                getter = asyncio.ensure_future(self.queue.get())
                waits = {getter} if gone is None else {getter, gone}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    return
                tokens, finish = getter.result()
                while not self.queue.empty():  # behind the decoder: its latest state says it all (tokens so far)
                    tokens, finish = self.queue.get_nowait()
                yield tokens, finish
                if finish is not None:
                    return
        finally:
            self.cancel()


class TextStream:
    """Tokens -> the text safe to send so far: a character whose bytes are not all there yet is held back, and so
    is an end that may be the start of a stop text; at a stop text the text ends before it."""

    def __init__(self, decode: Callable[[list[int]], str], stops: tuple[str, ...]) -> None:
        self.decode, self.stops = decode, stops
        self.sent = ""
        self.stopped = False

    def feed(self, tokens: list[int], final: bool) -> str:
        """The new text since the last call (all of what is left when ``final``); sets ``stopped`` at a stop text."""
        text = self.decode(tokens)
        cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            text, final, self.stopped = text[:cut], True, True
        if not final:
            text = text.rstrip("\ufffd")  # the first bytes of a character: wait for the rest
            hold = max((k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
            text = text[:len(text) - hold]
        new = text[len(self.sent):] if text.startswith(self.sent) else ""
        self.sent = text if text.startswith(self.sent) else self.sent
        return new
