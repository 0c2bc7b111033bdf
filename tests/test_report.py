"""``scratchformer report --ckpt RUN``: one page of what a run was and how it scored, written beside it and nothing
else; its command makes the same run again; a folder that is not a run is refused in one line."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest
import torch

import shared_runs
from scratchformer.app.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny character-level GPT trained from its own folder, as a user trains one (its files named from there: the
    report names them as given); a benchmark's scores are written into it."""
    root = tmp_path_factory.mktemp("report")
    (root / "text.txt").write_text(shared_runs.TEXT, encoding="utf-8")
    here, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(root)  # as a user runs it: in a folder, naming its files from there (the report names them so)
    try:
        assert main(["train", "task=lm", "--data", "text.txt", *shared_runs.TINY, "max_len=48", *shared_runs.QUICK,
                     "--out", "run"]) == 0
        questions = root / "mine.jsonl"
        questions.write_text(json.dumps({"context": "to be or not to", "choices": ["be", "question"], "answer": 0})
                             + "\n")
        assert main(["evaluate", "--ckpt", "run", "--benchmark", str(questions)]) == 0
    finally:
        os.chdir(here)
        torch.set_num_threads(threads)
    return root / "run"


def data_of(run: Path) -> Path:
    return Path(json.loads((run / "config.json").read_text())["data"]["train"][0])


def test_the_page_says_what_was_trained_on_what_where_how_it_scored_and_how_to_make_it_again(run, capsys,
                                                                                            monkeypatch):
    monkeypatch.chdir(run.parent)  # written where the run was started
    before = sorted(p.name for p in run.iterdir())
    assert main(["report", "--ckpt", str(run)]) == 0
    assert f"wrote {run / 'report.md'}" in capsys.readouterr().out
    assert sorted(p.name for p in run.iterdir()) == sorted([*before, "report.md", "report"])  # nothing else
    assert sorted(p.name for p in (run / "report").iterdir()) == ["benchmarks.png", "training.png"]
    page = (run / "report.md").read_text()
    config = json.loads((run / "config.json").read_text())
    for words in (f"{config['parameters']:,} parameters", "| `d_model` | 32 |", "command line: ", "## Data",
                  "text.txt", "## Where and when", "torch: ", "## Curves", "(report/training.png)",
                  "## Final metrics", "validation, best", "## Benchmarks", "| mine |", "(report/benchmarks.png)",
                  "## Samples", "the model's continuation", "## Make it again"):
        assert words in page, words
    import hashlib

    digest = hashlib.sha256(data_of(run).read_bytes()).hexdigest()
    assert f"`{digest}`" in page
    assert str(run.parent) not in page  # it names no folder of this machine: the run and its data by their names
    again = page.split("## Make it again")[1].split("```")[1].strip().splitlines()
    assert len(again) == 1 and " --data text.txt " in again[0] and again[0].endswith(" --out run")  # as given
    assert str(data_of(run).parent) not in page
    assert config["environment"]["torch"] and config["environment"]["device"].startswith("cpu")


def test_its_command_makes_the_same_run(run, tmp_path, capsys, monkeypatch):
    """Run from the folder the run was started in (its ``started`` folder), the command trains the same run."""
    from scratchformer.app.report_runs import reproduce_command

    config = json.loads((run / "config.json").read_text())
    words = shlex.split(reproduce_command(run, config))
    assert words[:2] == ["scratchformer", "train"] and words[-2:] == ["--out", "run"]
    assert config["started"]["folder"] == str(run.parent)
    monkeypatch.chdir(config["started"]["folder"])
    assert main([*words[1:-1], str(tmp_path / "again"), "--quiet"]) == 0
    again = json.loads((tmp_path / "again" / "config.json").read_text())
    assert again["settings"] == config["settings"] and again["data"] == config["data"]
    capsys.readouterr()


def test_a_checkpoint_inside_a_run_is_its_run_and_missing_data_is_said(run, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    config = json.loads((copy / "config.json").read_text())
    config["data"] = {"train": [str(tmp_path / "gone.txt")]}
    (copy / "config.json").write_text(json.dumps(config))
    assert main(["report", "--ckpt", str(copy / "best")]) == 0
    page = (copy / "report.md").read_text()
    assert "not found here" in page and "the run's data is not here" in page
    capsys.readouterr()


def test_a_folder_that_is_not_a_run_is_refused_in_one_line(run, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "nowhere", run / "report"):
        assert main(["report", "--ckpt", str(folder)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "is not a training run" in err and "Traceback" not in err, err
    assert not (tmp_path / "empty" / "report.md").exists()
