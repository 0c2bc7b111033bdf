"""Saved runs of every family, made before the family registry (``tests/data/saved-runs/make.py``), still load and
give the outputs they gave then: a GPT, a GPT classifier saved as ``arch="gpt"`` with ``pooling="last"``, an encoder
classifier, a masked-token (MLM) run, an encoder-decoder, a ViT and a LoRA run on the GPT."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from scratchformer import load_model
from scratchformer.app.cli import main

SAVED = Path(__file__).parent / "data" / "saved-runs"
NAMES = ["gpt", "gpt-classifier", "encoder", "mlm", "seq2seq", "vit", "lora"]


@pytest.fixture(scope="module")
def runs(shared_run) -> Path:
    """The saved runs copied into a folder of their own, their stored paths (``RUNS/``) pointed at it: the shared
    ``saved_runs``, read only."""
    root = shared_run("saved_runs")
    assert all((root / name / "last").is_dir() for name in NAMES)
    return root


def outputs(name: str, model, inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if name == "seq2seq":
            return model(inputs, inputs[:, :5])
        if name == "mlm":
            return model.predict_tokens(inputs, None, inputs > 0)
        return model(inputs)


@pytest.mark.parametrize("name", NAMES)
def test_a_saved_run_gives_the_outputs_it_gave(runs, name):
    expected = load_file(str(SAVED / "expected" / f"{name}.safetensors"))
    model = load_model(runs / name)
    torch.testing.assert_close(outputs(name, model, expected["input"]), expected["output"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", [p.stem for p in sorted((SAVED / "expected").glob("*.json"))])
def test_a_saved_run_prints_what_it_printed(runs, name):
    saved = json.loads((SAVED / "expected" / f"{name}.json").read_text())
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main([str(runs / name) if a == "RUN" else a for a in saved["command"]]) == 0
    assert buffer.getvalue() == saved["stdout"]


def test_the_gpt_classifier_was_saved_as_a_gpt_with_last_token_pooling():
    """The old form of a GPT classifier's config, which must keep loading as one."""
    model = json.loads((SAVED / "gpt-classifier" / "last" / "config.json").read_text())["model"]
    assert (model["arch"], model["pooling"]) == ("gpt", "last")
