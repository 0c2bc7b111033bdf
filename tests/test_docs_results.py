"""results/ and bench/ as the pages name them: every path RESULTS.md, the README and the docs cite exists,
results/ stays small and indexed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "RESULTS.md", ROOT / "bench" / "README.md", ROOT / "results" / "README.md",
         *sorted((ROOT / "docs").rglob("*.md"))]
# Scripts RESULTS.md names as removed once their answers were recorded (they are in the history).
REMOVED = {"bench/sst2_tuning.py", "bench/sst2_seeds.py", "bench/sst2_baseline.py"}
PATH = re.compile(r"(?<![\w./-])(?:\.\./)*((?:results|bench)/[\w./-]*)")


def _cited(page: Path) -> set[str]:
    """The results/ and bench/ paths a page names (in text, code or links), placeholders like NAME left out."""
    found = set()
    for path in PATH.findall(page.read_text(encoding="utf-8")):
        path = path.rstrip(".")
        if not re.search(r"[A-Z]{3,}|_$", path):
            found.add(path)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_results_and_bench_path_a_page_names_exists(page):
    missing = sorted(p for p in _cited(page) if not (ROOT / p).exists() and p not in REMOVED)
    assert not missing, f"{page.relative_to(ROOT)} names {missing}, which do not exist"


def test_the_path_finder_sees_paths_in_text_links_and_commands():
    page_text = ("see [`a`](../results/copy/curves.png), `python bench/speed/train_speed.py --x`, "
                 "results/NAME/config.json and results/bench/classify_speed_")
    assert set(PATH.findall(page_text)) == {"results/copy/curves.png", "bench/speed/train_speed.py",
                                           "results/NAME/config.json", "results/bench/classify_speed_"}


def test_results_stay_under_400_kb():
    size = sum(f.stat().st_size for f in (ROOT / "results").rglob("*") if f.is_file())
    assert size < 400_000, f"results/ holds {size:,} bytes: shrink or drop what RESULTS.md does not cite"


def test_every_folder_of_results_is_in_its_index_and_cited():
    """Each folder is listed in results/README.md and cited by RESULTS.md, the README or the docs (by its name or
    a path inside it: a run's folder holds its ``config.json`` and ``eval.json`` beside what the page shows)."""
    index = (ROOT / "results" / "README.md").read_text(encoding="utf-8")
    cited = {c.rstrip("/") for page in PAGES if page != ROOT / "results" / "README.md" for c in _cited(page)}
    cited = {c for c in cited if c.count("/") >= 1}
    for folder in sorted(p for p in (ROOT / "results").iterdir() if p.is_dir()):
        assert f"]({folder.name}/)" in index, f"results/README.md does not list {folder.name}/"
        assert any(c == f"results/{folder.name}" or c.startswith(f"results/{folder.name}/") for c in cited), \
            f"results/{folder.name}/ is named by no page (RESULTS.md, the README, the docs): cite it or drop it"
