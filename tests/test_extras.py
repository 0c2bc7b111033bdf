"""The core install trains and uses models; the optional extras are asked for by name, in one line, when missing.

The optional packages are hidden from a fresh interpreter by an import hook (as if never installed), then
the CLI is run as a user would run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HIDDEN = ["matplotlib", "tensorboard", "onnx", "onnxruntime", "onnxscript", "transformers", "sklearn", "selenium",
          "PIL", "gguf", "starlette", "uvicorn"]

RUNNER = textwrap.dedent('''
    import importlib.abc, sys
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
    sys.exit(main(sys.argv[2:]))
''')


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "without_extras.py"
    script.write_text(RUNNER)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(script), ",".join(HIDDEN), *args], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.slow
def test_the_core_install_trains_the_copy_model_and_names_each_missing_extra(tmp_path):
    out = tmp_path / "copy"
    trained = run(tmp_path, "train", "--out", str(out), "max_steps=20", "eval_every=20", "n_test=20",
                  "eval_decode=5", "d_model=32", "n_heads=2", "d_ff=64")
    assert trained.returncode == 0, trained.stderr
    assert "TensorBoard files are skipped" in trained.stderr and '.[tensorboard]' in trained.stderr
    assert (out / "best" / "model.safetensors").is_file() and not (out / "tensorboard").exists()
    used = run(tmp_path, "translate", "--ckpt", str(out), "abcd", "--beam", "2")
    assert used.returncode == 0 and len(used.stdout.splitlines()) == 1, used.stderr
    text = tmp_path / "text.txt"
    text.write_text("to be or not to be\n" * 40)
    lm = tmp_path / "lm"
    assert run(tmp_path, "train", "task=lm", "--data", str(text), "--out", str(lm), "max_steps=2", "eval_every=2",
               "eval_batches=1", "d_model=32", "n_heads=2", "n_layers=1", "d_ff=64", "max_len=16").returncode == 0
    photos = tmp_path / "photos"
    for name in ("cat", "dog"):
        (photos / name).mkdir(parents=True)
        (photos / name / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # never opened: Pillow is asked for first
    for argv, extra in [(["plot", "curves", "--run", str(out), "--out", str(tmp_path / "c.png")], "plots"),
                        (["train", "task=image", "--data", str(photos), "--out", str(tmp_path / "img")], "images"),
                        (["train", "--preset", "digits-vit", "--out", str(tmp_path / "digits")], "images"),
                        (["export", "--ckpt", str(out), "--format", "onnx", "--out", str(tmp_path / "m.onnx")], "onnx"),
                        (["export", "--ckpt", str(lm), "--format", "hf", "--out", str(tmp_path / "hf")], "hf"),
                        (["export", "--ckpt", str(lm), "--format", "gguf", "--out", str(tmp_path / "m.gguf")], "gguf"),
                        (["serve", "--ckpt", str(lm), "--port", "0"], "serve")]:
        refused = run(tmp_path, *argv)
        err = refused.stderr.strip()
        assert refused.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "IMPORTED []", out
