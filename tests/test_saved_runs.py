"""Run directories written by the first release (0.1.0) still load, decode, evaluate and resume.

``tests/data/run-lm-0.1.0`` is a tiny character-level GPT trained for 6 steps by that release on the text that
``tiny_text`` makes (its data path is stored as ``DATA/tiny.txt``, put back where the test writes the text).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from scratchformer import GPT, load_model
from scratchformer.app.cli import main

FIXTURE = Path(__file__).parent / "data" / "run-lm-0.1.0"


def tiny_text() -> str:
    rng = random.Random(0)
    words = "the a cat dog sat on mat ran to house and saw big small red blue bird sang".split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))).capitalize() + "." for _ in range(600)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def old_run(tmp_path, monkeypatch):
    monkeypatch.setenv("SCRATCHFORMER_CORPORA", str(tmp_path / "corpora"))
    (tmp_path / "tiny.txt").write_text(tiny_text())
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    for file in run.rglob("config.json"):
        file.write_text(file.read_text().replace("DATA/", f"{tmp_path}/"))
    return run


def test_an_old_run_loads_and_decodes(old_run, capsys):
    model = load_model(old_run)
    assert isinstance(model, GPT) and model.config.vocab_size == 34
    assert main(["info", str(old_run)]) == 0
    assert "step 6" in capsys.readouterr().out
    assert main(["generate", "--ckpt", str(old_run), "--prompt", "The cat", "--greedy", "--max-new-tokens", "5"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("The cat") and len(text.rstrip("\n")) == len("The cat") + 5


def test_an_old_run_evaluates_on_a_file(old_run, capsys):
    data = old_run.parent / "tiny.txt"
    assert main(["evaluate", "--ckpt", str(old_run), "--data", str(data)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["split"] == "test" and result["examples"] == len(data.read_text()) - 1
    assert 0 < result["loss"] < 4


def test_an_old_run_resumes(old_run, capsys):
    assert main(["train", "--resume", "--out", str(old_run), "max_steps=8", "--quiet"]) == 0
    rows = [json.loads(line) for line in (old_run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["split"], r["step"]) for r in rows if r["split"] == "val"] == [("val", 3), ("val", 6), ("val", 8)]
    assert json.loads((old_run / "last" / "config.json").read_text())["step"] == 8
