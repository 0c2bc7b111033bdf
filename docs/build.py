"""Keep the code in the walkthrough identical to the source: ``python docs/build.py [--check]``.

A page includes code with a marker line followed by a fenced block::

    <!-- include: src/scratchformer/nn/attention.py::attention_reference -->
    ```python
    ...filled in by this script...
    ```

The selector after ``::`` is a top-level function or class (``attention_reference``), a method
(``MultiHeadAttention.forward``) or a module-level assignment (``PRESETS``), found with ``ast`` so the
excerpt is always exactly that definition, decorators and docstring included. Without ``::`` the whole file
is included. ``python docs/build.py`` rewrites every fenced block after a marker; ``--check`` only reports
the stale ones and exits 1 (the test suite runs it, so an excerpt can never drift from the code).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!-- include: (?P<path>[^ :]+)(?:::(?P<name>[\w.]+))? -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                    re.M | re.S)


def excerpt(path: str, name: str | None) -> str:
    """The source of ``name`` (``func``, ``Class``, ``Class.method``, ``CONSTANT``) in ``path``."""
    source = (ROOT / path).read_text(encoding="utf-8")
    if not name:
        return source
    lines = source.splitlines(keepends=True)
    body = ast.parse(source).body
    node: ast.AST | None = None
    for part in name.split("."):
        node = next((n for n in body if _defines(n, part)), None)
        if node is None:
            raise KeyError(f"{path} defines no {name!r}")
        body = getattr(node, "body", [])
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign))
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    text = "".join(lines[start:node.end_lineno])
    indent = len(text) - len(text.lstrip(" "))
    return "".join(line[indent:] if line.startswith(" " * indent) else line for line in text.splitlines(True))


def _defines(node: ast.stmt, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def render(page: Path) -> tuple[str, list[str]]:
    """The page with every included block refreshed, and the selectors that were stale."""
    text = page.read_text(encoding="utf-8")
    stale: list[str] = []

    def refresh(m: re.Match[str]) -> str:
        code = excerpt(m["path"], m["name"])
        if not code.endswith("\n"):
            code += "\n"
        if code != m["body"]:
            stale.append(f"{m['path']}::{m['name'] or ''}")
        head = m.group(0).split("\n", 1)[0]
        return f"{head}\n```{m['lang']}\n{code}```"

    return MARKER.sub(refresh, text), stale


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    bad = 0
    for page in pages():
        new, stale = render(page)
        if stale and check:
            bad += 1
            print(f"{page.relative_to(ROOT)}: stale excerpts: {', '.join(stale)} (run python docs/build.py)")
        elif stale:
            page.write_text(new, encoding="utf-8")
            print(f"updated {page.relative_to(ROOT)}: {', '.join(stale)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
