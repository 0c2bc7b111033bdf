"""The walkthrough in docs/: code excerpts identical to the source, every page linked, every picture present,
the "Try it" examples and `scratchformer explain` transcripts true, every named test real."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))


def _build():
    spec = importlib.util.spec_from_file_location("docs_build", DOCS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_is_a_page_per_step_of_the_paper():
    assert len(PAGES) >= 12


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_excerpt_is_the_current_source(page):
    _, stale = _build().render(page)
    assert not stale, f"{page.name}: stale excerpts {stale}; run python docs/build.py"
    assert "<!-- include: " in page.read_text(encoding="utf-8"), f"{page.name} includes no code from the source"


@pytest.mark.parametrize("page", [*PAGES, DOCS / "README.md"], ids=lambda p: p.name)
def test_every_link_and_picture_exists(page):
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


PAPER_PAGES = [p for p in PAGES if "02" <= p.name[:2] <= "09"]  # the pages on the paper's blocks and model


@pytest.mark.parametrize("page", PAPER_PAGES, ids=lambda p: p.name)
def test_each_page_on_the_paper_shows_the_one_file_code_before_the_library_s(page):
    """Pages 2 to 9 show ``paper.py`` (the 2017 model in one file) first, then the library's model code (nn/,
    models/) under a heading that says what production adds."""
    text = page.read_text(encoding="utf-8")
    sources = re.findall(r"^<!-- include: (src/scratchformer/[^ :]+)", text, re.M)
    assert sources and sources[0] == "src/scratchformer/paper.py", f"{page.name} starts with {sources[:1]}"
    model_code = [s for s in sources if s.startswith(("src/scratchformer/nn/", "src/scratchformer/models/"))]
    first_library = text.index(f"<!-- include: {model_code[0]}") if model_code else None
    if first_library is not None:
        headings = re.findall(r"^## (.*)$", text[:first_library], re.M)
        assert headings and headings[-1].startswith("What production adds"), (page.name, headings[-1:])


def test_the_index_links_every_page_and_the_readme_links_the_index():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    for page in PAGES:
        assert f"({page.name})" in index, f"docs/README.md does not link {page.name}"
    assert "docs/README.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_excerpt_tool_finds_functions_methods_and_constants():
    build = _build()
    assert build.excerpt("src/scratchformer/nn/masks.py", "causal_mask").startswith("def causal_mask(")
    method = build.excerpt("src/scratchformer/nn/layers.py", "ResidualNorm.forward")
    assert method.startswith("def forward(self") and "pre_norm" in method
    with pytest.raises(KeyError):
        build.excerpt("src/scratchformer/nn/masks.py", "no_such_function")


def _snippets(page: Path) -> list[str]:
    """The page's own ```python blocks (the "Try it" examples), not the excerpts included from the source."""
    return re.findall(r"(?<!-->\n)```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)


SNIPPETS = [(page, i, code) for page in PAGES for i, code in enumerate(_snippets(page))]


@pytest.mark.parametrize(("page", "index", "code"), SNIPPETS, ids=[f"{p.name}-{i}" for p, i, _ in SNIPPETS])
def test_every_try_it_example_runs_and_its_true_claims_hold(page, index, code, tmp_path, monkeypatch, capsys):
    """Each example runs as printed; a top-level ``print(expr)  # True ...`` line is also checked to print True."""
    monkeypatch.chdir(tmp_path)
    lines = code.splitlines()
    tree = ast.parse(code)
    checks = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
                and len(call.args) == 1 and re.search(r"#\s*True\b", lines[node.end_lineno - 1])):
            checks.append((node.lineno, ast.get_source_segment(code, call.args[0])))
    namespace: dict = {}
    exec(compile(tree, f"{page.name} example {index}", "exec"), namespace)
    capsys.readouterr()
    for lineno, expr in checks:
        value = eval(expr, namespace)
        assert bool(value) is True, f"{page.name} line {lineno} of the example claims True for {expr}"


def _transcripts() -> list[tuple[str, str, list[str]]]:
    """Console blocks that start with ``$ scratchformer explain ...``: (file, command, printed lines)."""
    found = []
    for page in [*PAGES, ROOT / "README.md"]:
        for block in re.findall(r"^```\w*\n(\$ scratchformer explain .*?)^```", page.read_text(encoding="utf-8"),
                                re.M | re.S):
            command, *printed = block.rstrip("\n").split("\n")
            found.append((page.name, command[2:], printed))
    return found


TRANSCRIPTS = _transcripts()


def test_the_pages_show_explain_output():
    assert len(TRANSCRIPTS) >= 4, [t[:2] for t in TRANSCRIPTS]


@pytest.mark.parametrize(("name", "command", "printed"), TRANSCRIPTS, ids=[f"{n}: {c}" for n, c, _ in TRANSCRIPTS])
def test_every_explain_transcript_is_what_the_command_prints(name, command, printed, capsys):
    """What a page shows after ``$ scratchformer explain ...`` is the command's real output; a ``...`` line
    stands for lines left out, and the pieces between must appear in order, line for line."""
    from scratchformer.app.cli import main

    assert main(shlex.split(command)[1:]) == 0
    captured = capsys.readouterr()
    actual = [line.rstrip() for line in (captured.err + captured.out).splitlines()]
    pieces, piece = [], []
    for line in printed:
        if line.strip() == "...":
            pieces.append(piece)
            piece = []
        else:
            piece.append(line.rstrip())
    pieces.append(piece)
    at = 0
    for piece in filter(None, pieces):
        starts = [i for i in range(at, len(actual) - len(piece) + 1) if actual[i:i + len(piece)] == piece]
        assert starts, f"{name}: `{command}` does not print:\n" + "\n".join(piece) + "\n--- it prints:\n" + \
            "\n".join(actual)
        at = starts[0] + len(piece)


def test_every_test_the_pages_name_exists():
    """The pages point readers at the tests that prove a claim; a renamed test must not leave a dead name."""
    defined = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        defined |= set(re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.M))
    for page in [*PAGES, DOCS / "README.md", ROOT / "README.md"]:
        for name in set(re.findall(r"`(test_\w+)`", page.read_text(encoding="utf-8"))):
            assert name in defined, f"{page.name} names {name}, which no test defines"


def test_the_readme_python_example_runs_and_its_cached_decoding_equals_the_full_pass():
    """The README's Python API block, run as written: models in eval mode, so the GPT's one-token-at-a-time
    logits with the KV cache equal its full forward pass (with dropout on they would not)."""
    import torch

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The Python API"):]
    block = re.search(r"```python\n(.*?)^```", section, re.M | re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert not namespace["model"].training and not namespace["gpt"].training
    torch.testing.assert_close(torch.cat(namespace["step_logits"], 1), namespace["logits"], atol=1e-5, rtol=1e-5)
    assert namespace["class_logits"].shape == (2, 2)
