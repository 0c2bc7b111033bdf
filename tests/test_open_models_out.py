"""Today's open models, out again and trained further: a random Llama (grouped-query, ``llama3`` rotary scaling) and a
random Qwen3 folder, each with a ``tokenizer.json`` written here, trained further with ``init_from=DIR``; the run
decodes, exports to ``transformers`` with equal logits, to GGUF with llama.cpp's greedy tokens equal (its llama and
qwen3 architectures, where llama.cpp is installed) and to ONNX with its cache, decoded by onnxruntime to the same
tokens."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.generation import generate
from test_open_models import V

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) makes the folders")
needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama.cpp checks need llama-cpp-python (pip install -e \".[llama]\")")
needs_ort = pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None or
                               importlib.util.find_spec("onnxscript") is None,
                               reason="the ONNX export needs the onnx extra (pip install -e \".[onnx]\")")
TEXT = "the quick brown fox jumps over the lazy dog, and then some more words\n" * 60


@pytest.fixture(scope="module")
def runs(shared_run, tmp_path_factory) -> dict[str, Path]:
    """name -> the run directory of 20 steps trained further from a folder (``train init_from=DIR``); ``folder`` -> the
    Llama folder (shared, read-only: ``shared_run("hf-open")``), ``text`` -> the text they train on."""
    root = tmp_path_factory.mktemp("open_models_out")
    folders = shared_run("hf-open")
    text = root / "text.txt"
    text.write_text(TEXT, encoding="utf-8")
    out = {"folder": folders / "llama_gqa_untied", "text": text}
    threads = torch.get_num_threads()  # num_threads=1 sets it; the tests after this fixture get it back
    try:
        for name, folder in (("llama", out["folder"]), ("qwen3", folders / "qwen3")):
            run = root / f"{name}-run"
            assert main(["train", "task=lm", f"init_from={folder}", "--data", str(text), "max_steps=20",
                         "eval_every=20", "max_len=32", "num_threads=1", "--quiet", "--out", str(run)]) == 0
            out[name] = run
        # LoRA with the Llama folder as its base: the run saves its adapters; every export merges them
        out["llama-lora"] = root / "llama-lora"
        assert main(["train", "task=lm", f"init_from={out['folder']}", "--data", str(text), "lora_rank=4", "lr=1e-2",
                     "max_steps=6", "eval_every=6", "max_len=32", "num_threads=1", "--quiet", "--out",
                     str(out["llama-lora"])]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("name", ["llama", "qwen3"])
def test_a_folder_trained_further_keeps_its_architecture_and_decodes(runs, name, capsys):
    run = runs[name]
    ckpt = load_checkpoint(run)
    cfg = ckpt.model_config
    assert (cfg.kv_heads, cfg.norm_type, cfg.activation) == (2, "rmsnorm", "swiglu")
    assert cfg.qk_norm == (name == "qwen3") and (cfg.rope_scaling is not None) == (name == "llama")
    assert ckpt.tokenizer.kind == "pretrained" and ckpt.step == 20
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert any(r["split"] == "val" and r["loss"] > 0 for r in rows)
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(run), "--prompt", "the quick", "--max-new-tokens", "8", "--greedy"]) == 0
    assert capsys.readouterr().out.startswith("the quick")


def test_init_from_refuses_a_model_setting_that_changes_the_architecture(runs, tmp_path, capsys):
    folder = runs["folder"]
    code = main(["train", "task=lm", f"init_from={folder}", "--data", str(runs["text"]),
                 "d_model=128", "max_len=32", "max_steps=2", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "fixes the architecture" in err and "d_model=128" in err


@pytest.mark.parametrize("name, hf_class", [("llama", "LlamaForCausalLM"), ("qwen3", "Qwen3ForCausalLM")])
def test_export_hf_loads_in_transformers_as_the_same_class_with_equal_logits(runs, tmp_path, name, hf_class):
    out = tmp_path / f"{name}-hf"
    assert main(["export", "--ckpt", str(runs[name]), "--format", "hf", "--out", str(out)]) == 0
    theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(theirs).__name__ == hf_class
    ours = load_checkpoint(runs[name]).model
    ids = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        torch.testing.assert_close(theirs(ids).logits, ours(ids), atol=1e-4, rtol=0)


@needs_llama
@pytest.mark.parametrize("name", ["llama", "qwen3", "llama-lora"])
def test_export_gguf_gives_llama_cpp_the_same_64_greedy_tokens(runs, tmp_path, name):
    from scratchformer.interop.llamacpp import llama_generate

    path = tmp_path / f"{name}.gguf"
    assert main(["export", "--ckpt", str(runs[name]), "--format", "gguf", "--out", str(path)]) == 0
    model = load_checkpoint(runs[name]).model
    prompts = torch.randint(4, V, (2, 8), generator=torch.Generator().manual_seed(2))
    expected = generate(model, prompts, 64).numpy()
    threads = torch.get_num_threads()  # llama.cpp's as torch's: one a worker under xdist (two spin on a busy core)
    assert np.array_equal(np.array(llama_generate(path, prompts.tolist(), 64, threads=threads)), expected)


@needs_ort
@pytest.mark.parametrize("name", ["llama", "qwen3", "llama-lora"])
def test_export_onnx_with_its_cache_decodes_the_same_tokens(runs, tmp_path, name, monkeypatch):
    out = tmp_path / f"{name}-onnx"
    assert main(["export", "--ckpt", str(runs[name]), "--format", "onnx", "--out", str(out)]) == 0
    monkeypatch.syspath_prepend(str(out))
    sys.modules.pop("onnx_decode", None)
    import onnx_decode

    model = load_checkpoint(runs[name]).model
    prompts = torch.randint(4, V, (2, 8), generator=torch.Generator().manual_seed(4))
    got = onnx_decode.generate(onnx_decode.CachedModel(out), prompts.numpy(), 32)
    assert np.array_equal(np.asarray(got), generate(model, prompts, 32).numpy())
    sys.modules.pop("onnx_decode", None)


def test_export_hf_straight_from_a_folder_says_so_in_its_model_card(runs, tmp_path):
    folder = runs["folder"]
    assert main(["export", "--ckpt", str(folder), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    assert f"from the Hugging Face folder `{folder.name}` (a `LlamaForCausalLM`)" in card and "0 steps" not in card


def test_lora_on_a_llama_folder_exports_its_merged_weights(runs, tmp_path):
    """LoRA with a Hugging Face folder as the base: the adapters alone are saved; the export holds W + (alpha/r) B A."""
    folder, out = runs["folder"], runs["llama-lora"]
    assert json.loads((out / "best" / "config.json").read_text())["lora"]["base"]["path"] == str(folder.resolve())
    merged = load_checkpoint(out).model
    base = load_checkpoint(folder).model
    ids = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert (merged(ids) - base(ids)).abs().max() > 1e-4  # the adapters trained
    assert main(["export", "--ckpt", str(out), "--format", "hf", "--out", str(tmp_path / "hf")]) == 0
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(ids).logits, merged(ids), atol=1e-4, rtol=0)
