"""Stopping a run cleanly: SIGINT (Ctrl-C) or SIGTERM ask the loop to finish its step, save ``last/`` and stop;
a second signal stops at once."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(request_stop: Callable[[], bool], say: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM call ``request_stop()``, which returns whether a stop had already
    been asked for (then the signal interrupts at once: ``KeyboardInterrupt``). Outside the main thread
    signals cannot be caught, and the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if request_stop():
            raise KeyboardInterrupt
        say(f"\n{signal.Signals(signum).name}: saving the run after this step (again to stop at once)")

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
