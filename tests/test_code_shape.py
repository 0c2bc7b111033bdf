"""The shape the code keeps (issue "One task, one place"): small modules and functions, one place that compares a
task's name, and no import circles.

- every ``.py`` file in ``src/`` has at most 300 lines (``paper.py``, the whole 2017 model in one file: 400;
  ``onnx_decode.py``, copied alone into every ONNX export and so unable to import a second file: 330);
- every function has at most 60 lines;
- only the task registry (``registry/``) compares a task's name (``task == ...``, or any name compared as a
  string: ``self.name == "copy"``);
- only the registries (a path with ``regist`` or ``famil`` in it) compare a model family's name: no ``arch``
  (``cfg.arch``, ``arch``, ``cfg["arch"]``, ``cfg.get("arch")``, a ``match`` on it) compared with a string, and no
  family's name (``"gpt"``, ``"gpt-classifier"``, ...) compared with anything;
- no two modules import each other, directly or through others (inside functions too).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scratchformer"
SOURCES = sorted(PACKAGE.rglob("*.py"))
LIMITS = {"paper.py": 400, "interop/onnx_decode.py": 330}


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_files_and_functions_are_small(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= LIMITS.get(_name(path), 300), f"{_name(path)} has {len(lines)} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)" for node in ast.walk(ast.parse("\n".join(lines)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 60]
    assert not long, f"{_name(path)}: functions over 60 lines: {', '.join(long)}"


def _compares_a_task_name(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` compares something with a task's name, written as a string (``name == "copy"``,
    ``kind in ("lm", "mlm")``)."""
    if not isinstance(node, ast.Compare):
        return False
    for side in (node.left, *node.comparators):
        items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
        if any(isinstance(item, ast.Constant) and item.value in names for item in items):
            return True
    return False


def test_only_the_registry_compares_a_task_name():
    from scratchformer.registry import task_names

    names = set(task_names())
    pattern = re.compile(r"task ?(==|!=| in )")
    found = [f"{_name(p)}:{i}" for p in SOURCES if not _name(p).startswith("registry/")
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    found += [f"{_name(p)}:{node.lineno}" for p in SOURCES if not _name(p).startswith("registry/")
              for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if _compares_a_task_name(node, names)]
    assert not found, found


def test_the_task_name_check_sees_a_name_compared_as_a_string():
    names = {"copy", "lm"}
    assert _compares_a_task_name(ast.parse('self.name == "copy"', mode="eval").body, names)
    assert _compares_a_task_name(ast.parse('kind not in ("lm", "x")', mode="eval").body, names)
    assert not _compares_a_task_name(ast.parse('arch == "gpt"', mode="eval").body, names)


def _is_arch(node: ast.AST) -> bool:
    """``arch``, ``x.arch``, ``x["arch"]`` or ``x.get("arch")``."""
    if isinstance(node, ast.Name) or isinstance(node, ast.Attribute):
        return getattr(node, "id", None) == "arch" or getattr(node, "attr", None) == "arch"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "arch"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "arch")


def _compares_a_family(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` compares ``arch`` with a string (``cfg.arch == "vit"``, ``arch in ("gpt", "x")``, a ``match``
    on it), or anything with a family's name (``kind != "gpt-classifier"``)."""
    if isinstance(node, ast.Match):
        return _is_arch(node.subject)
    if not isinstance(node, ast.Compare) or not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                    for op in node.ops):
        return False
    sides = [node.left, *node.comparators]
    items = [i for side in sides for i in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side])]
    strings = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return (any(_is_arch(side) for side in sides) and bool(strings)) or any(s in names for s in strings)


def test_only_the_registries_compare_a_family_name():
    from scratchformer.families import FAMILIES

    names = set(FAMILIES)
    found = [f"{_name(p)}:{node.lineno}" for p in SOURCES if "regist" not in _name(p) and "famil" not in _name(p)
             for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if _compares_a_family(node, names)]
    assert not found, found


def test_the_family_check_sees_every_form_of_comparison():
    names = {"gpt", "vit"}
    seen = ['cfg.arch == "vit"', 'arch in ("gpt", "x")', 'meta["arch"] != "seq2seq"', 'm.get("arch") == "y"',
            'kind == "gpt"', '"vit" not in kinds']
    assert all(_compares_a_family(ast.parse(code, mode="eval").body, names) for code in seen)
    assert _compares_a_family(ast.parse("match cfg.arch:\n    case _: pass").body[0], names)
    assert not _compares_a_family(ast.parse("a.arch == b.arch", mode="eval").body, names)
    assert not _compares_a_family(ast.parse('entry.reads == "pixels"', mode="eval").body, names)


def _imports(path: Path) -> set[str]:
    """The scratchformer modules ``path`` imports (``scratchformer.a.b``), resolved to files that exist."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] != "scratchformer":
                continue
            target = PACKAGE.joinpath(*parts[1:])
            for file in (target.with_suffix(".py"), target / "__init__.py"):
                if file.is_file() and file != path and file.name != "__init__.py":
                    out.add(_name(file))
    return out


def test_no_import_circles():
    graph = {_name(p): _imports(p) for p in SOURCES}
    circles = []

    def visit(node: str, stack: list[str]) -> None:
        for nxt in graph.get(node, ()):
            if nxt in stack:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in done:
                visit(nxt, stack + [nxt])
        done.add(node)

    done: set[str] = set()
    for start in graph:
        if start not in done:
            visit(start, [start])
    assert not circles, "\n".join(sorted(set(circles)))
