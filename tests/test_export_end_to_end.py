"""A model trained through the CLI goes through both exports and writes the same text in PyTorch, in onnxruntime
(the copied ``onnx_decode.py``, in a process of its own) and in llama.cpp: ``shakespeare-char`` for 150 steps
(enough to write words: "ROMEO:\nThe the the ...")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import SHARED_DATA, needs_data
from scratchformer.app.cli import main

pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")
pytest.importorskip("gguf", reason="GGUF export needs the gguf package (pip install -e \".[gguf]\")")

PROMPT, NEW = "ROMEO:", 50  # 56 characters: inside the preset's max_len of 64, where llama.cpp stops


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    before = os.environ.get("SCRATCHFORMER_DATA")
    os.environ["SCRATCHFORMER_DATA"] = str(SHARED_DATA)
    try:
        assert main(["train", "--preset", "shakespeare-char", "max_steps=150", "eval_every=150", "eval_batches=2",
                     "--quiet", "--out", str(root / "x")]) == 0
    finally:
        if before is None:
            os.environ.pop("SCRATCHFORMER_DATA")
        else:
            os.environ["SCRATCHFORMER_DATA"] = before
    assert main(["export", "--ckpt", str(root / "x"), "--format", "onnx", "--out", str(root / "x-onnx")]) == 0
    assert main(["export", "--ckpt", str(root / "x"), "--format", "gguf", "--out", str(root / "x.gguf")]) == 0
    return root


def _pytorch_text(root, capsys) -> str:
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(root / "x"), "--prompt", PROMPT, "--max-new-tokens", str(NEW),
                 "--greedy"]) == 0
    text = capsys.readouterr().out[:-1]  # print's newline
    assert len(text) == len(PROMPT) + NEW and sum(c.isalpha() for c in text[len(PROMPT):]) >= 10  # words, not blanks
    return text


@needs_data("tinyshakespeare.txt")
@pytest.mark.slow
def test_onnxruntime_writes_what_pytorch_writes(exported, capsys):
    expected = _pytorch_text(exported, capsys)
    folder = exported / "x-onnx"
    done = subprocess.run([sys.executable, str(folder / "onnx_decode.py"), str(folder), "--prompt", PROMPT,
                           "--max-new-tokens", str(NEW)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout[:-1] == expected


@needs_data("tinyshakespeare.txt")
@pytest.mark.slow
@pytest.mark.skipif(__import__("importlib.util").util.find_spec("llama_cpp") is None,
                    reason="llama.cpp checks need llama-cpp-python (pip install -e \".[llama]\")")
def test_llama_cpp_writes_what_pytorch_writes(exported, capsys):
    from llama_cpp import Llama

    from scratchformer.app.export.llamacpp import llama_generate
    from scratchformer.checkpoint import load_checkpoint

    expected = _pytorch_text(exported, capsys)
    llm = Llama(str(exported / "x.gguf"), vocab_only=True, verbose=False)
    ids = llm.tokenize(PROMPT.encode(), add_bos=False, special=False)  # llama.cpp's own tokenizer
    tokenizer = load_checkpoint(exported / "x").tokenizer
    assert ids == tokenizer.encode(PROMPT)
    out = llama_generate(exported / "x.gguf", [ids], NEW, threads=2)[0]
    assert llm.detokenize(out).decode() == expected == tokenizer.decode(out)
