"""A LoRA run's checkpoints: the adapters alone, and the base they adapt, named and fingerprinted.

A run with ``lora_rank > 0`` (``nn/lora.py``) trains only its adapters, and a classifier's head; the rest is the
base model (``init_from``), frozen. So its ``model.safetensors`` holds only what it trained (``own_state``), and
its ``config.json`` says on what (``LoRARecord``, the value the model carries as ``model.lora`` while it trains):

    "lora": {"rank": 8, "alpha": 16.0, "dropout": 0.0, "targets": ["query", "value"],
             "trained": ["head.weight", "head.bias"],                 # trained beside the adapters
             "base": {"init_from": "all-MiniLM-L6-v2",                # as the run named it
                      "path": "/.../all-MiniLM-L6-v2",                # where it was found (absolute)
                      "sha256": "9a3f...",                            # of its weight files, in full
                      "headers": "c41e..."}}                          # of their names, sizes, times and headers

Loading one (``source.ModelSource.load``) finds the base at that path and checks it is the one the adapters
were trained on (``check_base``): cheaply first, by the digest of its files' names, sizes, modification times and
safetensors headers (a few kilobytes read, whatever the size of the base: an 8B base is not hashed for every
``generate``), and in full (sha256 of every byte) only when that differs (the base was copied, touched or
changed): a base whose bytes changed is refused, naming both. ``scratchformer info RUN --verify`` hashes it in full
on request; a run hashes its base in full when it is made. Then a model of the saved architecture is filled from
the base (``fill_from_base``), the adapters are added, the run's own weights loaded, and the adapters folded in, so
that every command gets a plain model.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from scratchformer.checkpoints.sharded import SHARDS
from scratchformer.errors import ConfigError

__all__ = ["BaseRecord", "LoRARecord", "check_base", "fill_from_base", "fingerprint", "header_digest", "lora_record",
           "own_state"]


@dataclass(frozen=True)
class BaseRecord:
    """The base a LoRA run adapts: as the run named it, where it was found, and its fingerprints."""

    init_from: str
    path: str
    sha256: str  # every byte of its weight files
    headers: str = ""  # its files' names, sizes, modification times and safetensors headers ("": an older run)


@dataclass(frozen=True)
class LoRARecord:
    """What a LoRA run adapted and how (``config.json``'s ``lora``)."""

    rank: int
    alpha: float
    dropout: float
    targets: tuple[str, ...]
    trained: tuple[str, ...]  # the weights trained beside the adapters (a classifier's new head)
    base: BaseRecord

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        return {**out, "targets": list(self.targets), "trained": list(self.trained)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoRARecord:
        base = BaseRecord(**{"headers": "", **data["base"]})
        return cls(int(data["rank"]), float(data["alpha"]), float(data["dropout"]), tuple(data["targets"]),
                   tuple(data["trained"]), base)


def lora_record(model: nn.Module) -> LoRARecord | None:
    """The record of a model with adapters (set by ``train/lora.py`` or when loading), else None."""
    return getattr(model, "lora", None)


def own_state(model: nn.Module) -> dict[str, Tensor]:
    """What a LoRA run saves of ``model``: its adapters and the weights trained beside them (every weight, for a
    model without adapters)."""
    record = lora_record(model)
    state = model.state_dict()
    if record is None:
        return state
    trained = set(record.trained)
    return {n: t for n, t in state.items() if ".lora_A." in n or ".lora_B." in n or n in trained}


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint or model folder: its ``*.safetensors`` (a pickle is never read), or a sharded
    checkpoint's shards and their index (``sharded.py``)."""
    shards = folder / SHARDS
    return sorted(folder.glob("*.safetensors")) + (sorted(p for p in shards.iterdir() if p.is_file())
                                                   if shards.is_dir() else [])


def fingerprint(folder: Path) -> str:
    """sha256 over the names and bytes of ``folder``'s weight files: every byte is read."""
    digest = hashlib.sha256()
    for file in weight_files(folder):
        digest.update(file.name.encode() + b"\0")
        with file.open("rb") as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
    return digest.hexdigest()


def header_digest(folder: Path) -> str:
    """sha256 over each weight file's name, size, modification time and safetensors header (the JSON at its start
    that lists every tensor's name, dtype, shape and place): a few kilobytes read however large the files."""
    digest = hashlib.sha256()
    for file in weight_files(folder):
        stat = file.stat()
        digest.update(json.dumps([file.name, stat.st_size, stat.st_mtime_ns]).encode())
        if file.suffix != ".safetensors":  # a shard: its size and time alone
            continue
        with file.open("rb") as f:
            head = f.read(8)
            size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
            digest.update(head + f.read(min(size, stat.st_size)))
    return digest.hexdigest()


def check_base(record: LoRARecord, where: str, *, full: bool = False) -> Path:
    """The base folder of an adapter run's ``record``, if it is still there, unchanged: cheaply checked by
    ``header_digest``, in full (``fingerprint``) when that differs or ``full`` is asked. Else ``ConfigError`` naming
    both the base recorded and what is found."""
    base = record.base
    path, want = Path(base.path), base.sha256
    if not path.is_dir() or not weight_files(path):
        raise ConfigError(f"{where} holds LoRA adapters for the base {path} (init_from={base.init_from}, sha256 "
                          f"{want[:12]}), which is no longer there: put it back at that path")
    if not full and base.headers and header_digest(path) == base.headers:
        return path
    have = fingerprint(path)
    if have != want:
        raise ConfigError(f"{where} holds LoRA adapters for the base {path} with sha256 {want[:12]}, but the weights "
                          f"there now have sha256 {have[:12]}: the base changed, and the adapters fit only the first")
    return path


def fill_from_base(model: nn.Module, base: dict[str, Tensor], own: set[str], where: Path) -> None:
    """Copy the base's weights into ``model`` (all but ``own``, which the run saved itself). A learned position
    table longer than the model's gives its first rows (a classifier fine-tuned on shorter inputs:
    ``models.cut_positions``)."""
    from scratchformer.models import cut_positions

    base = cut_positions(base, model.config.max_len)
    for name, tensor in model.state_dict().items():
        if name in own:
            continue
        source = base.get(name)
        if source is None or source.shape != tensor.shape:
            raise ConfigError(f"the base {where} has no weight {name} of shape {tuple(tensor.shape)}: it is not the "
                              "model these adapters were trained on")
        tensor.copy_(source)
