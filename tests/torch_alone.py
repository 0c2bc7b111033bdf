"""One Python with torch and nothing of scratchformer, for the first read's snippets and solutions and for
``paper_train.py``: each job runs its scripts as ``python SCRIPT`` would, in a folder of its own (its working
directory and the first entry of ``sys.path``), with its own ``sys.argv``, every ``scratchformer`` import made to fail;
what it prints is captured, an exception ends it with exit status 1 and its traceback, ``SystemExit`` with its code.

The point of these tests is that the files run beside ``paper.py`` with torch alone, not that each runs in a process
of its own: so one interpreter runs them all, one after another (a cold ``import torch`` costs a second or more, and
the first read has twenty-odd scripts). Between jobs, the modules a job imported from its folder (``paper``,
``paper_train``, a solution) are forgotten, so that the next job imports its own copies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SERVER = r"""
import contextlib, io, json, os, runpy, sys, traceback
sys.modules["scratchformer"] = None
import torch  # once, for every job
path = list(sys.path)
for line in sys.stdin:
    job = json.loads(line)
    os.chdir(job["cwd"])
    sys.path[:] = [job["cwd"], *path]
    sys.argv = job["argv"]
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            for name in job["files"]:
                runpy.run_path(name, run_name="__main__")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:
        code = 1
        err.write(traceback.format_exc())
    for name, module in list(sys.modules.items()):  # the folder's own modules: the next job imports its own
        if (getattr(module, "__file__", None) or "").startswith(job["cwd"]):
            del sys.modules[name]
    print(json.dumps({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), flush=True)
"""


@dataclass
class Done:
    """What a job left, as ``subprocess.run`` says it of a process."""

    returncode: int
    stdout: str
    stderr: str


class TorchAlone:
    """The interpreter (started at once, stopped by ``close``); ``run(folder, scripts, argv)`` runs one job."""

    def __init__(self, home: Path, env: dict[str, str] | None = None) -> None:
        env = env or {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(home)}
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=home)

    def run(self, folder: Path, scripts: list[str], argv: list[str] | None = None) -> Done:
        job = {"cwd": str(folder.resolve()), "files": scripts, "argv": argv or scripts[:1]}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:  # the interpreter itself died (a crash in C code): what it said on its way out
            assert self.proc.stderr is not None
            return Done(self.proc.wait(), "", self.proc.stderr.read())
        return Done(**json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
