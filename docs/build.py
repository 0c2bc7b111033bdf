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

``--check`` also reports every broken link: in the pages under ``docs/`` (the walkthrough and the reference)
and in ``LINKED`` (the README, RESULTS.md, the indexes of ``bench/`` and ``results/``), a link or picture to a
file that does not exist, or to a ``#section`` that is no heading of the page it names.

A block that starts with ``$ scratchformer`` is a transcript: ``transcripts`` reads its commands and the lines
each one prints, and ``unseen`` says which shown lines a real output lacks (``tests/test_docs.py`` runs them).
An HTML comment ``<!-- not run: REASON -->`` just above a transcript keeps it from being run.
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
    return sorted(DOCS.rglob("*.md"))


LINKED = ["README.md", "RESULTS.md", "bench/README.md", "results/README.md"]
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lowercased, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The ``#section`` names a link may use for ``page`` (repeated headings get -1, -2, ...)."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        name = slug(heading)
        seen[name] = seen.get(name, -1) + 1
        if seen[name]:
            seen[f"{name}-{seen[name]}"] = 0
    return set(seen)


def broken_links(page: Path) -> list[str]:
    """The links and pictures of ``page`` (outside code blocks) that point at nothing."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, section = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif section and dest.suffix == ".md" and section not in anchors(dest):
            broken.append(f"{target} (no heading #{section} in {dest.name})")
    return broken


TRANSCRIPT = re.compile(r"(?:^<!-- not run: (?P<reason>.+?) -->\n)?^```\w*\n(?P<body>\$ scratchformer .*?)^```$",
                        re.M | re.S)


def transcripts(page: Path) -> list[tuple[int, str | None, list[tuple[str, list[str]]]]]:
    """Each transcript of ``page``: (its line, the reason it is not run or None, [(command, shown lines)])."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in TRANSCRIPT.finditer(text):
        steps: list[tuple[str, list[str]]] = []
        for line in m["body"].rstrip("\n").split("\n"):
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line.rstrip())
        found.append((text.count("\n", 0, m.start("body")) + 1, m["reason"], steps))
    return found


def unseen(shown: list[str], printed: list[str]) -> list[str] | None:
    """The first run of shown lines that ``printed`` lacks (None: all seen, in order). A shown line ``...``
    stands for any lines, and ``...`` inside a line for any part of it."""
    pieces, piece = [], []
    for line in shown:
        if line.strip() == "...":
            pieces.append(piece)
            piece = []
        else:
            piece.append(re.compile(".*".join(re.escape(part) for part in line.split("...")) + r"\Z"))
    pieces.append(piece)
    at = 0
    for piece in filter(None, pieces):
        starts = [i for i in range(at, len(printed) - len(piece) + 1)
                  if all(p.match(printed[i + k].rstrip()) for k, p in enumerate(piece))]
        if not starts:
            return [p.pattern for p in piece]
        at = starts[0] + len(piece)
    return None


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
    for page in [*pages(), *(ROOT / name for name in LINKED)]:
        for link in broken_links(page) if page.exists() else ["(the page itself is missing)"]:
            bad += 1
            print(f"{page.relative_to(ROOT)}: broken link {link}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
