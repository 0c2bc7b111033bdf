"""The walkthrough's pages as a sequence: each titled with its own number, each leading to the next by a footer, and
every relative link and #section in docs/ (pages, reference, index) pointing at something that exists."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("[0-9][0-9]-*.md"))
NUMBERS = [int(p.name[:2]) for p in PAGES]
FOOTER = re.compile(r"^Previous: .*?\]\(([^)#\s]+)\).* · Next: .*?\]\(([^)#\s]+)\)")


def _build():
    spec = importlib.util.spec_from_file_location("docs_build", DOCS / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pages_are_numbered_one_to_n_without_a_gap():
    assert NUMBERS == list(range(1, len(PAGES) + 1)), NUMBERS
    assert len(PAGES) >= 22


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_is_titled_with_its_own_file_number(page):
    first = page.read_text(encoding="utf-8").split("\n", 1)[0]
    found = re.match(r"# (\d+)\. \S", first)
    assert found, f"{page.name} starts with {first!r}, not '# N. Title'"
    assert int(found.group(1)) == int(page.name[:2]), f"{page.name} is titled {found.group(1)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_page_ends_with_a_footer_to_the_page_before_and_the_page_after(page):
    """The last line is 'Previous: [...](file) · Next: [...](file)': the index before page 1, and the next page's
    file after every page but the last (a reader who follows Next never lands back on the index mid-way)."""
    last = page.read_text(encoding="utf-8").rstrip("\n").rsplit("\n", 1)[-1]
    footer = FOOTER.match(last)
    assert footer, f"{page.name} ends with {last!r}, not a Previous/Next footer"
    previous, following = footer.groups()
    n = int(page.name[:2])
    assert previous == ("README.md" if n == 1 else PAGES[n - 2].name), (page.name, previous)
    if n < len(PAGES):
        assert following == PAGES[n].name, (page.name, following)
    assert "---" in page.read_text(encoding="utf-8").rstrip("\n").rsplit("\n", 3)[-3], page.name


DOCS_FILES = [p for p in _build().pages() if p.suffix == ".md"]


def test_the_link_check_covers_the_pages_the_reference_and_the_index():
    names = {p.relative_to(DOCS).as_posix() for p in DOCS_FILES}
    assert {"README.md", "deploying.md", "reference/commands.md"} <= names
    assert {p.name for p in PAGES} <= names


@pytest.mark.parametrize("page", DOCS_FILES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_relative_link_and_section_in_docs_resolves(page):
    """Files, and #sections as the heading slugs GitHub makes of them, on the same page or another."""
    assert not _build().broken_links(page), f"{page.relative_to(ROOT)}: {_build().broken_links(page)}"


def test_a_link_to_a_missing_section_fails_on_the_same_page_and_on_another(tmp_path):
    build = _build()
    (tmp_path / "16-x.md").write_text("# 16. X\n\n## Rotary scaling (Llama 3.1)\n\n## QK-norm\n", encoding="utf-8")
    page = tmp_path / "17-y.md"
    page.write_text("# 17. Y\n\n## Here\n\n[a](16-x.md#rotary-scaling-llama-31) [b](16-x.md#qk-norm) [c](#here)\n"
                    "[d](16-x.md#rotary-scaling) [e](#there)\n", encoding="utf-8")
    assert build.broken_links(page) == [
        "16-x.md#rotary-scaling (no heading #rotary-scaling in 16-x.md)",
        "#there (no heading #there in 17-y.md)"]


# Phrases the pages once said that were not true (a close read against the papers and the sources): they must not
# come back.
WRONG = {
    "docs/04-attention-and-masks.md": ["no longer the diagonal",
                                       "Two rules decide which keys a query may see (§3.2.3)"],
    "docs/09-three-families.md": ["Padding in front would be seen", "which GPT-2 changed:"],
    "docs/README.md": ["pages 12 to 19", "the paper's model and nothing else"],
    "docs/16-since-2017.md": ["add three changes to these", "smooth at 0 where ReLU has a kink",
                              "the positions past 128 are"],
    "docs/17-open-models.md": ["runs/llama-notes", "Llama 3 and Qwen3 have no pad token", "back to the index"],
    "docs/19-instructions.md": ["This is the bug in issues", "`count` is their number"],
    "docs/20-benchmarks.md": ["on MMLU only in the billions of weights", "five a problem, in file order"],
    "docs/21-serving.md": ["Penalties, log-probabilities, tools and several answers are refused"],
    "docs/22-preferences.md": ["cannot be lowered by making every answer more likely", "(120 steps of 8 pairs,"],
    "docs/deploying.md": ["--target llama-cli", "FROM ./shakespeare-q8_0.gguf"],
    "src/scratchformer/paper_train.py": ["scaled down to", "(page 5 of the"],
    "src/scratchformer/paper.py": ["page 2 of the walkthrough counts", "NaN spreads to every position"],
    "RESULTS.md": ["1.68x (619.5", "one pass (120 steps of 8 pairs)"],
}


@pytest.mark.parametrize("path", sorted(WRONG), ids=str)
def test_the_phrases_found_wrong_are_gone(path):
    text = " ".join((ROOT / path).read_text(encoding="utf-8").split())
    back = [phrase for phrase in WRONG[path] if phrase in text]
    assert not back, f"{path} says {back} again"
