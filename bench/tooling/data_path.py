"""How long is the path from the command line to the first training batch, in the package's own code?

    python bench/tooling/data_path.py --tinyshakespeare ../shared/data/tinyshakespeare.txt
    python bench/tooling/data_path.py --json path.json -- task=lm --data small.txt max_steps=1 --quiet --out R

Runs ``scratchformer train ARGS`` (default: ``task=lm --data small.txt max_steps=1 --quiet --out R``) in a new
temporary folder, with ``HOME`` and ``XDG_CACHE_HOME`` pointing at empty folders there (and no
``$SCRATCHFORMER_CORPORA``), so nothing is reused from an earlier run. With ``--tinyshakespeare PATH``,
``small.txt`` in that folder is the first 20,000 characters of that file; ``--copy FILE`` puts any other file
there. The run is traced with ``sys.setprofile`` in a child process until the first ``forward`` of a module
of the package in training mode (the model's first training forward pass), counting every frame whose code
is in the package: functions, methods, lambdas, generator expressions, module bodies and class bodies.

It prints:

- the deepest stack: the most package frames on the stack at once, and that stack, outermost first;
- the distinct functions: the number of (file, function name) pairs called, in how many files, by folder;
- both numbers again without list, dict and set comprehension frames (Python before 3.12 gives each
  comprehension a frame of its own; 3.12 inlines them), so counts compare across Python versions.

``--json FILE`` also writes every pair called. The numbers are proxies for how far a reader must follow the
code from the CLI to a batch; they depend on the Python version and the commit, so say both with them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

DEFAULT_ARGS = ["task=lm", "--data", "small.txt", "max_steps=1", "--quiet", "--out", "R"]
SMALL_CHARS = 20_000
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        usage="%(prog)s [--tinyshakespeare PATH] [--copy FILE] [--json FILE] [--keep] [--] [TRAIN_ARG ...]",
        description=__doc__.split("\n", 1)[0], allow_abbrev=False,
        epilog="Anything after the options (or after --) goes to `scratchformer train`; without it: "
               + " ".join(DEFAULT_ARGS))
    parser.add_argument("--tinyshakespeare", type=Path, metavar="PATH",
                        help=f"write small.txt, the first {SMALL_CHARS:,} characters of this file, in the run folder")
    parser.add_argument("--copy", type=Path, action="append", default=[], metavar="FILE",
                        help="copy FILE (or a folder) into the run folder first (repeatable)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the full report, every pair included")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and say where it is")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args, train_args = parser.parse_known_args(argv)
    train_args = [a for a in train_args if a != "--"] or DEFAULT_ARGS
    if args.child:
        return _trace(train_args, args.child)
    return _run(args, train_args)


def _run(args: argparse.Namespace, train_args: list[str]) -> int:
    """Prepare the empty folder, trace the command in a child process there, print what it found."""
    work = Path(tempfile.mkdtemp(prefix="data-path-"))
    try:
        for name in ("home", "cache"):
            (work / name).mkdir()
        if args.tinyshakespeare:
            text = args.tinyshakespeare.read_text(encoding="utf-8")[:SMALL_CHARS]
            (work / "small.txt").write_text(text, encoding="utf-8")
        for path in args.copy:
            copy = shutil.copytree if path.is_dir() else shutil.copy
            copy(path, work / path.name)
        env = {k: v for k, v in os.environ.items() if k != "SCRATCHFORMER_CORPORA"}
        env.update(HOME=str(work / "home"), XDG_CACHE_HOME=str(work / "cache"))
        report_file = work / "report.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--child", str(report_file), "--", *train_args]
        done = subprocess.run(command, cwd=work, env=env)
        if not report_file.exists():
            print(f"data_path: `scratchformer train {' '.join(train_args)}` ended (exit code {done.returncode}) "
                  "before a training forward pass", file=sys.stderr)
            return 1
        report = json.loads(report_file.read_text(encoding="utf-8"))
        report["command"] = "scratchformer train " + " ".join(train_args)
        _print(report)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        return 0
    finally:
        if args.keep:
            print(f"data_path: the run folder is kept at {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _print(report: dict) -> None:
    print(f"{report['command']}  (Python {report['python']})")
    print(f"traced until the first training forward pass: {report['stopped_at']}")
    for key, label in (("all", "all frames"), ("without_comprehensions", "without list/dict/set comprehensions")):
        part = report[key]
        folders = ", ".join(f"{name} {n}" for name, n in sorted(part["by_folder"].items(), key=lambda kv: -kv[1]))
        print(f"{label}: deepest stack {part['deepest']}, distinct functions {part['functions']} "
              f"in {part['files']} files ({folders})")
    print("the deepest stack (all frames), outermost first:")
    for frame in report["all"]["stack"]:
        print(f"  {frame}")


class _Tracer:
    """The ``sys.setprofile`` hook: records package frames until the first training forward pass."""

    def __init__(self, package: str, report_file: Path):
        self.package, self.report_file = package, report_file
        self.called: set[tuple[str, str]] = set()
        self.deepest = {"all": (0, []), "without_comprehensions": (0, [])}

    def __call__(self, frame, event, arg) -> None:
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(self.package):
            return
        rel = code.co_filename[len(self.package):]
        if code.co_name == "forward" and self._training_module(frame.f_locals.get("self")):
            self.finish(f"{rel}:{frame.f_lineno}:forward of {type(frame.f_locals['self']).__name__}")
        self.called.add((rel, code.co_name))
        chain, f = [], frame
        while f is not None:
            if f.f_code.co_filename.startswith(self.package):
                chain.append(f)
            f = f.f_back
        self._keep("all", chain)
        self._keep("without_comprehensions", [f for f in chain if f.f_code.co_name not in COMPREHENSIONS])

    @staticmethod
    def _training_module(obj) -> bool:
        torch = sys.modules.get("torch")
        return torch is not None and isinstance(obj, torch.nn.Module) and obj.training

    def _keep(self, key: str, chain: list) -> None:
        if len(chain) > self.deepest[key][0]:
            names = [f"{f.f_code.co_filename[len(self.package):]}:{f.f_lineno}:{f.f_code.co_name}" for f in chain]
            self.deepest[key] = (len(chain), names[::-1])

    def _summary(self, key: str) -> dict:
        called = sorted(self.called if key == "all" else {p for p in self.called if p[1] not in COMPREHENSIONS})
        depth, stack = self.deepest[key]
        folders = Counter(f.split(os.sep)[0] if os.sep in f else "." for f, _ in called)
        return {"deepest": depth, "stack": stack, "functions": len(called), "files": len({f for f, _ in called}),
                "by_folder": dict(folders), "called": [f"{f}:{name}" for f, name in called]}

    def finish(self, where: str) -> None:
        sys.setprofile(None)
        report = {"python": sys.version.split()[0], "stopped_at": where,
                  **{key: self._summary(key) for key in self.deepest}}
        self.report_file.write_text(json.dumps(report, indent=1), encoding="utf-8")
        os._exit(0)  # the point is reached: nothing after it is measured, and the temporary folder goes


def _trace(train_args: list[str], report_file: Path) -> int:
    """In the child process: run the command under the tracer."""
    package = os.path.dirname(importlib.util.find_spec("scratchformer").origin) + os.sep
    sys.argv = ["scratchformer", "train", *train_args]
    sys.setprofile(_Tracer(package, report_file))
    from scratchformer.app.cli import main as cli_main

    code = cli_main()
    sys.setprofile(None)
    print("data_path: the command ended without a training forward pass", file=sys.stderr)
    return code or 1


if __name__ == "__main__":
    sys.exit(main())
