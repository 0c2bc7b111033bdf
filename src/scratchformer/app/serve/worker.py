"""Between the event loop and the model: one thread steps the decoding engine (``generation/engine.py``); each HTTP
request is a ``Job`` whose answers' texts (cut at a stop text by the engine) arrive in an asyncio queue.

The model runs in its own thread (PyTorch lets go of the interpreter while it computes), so the event loop keeps
answering, reading requests and writing streams while a step runs.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator

from scratchformer.generation.engine import Engine
from scratchformer.generation.requests import Request

# What a job's queue receives after a step: for each answer, (its text so far, its finish reason or None, its tokens)
Snapshot = list[tuple[str, str | None, int]]


class Worker:
    """The thread that steps the engine whenever it has requests, and sleeps when it has none."""

    def __init__(self, engine: Engine, max_waiting: int) -> None:
        self.engine, self.max_waiting = engine, max_waiting
        self.wake = threading.Condition()
        self.stopping = False
        self.stopped = threading.Lock()  # held while stop() runs (it may run from two threads)
        self.thread = threading.Thread(target=self._run, name="scratchformer-decoder", daemon=True)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pending: list[tuple[asyncio.Queue, Snapshot]] = []

    def start(self) -> None:
        """Start stepping; the updates go to the running event loop."""
        self.loop = asyncio.get_running_loop()
        self.thread.start()

    def post(self, queue: asyncio.Queue, update: Snapshot) -> None:
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
        """Cancel what runs and waits, and end the thread (after the step in progress). Each request ends with the
        finish reason ``cancelled``: its client is told (a stream's error event, a 503). Called at SIGTERM's grace's
        end and again at the app's end: the second call finds nothing left."""
        with self.stopped:
            with self.wake:
                self.stopping = True
                self.wake.notify()
            if self.thread.is_alive():
                self.thread.join()
            for request in self.engine.fail_all("cancelled"):
                if request.on_update is not None:
                    request.on_update(request)
            self._deliver()

    @property
    def full(self) -> bool:
        return len(self.engine.scheduler) >= self.max_waiting

    def submit(self, request: Request) -> None:
        self.engine.add(request)
        with self.wake:
            self.wake.notify()

    def cancel(self, request: Request) -> None:
        self.engine.cancel(request)
        with self.wake:
            self.wake.notify()

    def _run(self) -> None:
        while True:
            with self.wake:
                while not self.stopping and not self.engine.busy:
                    self.wake.wait()
                if self.stopping:
                    return
            try:
                self.engine.step()
            except Exception:  # noqa: BLE001 - the requests in the batch fail; the server goes on
                traceback.print_exc(file=sys.stderr)
                for request in self.engine.fail_all():
                    if request.on_update is not None:
                        request.on_update(request)
            self._deliver()


class Job:
    """A request's answers seen from the event loop: ``updates()`` yields, after each step that touched them, every
    answer's (text so far, finish reason or None, tokens so far)."""

    def __init__(self, request: Request, worker: Worker) -> None:
        self.request, self.worker = request, worker
        self.queue: asyncio.Queue[Snapshot] = asyncio.Queue()
        request.on_update = self._notify

    def _notify(self, request: Request) -> None:  # in the decoding thread
        self.worker.post(self.queue, [(c.text, c.finish_reason, len(c.tokens)) for c in request.choices])

    def start(self) -> None:
        self.worker.submit(self.request)

    def cancel(self) -> None:
        if not self.request.done:
            self.worker.cancel(self.request)

    async def updates(self, gone: asyncio.Future | None = None) -> AsyncIterator[Snapshot]:
        """Each update until every answer ends; stops early (cancelling them) if ``gone`` (the client left) is done."""
        try:
            while True:
                getter = asyncio.ensure_future(self.queue.get())
                waits = {getter} if gone is None else {getter, gone}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    return
                snapshot = getter.result()
                while not self.queue.empty():  # behind the decoder: its latest state says it all (texts so far)
                    snapshot = self.queue.get_nowait()
                yield snapshot
                if all(finish is not None for _, finish, _ in snapshot):
                    return
        finally:
            self.cancel()
