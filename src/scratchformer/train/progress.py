"""What a run shows while it trains: a progress bar on a terminal, a log line every few steps elsewhere.

On a terminal (stderr is a TTY) a ``tqdm`` bar shows the step, the loss, tokens/s and the time left. When
the output goes to a file or a pipe (CI, ``nohup``), a line every ``log_every`` steps says the same:
``step 500/2,000  loss 1.9821  lr 3.9e-03  24,310 tok/s  elapsed 0:20  left 1:01``. ``quiet`` keeps only
warnings (and the command's own result lines).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from scratchformer.data.progress import clock


class Progress:
    """``say``: where lines go (None on the non-main ranks of a distributed run: they print nothing)."""

    def __init__(self, say: Callable[[str], None] | None, *, quiet: bool = False) -> None:
        self._say, self.quiet = say, quiet
        self.bar: Any = None
        self.total = self.first = self.log_every = 0
        self.started = time.perf_counter()
        self.mark = (self.started, 0)

    def say(self, line: str) -> None:
        """An information line (a warning passes even when quiet)."""
        if self._say is None or (self.quiet and not line.lstrip().startswith("warning")):
            return
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            self._say(line)

    write = say

    def start(self, total: int, first: int, desc: str, log_every: int) -> None:
        self.total, self.first, self.log_every = total, first, log_every
        self.started = time.perf_counter()
        self.mark = (self.started, first)  # (when, steps done) the speed is measured from
        if self._say is not None and not self.quiet and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, initial=first, desc=desc, dynamic_ncols=True, file=sys.stderr)

    def step(self, done: int, loss: float, lr: float) -> None:
        if done == self.first + 1:  # the first step pays one-off costs (allocations, compiling): the time left is
            self.mark = (time.perf_counter(), done)  # estimated from the steps after it
        if self.bar is not None:
            self.bar.update(1)

    def log_line(self, done: int, loss: float, lr: float, tokens_per_s: float) -> None:
        """Every ``log_every`` steps: the bar's numbers, or a line when there is no bar."""
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
            return
        now = time.perf_counter()
        elapsed = now - self.started
        since, counted = self.mark if done > self.mark[1] else (self.started, self.first)
        rate = (done - counted) / max(now - since, 1e-9)
        left = (self.total - done) / rate if rate > 0 else 0.0
        self.say(f"step {done:,}/{self.total:,}  loss {loss:.4f}  lr {lr:.2e}  {tokens_per_s:,.0f} tok/s  "
                 f"elapsed {clock(elapsed)}  left {clock(left)}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
