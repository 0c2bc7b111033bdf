"""The walkthrough in docs/: code excerpts identical to the source, every page linked, every picture present."""

from __future__ import annotations

import importlib.util
import re
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
