"""One writer per run directory: ``RUN/.lock`` holds the process id and host of the run that trains into it.

The lock is taken atomically when a run starts (written to a temporary file, then hard-linked to its name: the
link fails if the name exists, so two processes can never both hold it) and released when the run ends, however
it ends (an error, Ctrl-C, SIGTERM). A process killed outright (SIGKILL, a power cut) leaves it behind: a lock whose
process no longer exists on this host is taken over, saying so. A lock held by a live process, or by a process on
another host (a shared filesystem: its liveness cannot be checked from here), refuses the second writer in one
line naming the holder. The lock is advisory and local to the run directory; commands that only read a run
(``evaluate``, ``generate``, ``info``, ...) never take it. Prepared corpora keep their own rule (one preparer,
``data/corpus/writer.py``).
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from scratchformer.atomic import writing
from scratchformer.errors import RunDirError, WriteError

__all__ = ["LOCK", "RunLock"]

LOCK = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


class RunLock:
    """``lock = RunLock(out); lock.acquire(say)`` ... ``lock.release()``."""

    def __init__(self, out: Path) -> None:
        self.out, self.path = out, out / LOCK
        self.held = self.made_dir = False

    def acquire(self, say: Callable[[str], None]) -> None:
        self.made_dir = not self.out.exists()
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
        tmp = self.out / f".lock.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with writing("the run's lock file", self.out, leftovers=(tmp,)):
            self.out.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(me))
            try:
                for _ in range(2):
                    try:
                        os.link(tmp, self.path)  # fails if the name exists: only one process can hold it
                        self.held = True
                        break
                    except FileExistsError:
                        self._take_over_if_stale(say)
            finally:
                tmp.unlink(missing_ok=True)
        if not self.held:
            raise RunDirError(f"{self.out} is being trained by another process; try again when it has finished")

    def _take_over_if_stale(self, say: Callable[[str], None]) -> None:
        """Remove the lock of a process that no longer runs on this host; refuse any other."""
        try:
            holder = json.loads(self.path.read_text())
            pid, host = int(holder["pid"]), str(holder["host"])
        except FileNotFoundError:  # released meanwhile
            return
        except (OSError, ValueError, KeyError, TypeError):
            pid, host = -1, socket.gethostname()  # unreadable: written by no finished acquire; stale
        if host != socket.gethostname():
            raise RunDirError(f"{self.out} is locked by process {pid} on host {host} (lock file {self.path}); another "
                              "host's process cannot be checked from here: remove the lock file if it has ended")
        if pid > 0 and _alive(pid):
            raise RunDirError(f"{self.out} is being trained by process {pid} on this host (lock file {self.path}); "
                              "wait for it to finish, or stop it first")
        say(f"note: taking over the lock of process {pid}, which no longer runs ({self.path})")
        self.path.unlink(missing_ok=True)

    def release(self, failing: bool = False) -> None:
        """Remove the lock (and the run directory this run made, if it stayed empty). ``failing``: the run is already
        ending with an error, which is the one to tell: a lock that cannot be removed (a directory made read-only, a
        full disk) then stays, to be taken over by the next run since its process is gone; otherwise that is one
        ``WriteError`` line, like every other failed write."""
        if not self.held:
            return
        self.held = False
        try:
            with writing("the run's lock file", self.out):
                self.path.unlink(missing_ok=True)
                if self.made_dir and self.out.is_dir() and not any(self.out.iterdir()):
                    self.out.rmdir()  # a run that ended before it wrote anything leaves nothing behind
        except WriteError:
            if not failing:
                raise
