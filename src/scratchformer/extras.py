"""Optional parts of scratchformer and the packages they need: a command that needs a missing one says, in one
line, which extra to install (in the clone's folder, as the README installs it):

    pip install -e ".[plots]"        matplotlib: scratchformer plot, the walkthrough's pictures
    pip install -e ".[onnx]"         onnx, onnxscript, onnxruntime: export --format onnx
    pip install -e ".[tensorboard]"  tensorboard: event files beside metrics.jsonl
    pip install -e ".[hf]"           transformers: export --format hf
    pip install -e ".[baseline]"     scikit-learn: bench/bow_baseline.py
    pip install -e ".[images]"       Pillow, scikit-learn: task=image (image files, the digits dataset)
    pip install -e ".[gguf]"         gguf: export --format gguf
    pip install -e ".[chat]"         jinja2: task=instruct with a Hugging Face chat template
    pip install -e ".[serve]"        starlette, uvicorn, llguidance (and jinja2): scratchformer serve, JSON answers
    pip install -e ".[llama]"        llama-cpp-python (built from source): run GGUF files in the tests

The core install (PyTorch, tokenizers, safetensors, sacrebleu, tqdm, numpy) trains, evaluates and decodes
every model without them. A package is checked by its name (``importlib``) when a command needs it, so that a
missing one costs nothing until then.
"""

from __future__ import annotations

import importlib
from types import ModuleType

WHY = {"plots": "drawing pictures", "onnx": "ONNX export", "tensorboard": "TensorBoard logs",
       "hf": "Hugging Face export", "baseline": "the bag-of-words baseline",
       "images": "reading images", "gguf": "GGUF export", "chat": "a chat template", "serve": "the server",
       "llama": "running GGUF files with llama.cpp"}


class MissingExtra(ImportError):
    """A command needs an optional package that is not installed; the message says how to install it."""


def optional(module: str) -> ModuleType | None:
    """The optional package ``module`` if it is installed, else None (for what has another way when it is not)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def require(module: str, extra: str) -> None:
    """Raise ``MissingExtra`` unless ``module`` can be imported (it is then imported)."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtra(f"{WHY[extra]} needs {module}: pip install -e \".[{extra}]\" (in the scratchformer folder)"
                           ) from None
