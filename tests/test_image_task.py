"""task=image from the command line: a folder of class sub-folders trains a ViT; classify reads image files;
evaluate --data scores a folder; the run resumes without a tokenizer; what a user gets wrong ends in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scratchformer.app.cli import main
from shared_runs import VIT, sides

pytest.importorskip("PIL.Image", reason="images need Pillow (pip install -e \".[images]\")")


def one_line_error(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    for word in words:
        assert word in last, last
    return last


@pytest.fixture(scope="module")
def trained(shared_run) -> tuple[Path, Path]:
    """(run directory, data folder): the shared ``vit`` (``shared_runs``), a ViT trained 60 steps on ``sides``'s
    images (24 a class in ``train``, 6 a class in ``test``), read only."""
    root = shared_run("vit")
    return root / "run", root


@pytest.mark.slow
def test_a_folder_of_classes_trains_and_classify_reads_image_files(trained, capsys):
    run, root = trained
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["arch"] == "vit"
    assert config["splits"]["train"]["size"] == "44 images"  # 48 less 2 of each class
    assert "8 x 8 images with 3 channels in 4 patches of 4 x 4" in config["summary"][0]
    assert not (run / "best" / "tokenizer.json").exists()
    assert json.loads((run / "best" / "config.json").read_text())["labels"] == ["left", "right"]
    files = [root / "test" / "right" / "1.png", root / "test" / "left" / "2.jpg", root / "test" / "left" / "3.png"]
    capsys.readouterr()
    assert main(["classify", "--ckpt", str(run), *map(str, files)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["right", "left", "left"]
    assert all(0.5 < float(line.split("\t")[1]) <= 1 for line in lines)


@pytest.mark.slow
def test_evaluate_scores_a_folder_and_the_runs_own_test_split(trained, capsys):
    run, root = trained
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    test = [m for m in logged if m["split"] == "test"][-1]
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(run)]) == 0
    own = json.loads(capsys.readouterr().out)
    assert own["examples"] == 12 and own["accuracy"] == pytest.approx(test["accuracy"])
    assert own["loss"] == pytest.approx(test["loss"], rel=1e-5)
    assert main(["evaluate", "--ckpt", str(run), "--data", str(root / "train")]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["examples"] == 48 and scored["accuracy"] >= 0.9  # all of the folder, its own training images too
    assert main(["info", str(run)]) == 0
    info = capsys.readouterr().out
    assert "model: ViT" in info and "input: 8 x 8 images" in info and "vocab_size" not in info


@pytest.mark.slow
def test_an_image_run_resumes_and_extends(tmp_path, capsys):
    data = sides(tmp_path / "data", 8)
    run = tmp_path / "run"
    args = ["train", "task=image", "--data", str(data), *VIT]
    assert main([*args, "max_steps=20", "--out", str(run)]) == 0
    assert main(["train", "--out", str(run), "--resume", "max_steps=40"]) == 0
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(steps) == 40 and json.loads((run / "last" / "config.json").read_text())["step"] == 40


def test_bad_images_and_wrong_inputs_end_in_one_line(tmp_path, capsys):
    data = sides(tmp_path / "data", 3)
    broken = data / "left" / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 20)
    run = tmp_path / "run"
    code = main(["train", "task=image", "--data", str(data), *VIT, "max_steps=2", "--out", str(run)])
    one_line_error(capsys, code, str(broken), "is not a readable PNG or JPEG image")
    assert not (run / "best").exists()
    table = tmp_path / "rows.csv"
    table.write_text("a,b\n")
    code = main(["train", "task=image", "--data", str(table), *VIT, "--out", str(tmp_path / "r2")])
    one_line_error(capsys, code, "rows.csv is a file; task=image takes a folder with one sub-folder")
    code = main(["train", "task=image", "dataset=sst2", *VIT, "--out", str(tmp_path / "r3")])
    one_line_error(capsys, code, "dataset 'sst2' cannot be used for task=image", "digits")
    code = main(["train", "task=classify", "augment_shift=1", "--out", str(tmp_path / "r4")])
    one_line_error(capsys, code, "augment_shift works with task=image")


@pytest.mark.slow
def test_commands_for_text_refuse_an_image_classifier_in_one_line(trained, tmp_path, capsys):
    run, root = trained
    image = str(root / "test" / "left" / "1.png")
    one_line_error(capsys, main(["generate", "--ckpt", str(run), "--prompt", "hi"]), "image classifier (ViT)")
    one_line_error(capsys, main(["plot", "attention", "--ckpt", str(run), "--text", "hi", "--out",
                                 str(tmp_path / "a.png")]), "needs --image FILE")
    one_line_error(capsys, main(["explore", "--ckpt", str(run)]), "plot attention --ckpt RUN --image FILE")
    one_line_error(capsys, main(["export", "--ckpt", str(run), "--format", "hf", "--out", str(tmp_path / "hf")]),
                   "image classifier (ViT)", "no --format hf export")
    one_line_error(capsys, main(["classify", "--ckpt", str(run), str(tmp_path / "none.png")]), "none.png: no such file")
    assert main(["plot", "attention", "--ckpt", str(run), "--image", image, "--out", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
