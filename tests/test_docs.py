"""The walkthrough and the reference in docs/: code excerpts identical to the source, every page linked, every
link and picture present, the "Try it" examples, the Python API block and the `$ scratchformer` transcripts
true, every named test real."""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import shlex
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))
REFERENCE = sorted((DOCS / "reference").glob("*.md"))


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


@pytest.mark.parametrize("page", [*PAGES, DOCS / "README.md", *REFERENCE], ids=lambda p: p.name)
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


def test_the_readme_and_the_index_link_every_reference_page():
    assert len(REFERENCE) >= 5
    readme, index = ((ROOT / "README.md").read_text(encoding="utf-8"), (DOCS / "README.md").read_text(encoding="utf-8"))
    for page in REFERENCE:
        assert f"(docs/reference/{page.name}" in readme, f"README.md does not link docs/reference/{page.name}"
        assert f"(reference/{page.name}" in index, f"docs/README.md does not link reference/{page.name}"


def test_the_readme_is_a_landing_page_of_at_most_15_kb():
    assert (ROOT / "README.md").stat().st_size <= 15_000


LINKED = [*_build().pages(), *(ROOT / name for name in _build().LINKED)]


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_link_is_broken(page):
    """Links and pictures to files that exist, and to #sections that are headings of the page they name."""
    assert page.exists(), f"{page.relative_to(ROOT)} is missing"
    assert not _build().broken_links(page), f"{page.relative_to(ROOT)}: {_build().broken_links(page)}"


def test_the_link_check_finds_a_missing_file_and_a_missing_section(tmp_path):
    build = _build()
    (tmp_path / "other.md").write_text("# Other\n\n## A section: `with code`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-section-with-code) [gone](nothing.md) [bad](other.md#no-such) [top](#page)\n"
                    "# Page\n```\n[in code](ignored.md)\n```\n", encoding="utf-8")
    assert build.broken_links(page) == ["nothing.md (no such file)", "other.md#no-such (no heading #no-such in "
                                        "other.md)"]


def test_the_excerpt_tool_finds_functions_methods_and_constants():
    build = _build()
    assert build.excerpt("src/scratchformer/nn/masks.py", "causal_mask").startswith("def causal_mask(")
    method = build.excerpt("src/scratchformer/nn/layers.py", "ResidualNorm.forward")
    assert method.startswith("def forward(self") and "pre_norm" in method
    with pytest.raises(KeyError):
        build.excerpt("src/scratchformer/nn/masks.py", "no_such_function")


def _snippets(page: Path) -> list[str]:
    """The page's own ```python blocks (the "Try it" examples), not the excerpts included from the source, below
    its "End of the first read" mark if it has one (``tests/test_first_read.py`` runs those above it, beside
    paper.py in an empty folder)."""
    text = page.read_text(encoding="utf-8").split("## End of the first read\n")[-1]
    return re.findall(r"(?<!-->\n)```python\n(.*?)```", text, re.S)


SNIPPETS = [(page, i, code) for page in PAGES for i, code in enumerate(_snippets(page))]


def _run_and_check_true_claims(code: str, name: str, namespace: dict) -> None:
    """Run ``code`` in ``namespace``; a top-level ``print(expr)  # True ...`` line must then print True."""
    lines = code.splitlines()
    tree = ast.parse(code)
    checks = []
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
                and len(call.args) == 1 and re.search(r"#\s*True\b", lines[node.end_lineno - 1])):
            checks.append((node.lineno, ast.get_source_segment(code, call.args[0])))
    exec(compile(tree, name, "exec"), namespace)
    for lineno, expr in checks:
        value = eval(expr, namespace)
        assert bool(value) is True, f"{name}, line {lineno}, claims True for {expr}"


@pytest.mark.parametrize(("page", "index", "code"), SNIPPETS, ids=[f"{p.name}-{i}" for p, i, _ in SNIPPETS])
def test_every_try_it_example_runs_and_its_true_claims_hold(page, index, code, tmp_path, monkeypatch, capsys):
    """Each example runs as printed; a top-level ``print(expr)  # True ...`` line is also checked to print True."""
    monkeypatch.chdir(tmp_path)
    _run_and_check_true_claims(code, f"{page.name} example {index}", {})


def _transcripts() -> list[tuple[str, str, list[str]]]:
    """Console blocks that start with ``$ scratchformer explain ...``: (file, command, printed lines)."""
    found = []
    for page in [*PAGES, *REFERENCE, ROOT / "README.md"]:
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
    for page in [*PAGES, *REFERENCE, DOCS / "README.md", ROOT / "README.md"]:
        for name in set(re.findall(r"`(test_\w+)`", page.read_text(encoding="utf-8"))):
            assert name in defined, f"{page.name} names {name}, which no test defines"


def test_the_readme_python_example_runs_and_its_cached_decoding_equals_the_full_pass():
    """The Python API block (docs/reference/python-api.md, once the README's), run as written: models in eval
    mode, so the GPT's one-token-at-a-time logits with the KV cache equal its full forward pass (with dropout
    on they would not)."""
    import torch

    section = (DOCS / "reference" / "python-api.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)^```", section, re.M | re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "python-api.md", "exec"), namespace)  # noqa: S102 - our own documentation
    assert not namespace["model"].training and not namespace["gpt"].training
    torch.testing.assert_close(torch.cat(namespace["step_logits"], 1), namespace["logits"], atol=1e-5, rtol=1e-5)
    assert namespace["class_logits"].shape == (2, 2)


# ------------------------------------------------- the `$ scratchformer` transcripts of the reference pages
# Each block that starts with `$ scratchformer` (but `explain`, checked above) is run, command by command, in
# an empty folder with an empty home folder; see docs/reference/verification.md, "The reference pages are run".

EXAMPLE_FILES = {"my_book.txt": "tinyshakespeare.txt"}  # a file a transcript names -> the shared data file it is


def _run_transcripts() -> list:
    build = _build()
    found = []
    for page in [*REFERENCE, *PAGES, ROOT / "README.md"]:
        for line, reason, steps in build.transcripts(page):
            if not steps[0][0].startswith("scratchformer explain "):
                found.append(pytest.param(page, reason, steps, id=f"{page.name}:{line}"))
    return found


RUN_TRANSCRIPTS = _run_transcripts()


class _Seen(BaseException):
    """Raised from the output once every shown line is printed: the command need not go on."""


class _Watch(io.TextIOBase):
    """Standard output and error together, with the home folder written ``~``; stops the command (``_Seen``)
    once ``shown`` is all printed, if ``stop``."""

    def __init__(self, home: Path, shown: list[str], stop: bool):
        self.home, self.shown, self.stop, self.parts = str(home), shown, stop, []

    def lines(self) -> list[str]:
        return [line.rstrip() for line in "".join(self.parts).replace(self.home, "~").splitlines()]

    def write(self, text: str) -> int:
        self.parts.append(text)
        if self.stop and "\n" in text and _build().unseen(self.shown, self.lines()) is None:
            raise _Seen
        return len(text)


def test_the_reference_pages_show_transcripts_and_each_not_run_one_says_why():
    assert sum(param.values[0].parent.name == "reference" for param in RUN_TRANSCRIPTS) >= 5
    for param in RUN_TRANSCRIPTS:
        page, reason, steps = param.values
        assert reason is None or reason.strip(), f"{page.name}: a transcript marked not run gives no reason"


def test_the_transcript_reader_takes_commands_lines_and_reasons_not_to_run(tmp_path):
    build = _build()
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- not run: trains for an hour -->\n```\n$ scratchformer train --preset multi30k\n"
                    "...\n```\n\n```\n$ scratchformer info runs/a\ncheckpoint: runs/a\n"
                    "$ scratchformer info runs/b\n```\n```\nscratchformer translate --ckpt runs/a abc\n```\n",
                    encoding="utf-8")
    assert build.transcripts(page) == [
        (5, "trains for an hour", [("scratchformer train --preset multi30k", ["..."])]),
        (10, None, [("scratchformer info runs/a", ["checkpoint: runs/a"]), ("scratchformer info runs/b", [])])]
    assert build.unseen(["a ... c", "...", "e"], ["x", "a b c", "d", "e"]) is None
    assert build.unseen(["a ... c", "e"], ["a b c", "d", "e"]) is not None  # not consecutive
    assert build.unseen(["e", "a"], ["a", "e"]) is not None  # not in order


@pytest.mark.parametrize(("page", "reason", "steps"), RUN_TRANSCRIPTS)
def test_every_transcript_prints_what_the_page_shows(page, reason, steps, tmp_path, monkeypatch):
    """Each command of the block runs in order; the lines shown after it must be what it prints (``...``: lines
    or part of a line left out). An error line shown means a non-zero exit, none a zero one. The block's last
    command is stopped as soon as everything shown is printed (a training run's start, without the training)."""
    from conftest import SHARED_DATA
    from scratchformer.app.cli import main

    if reason is not None:
        pytest.skip(f"marked not run in {page.name}: {reason}")
    for name, data in EXAMPLE_FILES.items():
        if any(name in command for command, _ in steps):
            if not (SHARED_DATA / data).exists():
                pytest.skip(f"{name} is {data}, not found in {SHARED_DATA} (set SCRATCHFORMER_DATA)")
            shutil.copyfile(SHARED_DATA / data, tmp_path / name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COLUMNS", "100")
    for variable in ("XDG_CACHE_HOME", "SCRATCHFORMER_CORPORA"):
        monkeypatch.delenv(variable, raising=False)
    for i, (command, shown) in enumerate(steps):
        watch = _Watch(home, shown, stop=i == len(steps) - 1 and any(line != "..." for line in shown))
        try:
            with redirect_stdout(watch), redirect_stderr(watch):
                code = main(shlex.split(command)[1:])
        except _Seen:
            continue
        printed = watch.lines()
        missing = _build().unseen(shown, printed)
        assert missing is None, f"{page.name}: `{command}` does not print\n" + "\n".join(missing) + \
            "\n--- it prints:\n" + "\n".join(printed)
        error = any(line.startswith("scratchformer: error:") for line in shown)
        assert (code != 0) == error, f"{page.name}: `{command}` exits with {code}"


def test_the_layout_page_names_every_module_and_folder_in_its_layer_s_order():
    """docs/reference/layout.md is the map: every top-level module and folder of the package, in the order of the
    layers (``RANKS``), and every file of ``nn/``, so a module added without a line there fails here."""
    from test_layers_import_direction import PACKAGE, RANKS

    page = (ROOT / "docs" / "reference" / "layout.md").read_text(encoding="utf-8")
    start = page.index("```\nsrc/scratchformer/") + 4
    block = page[start:page.index("```", start)].splitlines()[1:]
    top = [line.split()[0].rstrip("/").removesuffix(".py") for line in block if re.match(r"  \S", line)]
    package = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py")}
    package |= {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    assert sorted(top) == sorted(package), set(top) ^ package
    assert [RANKS[t] for t in top] == sorted(RANKS[t] for t in top), top
    nn = [line.split()[0] for line in block if re.match(r"    \S+\.py", line)]
    assert sorted(nn) == sorted(p.name for p in (PACKAGE / "nn").glob("*.py") if p.name != "__init__.py")
