"""A LoRA run's checkpoints: the adapters alone, and the base they adapt, named and fingerprinted.

A run with ``lora_rank > 0`` (``nn/lora.py``) trains only its adapters, and a classifier's head; the rest is the
base model (``init_from``), frozen. So its ``model.safetensors`` holds only what it trained (``own_state``), and
its ``config.json`` says on what:

    "lora": {"rank": 8, "alpha": 16.0, "dropout": 0.0, "targets": ["query", "key", ...],
             "trained": ["head.weight", "head.bias"],                 # trained beside the adapters
             "base": {"init_from": "all-MiniLM-L6-v2",                # as the run named it
                      "path": "/.../all-MiniLM-L6-v2",                # where it was found (absolute)
                      "sha256": "9a3f..."}}                           # of its weight files

Loading one (``checkpoint.load_checkpoint``) finds the base at that path, checks its fingerprint (a base that
moved or changed is refused, naming both), fills a model of the saved architecture from it (``fill_from_base``),
adds the adapters and loads the run's own weights; then folds the adapters in, so that every command (generate,
classify, translate, evaluate, explore, export) gets a plain model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from scratchformer.errors import ConfigError

__all__ = ["check_base", "fill_from_base", "fingerprint", "lora_record", "own_state"]

POSITIONS = "embed.position_embedding.weight"  # a learned table a fine-tuned classifier may cut to its max_len


def lora_record(model: nn.Module) -> dict[str, Any] | None:
    """The ``lora`` entry of a model with adapters (set by ``train/lora.py`` or when loading), else None."""
    return getattr(model, "lora", None)


def own_state(model: nn.Module) -> dict[str, Tensor]:
    """What a LoRA run saves of ``model``: its adapters and the weights trained beside them (every weight, for a
    model without adapters)."""
    record = lora_record(model)
    state = model.state_dict()
    if record is None:
        return state
    trained = set(record["trained"])
    return {n: t for n, t in state.items() if ".lora_A." in n or ".lora_B." in n or n in trained}


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint or model folder: its ``*.safetensors``, else its ``*.bin``."""
    return sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))


def fingerprint(folder: Path) -> str:
    """sha256 over the names and bytes of ``folder``'s weight files."""
    digest = hashlib.sha256()
    for file in weight_files(folder):
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def check_base(record: dict[str, Any], where: str) -> Path:
    """The base folder of an adapter run's ``record`` (its ``lora`` entry), if it is still there, unchanged;
    else ``ConfigError`` naming both the base recorded and what is found."""
    base = record["base"]
    path, want = Path(base["path"]), base["sha256"]
    if not path.is_dir() or not weight_files(path):
        raise ConfigError(f"{where} holds LoRA adapters for the base {path} (init_from={base['init_from']}, sha256 "
                          f"{want[:12]}), which is no longer there: put it back at that path")
    have = fingerprint(path)
    if have != want:
        raise ConfigError(f"{where} holds LoRA adapters for the base {path} with sha256 {want[:12]}, but the weights "
                          f"there now have sha256 {have[:12]}: the base changed, and the adapters fit only the first")
    return path


def fill_from_base(model: nn.Module, base: dict[str, Tensor], own: set[str], where: Path) -> None:
    """Copy the base's weights into ``model`` (all but ``own``, which the run saved itself). A learned position
    table longer than the model's gives its first rows (a classifier fine-tuned on shorter inputs)."""
    for name, tensor in model.state_dict().items():
        if name in own:
            continue
        source = base.get(name)
        if source is not None and name.endswith(POSITIONS) and source.shape[1:] == tensor.shape[1:]:
            source = source[:tensor.shape[0]]
        if source is None or source.shape != tensor.shape:
            raise ConfigError(f"the base {where} has no weight {name} of shape {tuple(tensor.shape)}: it is not the "
                              "model these adapters were trained on")
        tensor.copy_(source)
