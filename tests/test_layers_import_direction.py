"""The package's folders are layers, and each imports only the layers below it (so the tree is the architecture).

    rank -3 errors.py (the exceptions a command ends with)
    rank -2 lazy.py (how the packages load their names on first use), extras.py (the optional packages),
            atomic.py (writing files so that a failure or a crash leaves none half-written),
            paper.py (the whole 2017 model in one file: it imports torch and nothing of the package),
            paper_train.py (trains paper.py on the copy task: it imports torch and paper, run beside it)
    rank -1.5 families.py (the family registry: what each model family is)
    rank -1 registry/ (the task registry: what each task is)   distributed.py (torchrun's processes)
    rank 0  nn/ (the paper's blocks)   tokenizers/
    rank 1  models/ (the families' models, from nn/)   data/ (files by role -> tokenizer -> prepared corpora -> views)
    rank 1.5 interop/ (weights between scratchformer and other implementations: torch.nn, Hugging Face)
    rank 1.9 checkpoints/ (everything that reads or writes a model on disk: where a model comes from, a run's
            checkpoints, LoRA records, the sharded form; it reads a Hugging Face folder through interop/)
    rank 2  settings/ (configs, presets, the precedence rule)   generation/
    rank 3  tasks/ (each task's batches, loss and evaluation, its metrics, and a trained checkpoint used for it)
    rank 4  train/ (the session and the loop)
    rank 4.5 benchmarks/ (a trained language model scored on the field's benchmarks, as lm-evaluation-harness does)
    rank 5  app/ (what a user runs: the CLI, its commands, plots, export, explain, explore)

Every import statement counts, those inside functions too, and so does every module named in a string
(``"scratchformer.tasks.base"`` in a table of lazy exports, ``"scratchformer.app.train_commands:cmd_train"`` in
the command line's table): what is imported at run time is seen here. ``scratchformer/__init__.py`` (the public
API) and ``__main__.py`` may gather from anywhere.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scratchformer"
RANKS = {"lazy": -2, "extras": -2, "errors": -3, "atomic": -2, "paper": -2, "families": -1.5, "registry": -1,
         "distributed": -1, "nn": 0,
         "tokenizers": 0, "models": 1, "data": 1, "settings": 2, "generation": 2,
         "interop": 1.5, "checkpoints": 1.9, "tasks": 3, "train": 4,
         "benchmarks": 4.5, "app": 5}
RANKS["paper_train"] = -2  # beside paper.py, importing it as ``paper``: nothing of the package
EXEMPT = {"__init__.py", "__main__.py"}
MODULE_NAME = re.compile(r"scratchformer(\.\w+)+(:\w+)?")


def component(path: Path, root: Path = PACKAGE) -> str:
    first = path.relative_to(root).parts[0]
    return first.removesuffix(".py")


def imported_components(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, component) of every scratchformer module a file imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(("scratchformer", *path.relative_to(root).with_suffix("").parts))
    if path.name == "__init__.py":
        package = package.removesuffix(".__init__") + ".__init__"
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package.split(".")[:-node.level]
                names = [".".join([*base, node.module] if node.module else base)]
            else:
                names = [node.module or ""]
            if names == ["scratchformer"]:  # from scratchformer import x: x is the component
                names = [f"scratchformer.{a.name}" for a in node.names]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_NAME.fullmatch(node.value):
            names = [node.value.partition(":")[0]]  # a module named to be imported later ("module:attribute")
        for name in names:
            parts = name.split(".")
            if parts[0] == "scratchformer" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
    return found


def violations(path: Path, root: Path = PACKAGE) -> list[str]:
    own = component(path, root)
    return [f"line {line}: {own} (rank {RANKS[own]}) imports {other} (rank {RANKS[other]})"
            for line, other in imported_components(path, root) if other != own and RANKS[other] >= RANKS[own]]


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).as_posix() not in EXEMPT)


def test_every_module_belongs_to_a_layer():
    assert {component(p) for p in MODULES} <= set(RANKS), {component(p) for p in MODULES} - set(RANKS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_only_from_layers_below(path):
    wrong = violations(path)
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_upward_and_sideways_imports_also_inside_functions(tmp_path):
    root = tmp_path / "scratchformer"
    (root / "nn").mkdir(parents=True)
    bad = root / "nn" / "bad.py"
    bad.write_text("from scratchformer.nn import masks\n\ndef f():\n    from ..train.config import TrainConfig\n"
                   "    import scratchformer.data.files\n")
    assert violations(bad, root) == ["line 4: nn (rank 0) imports train (rank 4)",
                                     "line 5: nn (rank 0) imports data (rank 1)"]


def test_the_check_sees_a_module_named_in_a_string(tmp_path):
    root = tmp_path / "scratchformer"
    (root / "data").mkdir(parents=True)
    lazy = root / "data" / "lazy_table.py"
    lazy.write_text('TABLE = {"Task": "scratchformer.tasks.base", "run": "scratchformer.train.start:train"}\n'
                    'WORDS = "scratchformer trains models"\n')
    assert violations(lazy, root) == ["line 1: data (rank 1) imports tasks (rank 3)",
                                      "line 1: data (rank 1) imports train (rank 4)"]
