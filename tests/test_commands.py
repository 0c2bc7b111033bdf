"""The inference commands on small trained checkpoints: translate, classify, generate, evaluate, export, plot."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

import scratchformer
from scratchformer.app.cli import main


@pytest.fixture(scope="module")
def runs(shared_run) -> dict[str, Path]:
    """Four tiny trained runs, shared (``shared_runs.py``): a copy model, a character-level LM, a classifier and a
    translator. Read only: no test here writes into them."""
    return {"copy": shared_run("copy"), "lm": shared_run("lm"), "clf": shared_run("classifier"),
            "mt": shared_run("translator")}


def test_load_model_returns_an_eval_mode_model(runs):
    model = scratchformer.load_model(str(runs["copy"]))
    assert isinstance(model, scratchformer.Seq2SeqTransformer) and not model.training


def test_translate_from_arguments_file_and_stdin(runs, capsys, tmp_path, monkeypatch):
    inputs = ["abcd", "jihgfe", "aaab"]
    assert main(["translate", "--ckpt", str(runs["copy"]), *inputs, "--beam", "1"]) == 0
    greedy = capsys.readouterr().out.splitlines()
    assert len(greedy) == 3
    assert sum(g == i for g, i in zip(greedy, inputs)) >= 2  # a copy model copies
    f = tmp_path / "in.txt"
    f.write_text("\n".join(inputs) + "\n")
    assert main(["translate", "--ckpt", str(runs["copy"]), "--input", str(f)]) == 0
    beam = capsys.readouterr().out.splitlines()
    assert len(beam) == 3
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(inputs)))
    assert main(["translate", "--ckpt", str(runs["copy"])]) == 0
    assert capsys.readouterr().out.splitlines() == beam  # same inputs, same outputs, same order


def test_classify_prints_label_and_probability(runs, capsys):
    assert main(["classify", "--ckpt", str(runs["clf"]), "good fun 3", "bad dull 9"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for line in lines:
        label, prob = line.split("\t")
        assert label in ("neg", "pos") and 0.5 <= float(prob) <= 1.0


def test_generate_continues_the_prompt(runs, capsys):
    assert main(["generate", "--ckpt", str(runs["lm"]), "--prompt", "to be", "--max-new-tokens", "20",
                 "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("to be") and 5 < len(out.rstrip("\n")) <= 25  # 20 new tokens (special ones print as "")
    assert main(["generate", "--ckpt", str(runs["lm"]), "--prompt", "to be", "--max-new-tokens", "20",
                 "--seed", "1"]) == 0
    assert capsys.readouterr().out == out  # reproducible with a seed


@pytest.mark.parametrize("argv,needle", [
    (["generate", "--ckpt", "{copy}", "--prompt", "hi"], "needs a language model"),
    (["classify", "--ckpt", "{lm}", "text"], "needs a classifier"),
    (["translate", "--ckpt", "{clf}", "text"], "needs an encoder-decoder"),
    (["generate", "--ckpt", "{lm}", "--prompt", "Zebra!"], "vocabulary has no"),
    (["translate", "--ckpt", "{copy}", "--input", "{empty}"], "is empty"),
    (["evaluate", "--ckpt", "{copy}", "--split", "train2"], "no 'train2' split"),
    (["export", "--ckpt", "{copy}", "--format", "onnx", "--out", "{existing}"], "exists"),
])
def test_bad_inference_input_fails_with_one_line(runs, capsys, tmp_path, argv, needle):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    existing = tmp_path / "model.onnx"
    existing.write_text("keep")
    names = {k: str(v) for k, v in runs.items()} | {"empty": str(empty), "existing": str(existing)}
    code = main([a.format(**names) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("scratchformer: error:") and needle in err, err
    assert existing.read_text() == "keep"


def test_evaluate_reports_json_metrics(runs, capsys):
    assert main(["evaluate", "--ckpt", str(runs["copy"])]) == 0
    copy = json.loads(capsys.readouterr().out)
    assert copy["split"] == "test" and copy["examples"] == 50 and 0.0 <= copy["exact_match"] <= 1.0
    assert main(["evaluate", "--ckpt", str(runs["mt"]), "--split", "val", "--beam", "2"]) == 0
    mt = json.loads(capsys.readouterr().out)
    assert {"bleu", "chrf", "bleu_signature", "chrf_signature", "beam", "greedy"} <= mt.keys()
    assert mt["beam"]["beam_size"] == 2 and "nrefs:1" in mt["bleu_signature"]
    assert main(["evaluate", "--ckpt", str(runs["clf"]), "--split", "val"]) == 0
    clf = json.loads(capsys.readouterr().out)
    assert {"accuracy", "f1", "loss"} <= clf.keys()
    assert main(["evaluate", "--ckpt", str(runs["lm"]), "--split", "val"]) == 0
    lm = json.loads(capsys.readouterr().out)
    assert lm["perplexity"] == pytest.approx(torch.tensor(lm["loss"]).exp().item(), rel=1e-4)


def test_evaluate_several_classifiers_as_an_ensemble(runs, capsys):
    assert main(["evaluate", "--ckpt", str(runs["clf"]), "--split", "val"]) == 0
    single = json.loads(capsys.readouterr().out)
    # the same model twice: the mean of identical probabilities is those probabilities
    assert main(["evaluate", "--ckpt", str(runs["clf"]), str(runs["clf"]), "--split", "val"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["examples"] == single["examples"] and len(both["members"]) == 2
    assert both["accuracy"] == single["accuracy"] and both["f1"] == single["f1"]
    assert both["loss"] == pytest.approx(single["loss"], rel=1e-4)
    assert all(m["accuracy"] == single["accuracy"] for m in both["members"])
    # a language model cannot vote on labels: one line, no traceback
    assert main(["evaluate", "--ckpt", str(runs["clf"]), str(runs["lm"])]) != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "a classifier" in err.splitlines()[-1], err


@pytest.mark.slow
def test_export_and_plot_commands_write_files(runs, shared_run, capsys, tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime is a dependency of the export command")
    out = tmp_path / "copy.onnx"
    assert main(["export", "--ckpt", str(runs["copy"]), "--format", "onnx-single", "--out", str(out)]) == 0
    assert out.stat().st_size > 1000
    # --format onnx: the graphs with the KV cache, in a folder; the shared export (made once, by the same command
    # on the same run: ``shared_runs._make_copy_onnx``, which test_onnx_cache.py decodes)
    folder = shared_run("copy_onnx")
    assert {"encoder.onnx", "decoder.onnx", "manifest.json", "onnx_decode.py"} <= {p.name for p in folder.iterdir()}
    ts = tmp_path / "lm.pt"
    assert main(["export", "--ckpt", str(runs["lm"]), "--format", "torchscript", "--out", str(ts)]) == 0
    assert ts.is_file()
    for argv in (["attention", "--ckpt", str(runs["copy"]), "--text", "abcd"],
                 ["attention", "--ckpt", str(runs["lm"]), "--text", "to be or"],
                 ["positions", "--max-len", "50", "--d-model", "64"],
                 ["schedule", "--preset", "multi30k"],
                 ["curves", "--run", str(runs["copy"])]):
        png = tmp_path / f"{argv[0]}-{len(list(tmp_path.iterdir()))}.png"
        assert main(["plot", *argv, "--out", str(png)]) == 0, capsys.readouterr().err
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_output_into_a_closed_pipe_ends_quietly():
    """`scratchformer ... | head -1`: once the reader is gone, the command stops without a traceback or an
    error message (exit status 141, as a shell reports SIGPIPE)."""
    import subprocess
    import sys

    # a process of its own: the test is about the exit status a process gets from SIGPIPE
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "explain", "--preset", "copy"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader leaves before the first line is written
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert stderr == ""


def test_evaluate_refuses_a_settings_word_among_its_files_in_one_line(tmp_path, capsys):
    """``evaluate --data FILE key=value`` once read the word as a second file and named --test in its error."""
    text = tmp_path / "val.txt"
    text.write_text("some text\n")
    assert main(["evaluate", "--ckpt", str(tmp_path / "run"), "--data", str(text), "num_threads=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "evaluate takes no settings (num_threads=1)" in err and "--test" not in err
