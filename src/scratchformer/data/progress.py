"""Progress of a pass over files (hashing, training a tokenizer, preparing a corpus), in bytes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["ByteBar", "clock"]


def clock(seconds: float) -> str:
    """``m:ss``, or ``h:mm:ss`` from an hour on."""
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class ByteBar:
    """On a terminal a ``tqdm`` bar with MB/s and the time left; elsewhere a line every ``every`` seconds saying
    the same. ``say`` None: silent. Call it with the bytes just consumed; close it when done (or use it as a
    context manager, ``with ByteBar(...) as bar:``)."""

    def __init__(self, desc: str, total: int, say: Callable[[str], None] | None, *, quiet: bool = False,
                 every: float = 10.0) -> None:
        self.desc, self.total, self.every = desc, max(int(total), 1), every
        self.say = None if quiet else say
        self.done, self.started, self.seconds = 0, time.perf_counter(), 0.0
        self.last_line = self.started
        self.bar: Any = None
        if self.say is not None and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total, desc=desc, unit="B", unit_scale=True, unit_divisor=1000,
                            dynamic_ncols=True, file=sys.stderr)

    def __call__(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        now = time.perf_counter()
        if self.say is not None and now - self.last_line >= self.every:
            self.last_line = now
            rate = self.done / max(now - self.started, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else 0.0
            self.say(f"{self.desc}: {self.done / 1e6:,.0f} of {self.total / 1e6:,.0f} MB, {rate / 1e6:.1f} MB/s, "
                     f"{clock(left)} left")

    def close(self) -> float:
        """Close the bar; returns the seconds since it started (also kept as ``seconds``)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.seconds = time.perf_counter() - self.started
        return self.seconds

    def __enter__(self) -> ByteBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
