"""A model trained through the CLI goes through both exports and writes the same text in PyTorch, in onnxruntime
(the copied ``onnx_decode.py``, run as a script) and in llama.cpp: ``shakespeare-char`` for 200 steps, the shared
``shakespeare`` run (enough to write words: "ROMEO:\nThe the the ..."). That the copied script runs in a process
where torch cannot be imported: ``test_onnx_cache.py``."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from conftest import needs_data
from scratchformer.app.cli import main

pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")
pytest.importorskip("gguf", reason="GGUF export needs the gguf package (pip install -e \".[gguf]\")")

PROMPT, NEW = "ROMEO:", 50  # 56 characters: inside the preset's max_len of 64, where llama.cpp stops


@pytest.fixture(scope="module")
def exported(shared_run, tmp_path_factory) -> dict[str, Path]:
    """The shared ``shakespeare`` run (read only) and its two exports, written here."""
    root, run = tmp_path_factory.mktemp("e2e"), shared_run("shakespeare")
    assert main(["export", "--ckpt", str(run), "--format", "onnx", "--out", str(root / "x-onnx")]) == 0
    assert main(["export", "--ckpt", str(run), "--format", "gguf", "--out", str(root / "x.gguf")]) == 0
    return {"run": run, "onnx": root / "x-onnx", "gguf": root / "x.gguf"}


def _pytorch_text(run: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(run), "--prompt", PROMPT, "--max-new-tokens", str(NEW), "--greedy"]) == 0
    text = capsys.readouterr().out[:-1]  # print's newline
    assert len(text) == len(PROMPT) + NEW and sum(c.isalpha() for c in text[len(PROMPT):]) >= 10  # words, not blanks
    return text


@needs_data("tinyshakespeare.txt")
@pytest.mark.slow
def test_onnxruntime_writes_what_pytorch_writes(exported, capsys, monkeypatch):
    expected = _pytorch_text(exported["run"], capsys)
    folder = exported["onnx"]
    # the copied script as ``python onnx_decode.py FOLDER --prompt ...`` runs it
    monkeypatch.setattr(sys, "argv", ["onnx_decode.py", str(folder), "--prompt", PROMPT, "--max-new-tokens",
                                      str(NEW)])
    runpy.run_path(str(folder / "onnx_decode.py"), run_name="__main__")
    assert capsys.readouterr().out[:-1] == expected


@needs_data("tinyshakespeare.txt")
@pytest.mark.slow
@pytest.mark.skipif(__import__("importlib.util").util.find_spec("llama_cpp") is None,
                    reason="llama.cpp checks need llama-cpp-python (pip install -e \".[llama]\")")
def test_llama_cpp_writes_what_pytorch_writes(exported, capsys):
    from llama_cpp import Llama

    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.interop.llamacpp import llama_generate

    expected = _pytorch_text(exported["run"], capsys)
    llm = Llama(str(exported["gguf"]), vocab_only=True, verbose=False)
    ids = llm.tokenize(PROMPT.encode(), add_bos=False, special=False)  # llama.cpp's own tokenizer
    tokenizer = load_checkpoint(exported["run"]).tokenizer
    assert ids == tokenizer.encode(PROMPT)
    # one thread: two spinning beside the other worker's tests took up to 19 s instead of 1
    out = llama_generate(exported["gguf"], [ids], NEW, threads=1)[0]
    assert llm.detokenize(out).decode() == expected == tokenizer.decode(out)
