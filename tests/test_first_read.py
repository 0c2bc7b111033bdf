"""The first read: one path from page 1 to a trained model, with ``paper.py`` and ``paper_train.py`` alone.

Pages 1 to 11 each mark the end of their first part with a heading, "End of the first read". Above it a page
speaks of ``paper.py`` (and its trainer) only, shows the code it explains, and ends with exercises whose
solutions are in ``docs/solutions/``; below it comes the library. The index lists the path in order with a
reading time, the README counts the exercises, and every snippet and solution runs in an empty folder beside
the two files, with torch and nothing of the library.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SOLUTIONS = DOCS / "solutions"
PAPER_FILES = [ROOT / "src" / "scratchformer" / "paper.py", ROOT / "src" / "scratchformer" / "paper_train.py"]
PAGES = sorted(p for p in DOCS.glob("[0-9][0-9]-*.md") if "01" <= p.name[:2] <= "11")
MARK = "## End of the first read\n"
EXERCISE = re.compile(r"^(?:#+ |\*\*)Exercise (\d+)\.(\d+)\b", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# The library's words (the list the first read is checked against), and more of the same kind
LIBRARY_WORDS = ["from scratchformer", "import scratchformer", "Seq2SeqTransformer", "EncoderClassifier",
                 "ResidualNorm", "FAMILY_DEFAULTS", "record_attention", "interop.paper", "from_paper",
                 "`scratchformer ", "scratchformer.", "the library", "nn/", "models/", "tests/", "`test_"]
# Pointers from the first part of a page to what comes after its mark
CROSSING = ["end of this page", "after the first read", "below the mark", "the rest of this page"]


def _parts(page: Path) -> tuple[str, str]:
    text = page.read_text(encoding="utf-8")
    assert text.count(MARK) == 1, f"{page.name}: {text.count(MARK)} marks"
    first, rest = text.split(MARK)
    return first, rest


def _exercises() -> dict[Path, list[str]]:
    """Each page -> the numbers of the exercises above its mark ("4.1", ...), in order."""
    return {page: [f"{n}.{m}" for n, m in EXERCISE.findall(_parts(page)[0])] for page in PAGES}


def _solution(page: Path) -> Path:
    return SOLUTIONS / f"{page.stem[:2]}_{page.stem[3:].replace('-', '_')}.py"


def test_pages_1_to_11_each_mark_the_end_of_their_first_read():
    """One mark per page; above it ``paper.py``'s code (``paper_train.py``'s on pages 10 and 11) and no library
    code; below it the library's excerpts under "What production adds", each introduced by words."""
    assert [p.name[:2] for p in PAGES] == [f"{i:02d}" for i in range(1, 12)]
    for page in PAGES:
        first, rest = _parts(page)
        sources = re.findall(r"^<!-- include: (\S+?)(?:::\S+)? -->", first, re.M)
        assert all(s in ("src/scratchformer/paper.py", "src/scratchformer/paper_train.py") for s in sources), page
        if "02" <= page.name[:2] <= "09":
            assert "src/scratchformer/paper.py" in sources, page.name
        if page.name[:2] in ("10", "11"):
            assert "src/scratchformer/paper_train.py" in sources, page.name
        assert "## What production adds" in rest and not EXERCISE.search(rest), page.name
        for marker in re.finditer(r"^<!-- include: (\S+) -->", rest, re.M):
            assert not rest[:marker.start()].rstrip().endswith("```"), f"{page.name}: {marker.group(1)} follows code"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_above_the_mark_a_page_speaks_of_paper_py_alone(page):
    """No library class, test, command or folder above the mark, and no pointer to what lies below it."""
    first, _ = _parts(page)
    found = [w for w in LIBRARY_WORDS if w in first]
    assert not found, f"{page.name} names {found} above its mark"
    prose = " ".join(FENCE.sub("", first).lower().split())
    assert not [c for c in CROSSING if c in prose], page.name


def test_the_prose_above_the_marks_is_under_8000_words_as_the_index_says():
    """Code blocks apart: a learner reads each line of code once, on the page that explains it."""
    words = sum(len(FENCE.sub("", _parts(page)[0]).split()) for page in PAGES)
    assert words < 8000, words
    assert "under 8,000 words" in (DOCS / "README.md").read_text(encoding="utf-8")


def test_the_readme_and_the_index_count_the_exercises_above_the_marks():
    exercises = _exercises()
    total = sum(len(numbers) for numbers in exercises.values())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"(\d+)\s+exercises", readme) == [str(total)], (re.findall(r"(\d+)\s+exercises", readme), total)
    assert re.findall(r"the\s+(\d+)\s+exercises", index) == [str(total)]
    assert all(len(numbers) >= (2 if "02" <= page.name[:2] <= "11" else 1) for page, numbers in exercises.items())
    # read as broadly as "a heading or a bold line that starts with Exercise", the count is the same
    broad = sum(len(re.findall(r"^(?:#+ *|\*\*)Exercise", _parts(page)[0], re.M)) for page in PAGES)
    assert broad == total, (broad, total)


def test_every_exercise_has_its_solution_and_no_parameter_count_is_asked_twice():
    for page, numbers in _exercises().items():
        n = int(page.name[:2])
        assert numbers == [f"{n}.{i}" for i in range(1, len(numbers) + 1)], (page.name, numbers)
        solution = _solution(page)
        assert f"](solutions/{solution.name})" in page.read_text(encoding="utf-8"), (page.name, solution.name)
        defined = re.findall(r"^def (exercise_\d+_\d+)\(", solution.read_text(encoding="utf-8"), re.M)
        assert defined == [f"exercise_{x.replace('.', '_')}" for x in numbers], (solution.name, defined)
    answers = re.findall(r"63_082_496", "".join(p.read_text(encoding="utf-8") for p in SOLUTIONS.glob("*.py")))
    assert len(answers) == 1  # the base model is counted once (exercise 8.1), not on page 2 as well


def test_the_pages_show_each_definition_of_paper_py_once_above_their_marks():
    """Every top-level function and class of paper.py is on exactly one page, above its mark, and no other excerpt
    of paper.py repeats part of it: a learner reads each line once on the pages (then the file whole)."""
    shown = [name for page in PAGES for name in
             re.findall(r"^<!-- include: src/scratchformer/paper\.py::([\w.]+) -->", _parts(page)[0], re.M)]
    tree = ast.parse(PAPER_FILES[0].read_text(encoding="utf-8"))
    defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert sorted(shown) == sorted(defined), (sorted(shown), sorted(defined))


def test_one_exercise_writes_attention_from_a_blank_page_checked_against_paper_py():
    texts = [m.group(0) for page in PAGES
             for m in re.finditer(r"^\*\*Exercise.*?(?=\n\n)", _parts(page)[0], re.M | re.S)]
    blank = [t for t in texts if "attention" in t and re.search(r"\bblank\b|\byourself\b", t)]
    assert blank, "no exercise asks for attention written from a blank page"
    solution = (SOLUTIONS / "05_multi_head_attention.py").read_text(encoding="utf-8")
    assert "paper.attention(" in solution and "paper.MultiHeadAttention(" in solution


def _time_stated(text: str) -> float:
    hours = {"one": 1, "two": 2, "three": 3, "four": 4}
    m = re.search(r"Reading\s+time:\s+about\s+(\w+)\s+hours?", text)
    assert m, "the index gives no reading time"
    return 60.0 * hours[m.group(1)]


def test_the_index_shows_the_first_read_as_one_ordered_list_with_its_reading_time():
    """docs/README.md opens with the first read: pages 1, 2 to 9, paper.py whole, pages 10 and 11, the run, as one
    numbered list; the reading time it gives is what its stated rates make of the words and lines of code."""
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    assert re.findall(r"^## (.*)$", index, re.M)[0] == "The first read"
    section = index.split("\n## ")[1]
    items = re.findall(r"^(\d+)\. (.*?)(?=^\d+\. |^```|\Z)", section, re.M | re.S)
    assert [int(n) for n, _ in items] == list(range(1, len(items) + 1)) and len(items) == 5, [n for n, _ in items]
    order = ["(01-big-picture.md)", "(02-tokens-and-embeddings.md)", "(09-three-families.md)",
             "(../src/scratchformer/paper.py)", "(10-training.md)", "(11-decoding.md)", "python paper_train.py"]
    body = "".join(text for _, text in items)
    at = [body.index(s) for s in order]
    assert at == sorted(at), order
    assert "150 words a minute" in section and "10 lines a minute" in section
    words = sum(len(FENCE.sub("", _parts(page)[0]).split()) for page in PAGES)
    code = sum(len(block.splitlines()) - 2 for page in PAGES for block in FENCE.findall(_parts(page)[0]))
    whole = len(PAPER_FILES[0].read_text(encoding="utf-8").splitlines())
    minutes = words / 150 + (code + whole) / 10
    assert abs(minutes - _time_stated(section)) <= 0.25 * minutes, (minutes, _time_stated(section))
    for picture in ("figures/model_map.png", "figures/training_step.png"):
        assert f"]({picture})" in section, picture


def test_no_page_says_paper_py_follows_the_order_of_the_papers_sections():
    """paper.py (and the pages) follow the data through Figure 1: embeddings, positions, attention, ..., not
    §3.1 to §3.5."""
    for path in [PAPER_FILES[0], DOCS / "README.md", ROOT / "README.md", *PAGES]:
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert not re.search(r"paper's order|order is the paper's|section by section", text), path.name
    assert "order in which data flows through Figure 1" in " ".join(PAPER_FILES[0].read_text().split())


# ------------------------------------------------- run in an empty folder, beside paper.py and paper_train.py


def _claims(code: str) -> list[str]:
    """``assert`` lines for the top-level ``print(expr)  # True ...`` lines of ``code``."""
    lines, checks = code.splitlines(), []
    for node in ast.parse(code).body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"
                and len(call.args) == 1 and re.search(r"#\s*True\b", lines[node.end_lineno - 1])):
            expr = ast.get_source_segment(code, call.args[0])
            checks.append(f"assert bool({expr}) is True, {('claims True: ' + expr)!r}")
    return checks


STAGE = re.compile(r"^<!-- stage (\d+) of (\d+) -->\n```python\n(.*?)^```", re.M | re.S)
SNIPPET = re.compile(r"(?<!-->\n)```python\n(.*?)^```", re.M | re.S)


def _programs(page: Path) -> list[str]:
    """The page's first-read code as programs: each snippet alone, with its ``# True`` claims checked at its end;
    the stages of attention (page 4) as one program, each stage's claims checked after it, then its result."""
    first, _ = _parts(page)
    programs = [code + "\n" + "\n".join(_claims(code)) + "\n" for code in SNIPPET.findall(first)]
    stages = STAGE.findall(first)
    if stages:
        assert [(int(n), int(total)) for n, total, _ in stages] == [(i, 5) for i in range(1, 6)]
        program = "".join(code + "\n" + "\n".join(_claims(code)) + "\n" for _, _, code in stages)
        program += ("assert tuple(y.shape) == (T, C) and H > 1 and tuple(weights.shape) == (H, T, T)\n"
                    "assert isinstance(mha, paper.MultiHeadAttention)\n")
        programs.append(program)
    return programs


FIRST_READ_CODE = [p for p in PAGES if _programs(p)]


@pytest.fixture(scope="module")
def torch_alone(tmp_path_factory):
    """One Python with torch and nothing of the library, which runs every snippet and solution of this module, each
    in its own empty folder (``torch_alone.py``: the point is the folder and the missing library, not a process
    each)."""
    from torch_alone import TorchAlone

    interpreter = TorchAlone(tmp_path_factory.mktemp("torch-alone"))
    yield interpreter
    interpreter.close()


def _empty_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "first-read"
    folder.mkdir()
    for source in PAPER_FILES:
        shutil.copy(source, folder / source.name)
    return folder


def test_the_pages_have_first_read_code_to_run():
    assert {p.name[:2] for p in FIRST_READ_CODE} >= {"04", "05"}


@pytest.mark.parametrize("page", FIRST_READ_CODE, ids=lambda p: p.name)
def test_every_first_read_snippet_runs_in_an_empty_folder_with_torch_alone(page, tmp_path, torch_alone):
    """Copied into a folder that holds only paper.py and paper_train.py, with every ``scratchformer`` import made
    to fail, each snippet above the mark runs and its ``# True`` claims hold."""
    folder = _empty_folder(tmp_path)
    names = []
    for i, program in enumerate(_programs(page)):
        names.append(f"{page.stem[:2]}_snippet_{i}.py")
        (folder / names[-1]).write_text(program, encoding="utf-8")
    done = torch_alone.run(folder, names)
    assert done.returncode == 0, done.stderr[-3000:]


SOLUTION_FILES = sorted(SOLUTIONS.glob("[0-9][0-9]_*.py"))


def test_every_page_of_the_first_read_has_its_solution_file():
    assert [s.name[:2] for s in SOLUTION_FILES] == [p.name[:2] for p in PAGES]


TRAINS = {"08", "10", "11"}  # solutions that train the copy task (a minute or so each on 2 quiet cores)


@pytest.mark.parametrize("solution", [pytest.param(s, marks=pytest.mark.slow) if s.name[:2] in TRAINS else s
                                      for s in SOLUTION_FILES], ids=lambda p: p.name)
def test_every_solution_runs_in_an_empty_folder_and_answers_each_exercise(solution, tmp_path, torch_alone):
    """``python NN_page.py`` beside paper.py and paper_train.py, torch alone: it exits 0, so every assert holds,
    and prints one answer per exercise of its page, in order."""
    page = next(p for p in PAGES if p.name[:2] == solution.name[:2])
    folder = _empty_folder(tmp_path)
    shutil.copy(solution, folder / solution.name)
    done = torch_alone.run(folder, [solution.name])
    assert done.returncode == 0, done.stderr[-3000:]
    answered = re.findall(r"^Exercise (\d+\.\d+): ", done.stdout, re.M)
    assert answered == _exercises()[page], (answered, _exercises()[page])
