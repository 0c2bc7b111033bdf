"""The core install trains and uses models; the optional extras are asked for by name, in one line, when missing.

The optional packages are hidden from a fresh interpreter by an import hook (as if never installed), then
the CLI is run as a user would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shared_runs import TINY

HIDDEN = ["matplotlib", "tensorboard", "onnx", "onnxruntime", "onnxscript", "transformers", "sklearn", "selenium",
          "PIL", "gguf", "starlette", "uvicorn"]

RUNNER = textwrap.dedent('''
    import importlib.abc, json, os, sys, tempfile, traceback
    HIDDEN = set(sys.argv[1].split(","))

    class Hide(importlib.abc.MetaPathFinder):
        """Every finder as it was, except that the hidden packages are not found (find_spec gives None)."""

        def __init__(self, inner):
            self.inner = inner

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN or not hasattr(self.inner, "find_spec"):
                return None
            return self.inner.find_spec(name, path, target)

    sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]
    from scratchformer.app.cli import main

    def run(argv):
        """One command, as its own process would end: its exit code, and all it wrote to stdout and stderr (the
        file descriptors, so that nothing written around sys.stdout or sys.stderr is missed)."""
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
            try:
                code = main(argv)
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush(), sys.stderr.flush()
                os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            out.seek(0), err.seek(0)
            return {"returncode": code, "stdout": out.read(), "stderr": err.read()}

    print(json.dumps([run(argv) for argv in json.loads(sys.argv[2])]))
''')


def run(tmp_path: Path, *commands: list[str]) -> list[subprocess.CompletedProcess]:
    """``commands`` run one after another in a new interpreter that cannot import the optional packages, each
    ended as a process of its own would be (its exit code, its output)."""
    script = tmp_path / "without_extras.py"
    script.write_text(RUNNER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # a fresh interpreter: the extras hidden from its first import on
    done = subprocess.run([sys.executable, str(script), ",".join(HIDDEN), json.dumps(commands)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    return [subprocess.CompletedProcess(argv, r["returncode"], r["stdout"], r["stderr"])
            for argv, r in zip(commands, json.loads(done.stdout.splitlines()[-1]))]


@pytest.mark.slow
def test_the_core_install_trains_the_copy_model_and_names_each_missing_extra(tmp_path):
    """Every command in one new interpreter without the extras (one import of torch, not ten), each ended as a
    process of its own would be."""
    out = tmp_path / "copy"
    text = tmp_path / "text.txt"
    text.write_text("to be or not to be\n" * 40)
    lm = tmp_path / "lm"
    photos = tmp_path / "photos"
    for name in ("cat", "dog"):
        (photos / name).mkdir(parents=True)
        (photos / name / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # never opened: Pillow is asked for first
    refusals = [(["plot", "curves", "--run", str(out), "--out", str(tmp_path / "c.png")], "plots"),
                (["train", "task=image", "--data", str(photos), "--out", str(tmp_path / "img")], "images"),
                (["train", "--preset", "digits-vit", "--out", str(tmp_path / "digits")], "images"),
                (["export", "--ckpt", str(out), "--format", "onnx", "--out", str(tmp_path / "m.onnx")], "onnx"),
                (["export", "--ckpt", str(lm), "--format", "hf", "--out", str(tmp_path / "hf")], "hf"),
                (["export", "--ckpt", str(lm), "--format", "gguf", "--out", str(tmp_path / "m.gguf")], "gguf"),
                (["serve", "--ckpt", str(lm), "--port", "0"], "serve")]
    trained, used, lm_trained, *refused = run(
        tmp_path,
        ["train", "--out", str(out), "max_steps=20", "eval_every=20", "n_test=20", "eval_decode=5", *TINY],
        ["translate", "--ckpt", str(out), "abcd", "--beam", "2"],
        ["train", "task=lm", "--data", str(text), "--out", str(lm), "max_steps=2", "eval_every=2", "eval_batches=1",
         *TINY, "max_len=16"],
        *(argv for argv, _ in refusals))
    assert trained.returncode == 0, trained.stderr
    assert "TensorBoard files are skipped" in trained.stderr and '.[tensorboard]' in trained.stderr
    assert (out / "best" / "model.safetensors").is_file() and not (out / "tensorboard").exists()
    assert used.returncode == 0 and len(used.stdout.splitlines()) == 1, used.stderr
    assert lm_trained.returncode == 0, lm_trained.stderr
    for done, (argv, extra) in zip(refused, refusals):
        err = done.stderr.strip()
        assert done.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, (argv, err)
        assert err.startswith("scratchformer: error:") and f'pip install -e ".[{extra}]"' in err, err
    assert not (tmp_path / "c.png").exists() and not (tmp_path / "m.onnx").exists() and not (tmp_path / "hf").exists()
    assert not (tmp_path / "img").exists() and not (tmp_path / "digits").exists() and not (tmp_path / "m.gguf").exists()


def test_the_command_line_starts_without_importing_torch():
    """`scratchformer --help` and a command's help answer at once: torch (about a second to import) is loaded by
    the commands that run a model, not by reading the command line."""
    code = ("import sys; from scratchformer.app.cli import main\n"
            "for argv in (['--help'], ['train', '--help'], ['generate', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print('IMPORTED', sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))")
    # a fresh interpreter: what reading the command line imports
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "IMPORTED []", out
