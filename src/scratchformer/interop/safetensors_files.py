"""The weights of a Hugging Face folder: which ``*.safetensors`` file holds each tensor (one file, or shards named
by ``model.safetensors.index.json``), their shapes read from the files' headers, and the tensors read one at a time
from memory-mapped files. Pickled weights (``*.bin``, ``*.pt``) are refused: loading a pickle can run code.

Each weight is held once. A tensor used as stored is the file's own mapped pages (``read``: nothing is copied, and
a page is read from disk when first used). Tensors that become one (W^Q, W^K and W^V, stacked into one matrix per
layer) are read with plain file reads straight into the new matrix (``read_stacked``): read through the map, their
pages would stay resident beside the stack once touched, each weight held twice."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

INDEX = "model.safetensors.index.json"


class WeightsError(ValueError):
    """Weights that are missing, pickled, or not where the index says (one line)."""


def weight_map(folder: Path) -> dict[str, Path]:
    """Each tensor's name -> the file that holds it, checked: every shard present and holding what the index names."""
    index = folder / INDEX
    if index.is_file():
        try:
            named = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError):
            raise WeightsError(f"{index} is not a safetensors index (no weight_map)") from None
        outside = [file for file in set(named.values()) if not isinstance(file, str) or Path(file).name != file]
        if outside:
            raise WeightsError(f"{index} names a shard outside the folder ({outside[0]!r}); refused")
        files = {name: folder / file for name, file in named.items()}
    elif (folder / "model.safetensors").is_file():
        files = {}
    else:
        pickled = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt"))
        if pickled:
            raise WeightsError(f"{folder} holds its weights as {pickled[0]}, a pickle, which can run code when loaded; "
                               "convert them to safetensors first (transformers: model.save_pretrained(DIR, "
                               "safe_serialization=True))")
        raise WeightsError(f"{folder} has no model.safetensors and no {INDEX}")
    for shard in sorted(set(files.values())):
        if not shard.is_file():
            raise WeightsError(f"the shard {shard.name} named by {INDEX} is missing from {folder}")
    if not files:
        return dict.fromkeys(_keys(folder / "model.safetensors"), folder / "model.safetensors")
    for shard in sorted(set(files.values())):
        held = _keys(shard)
        lacking = sorted(name for name, file in files.items() if file == shard and name not in held)
        if lacking:
            raise WeightsError(f"the shard {shard.name} lacks {lacking[0]}, which {INDEX} places there "
                               f"({len(lacking)} missing): the shards and the index do not match")
    return files


def _keys(path: Path) -> set[str]:
    """The tensor names in a safetensors file's header; ``WeightsError`` for a file that is not one."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return set(f.keys())
    except (SafetensorError, OSError) as err:
        why = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise WeightsError(f"{path} is not a readable safetensors file ({why})") from None


def shapes(files: dict[str, Path]) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape, from the files' headers (nothing is read but the headers)."""
    from safetensors import safe_open

    out: dict[str, tuple[int, ...]] = {}
    for shard in sorted(set(files.values())):
        with safe_open(str(shard), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                if files.get(name) == shard:
                    out[name] = tuple(f.get_slice(name).get_shape())
    return out


@contextmanager
def reader(files: dict[str, Path]) -> Iterator[Any]:
    """``with reader(files) as read: read(name) -> Tensor``: each shard opened once, memory-mapped."""
    from safetensors import safe_open

    with ExitStack() as stack:
        opened = {shard: stack.enter_context(safe_open(str(shard), framework="pt"))
                  for shard in sorted(set(files.values()))}

        def read(name: str) -> Tensor:
            return opened[files[name]].get_tensor(name)

        yield read


# safetensors' dtype names -> torch's (the ones a model folder holds)
_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
           "BOOL": torch.bool}


def _header(shard: Path) -> tuple[dict[str, Any], int]:
    """A safetensors file's header (name -> dtype, shape, data_offsets) and where its data begins."""
    with open(shard, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def read_stacked(files: dict[str, Path], names: list[str], dtype: torch.dtype | None = None) -> Tensor:
    """The tensors ``names`` concatenated along their first dimension, in ``dtype`` (None: as stored), read with plain
    file reads into one new tensor: the file's pages are never mapped into this process (module docstring)."""
    headers = {shard: _header(shard) for shard in {files[n] for n in names}}
    parts = [(files[n], headers[files[n]][0][n], headers[files[n]][1]) for n in names]
    stored = {_DTYPES[info["dtype"]] for _, info, _ in parts}
    if len(stored) != 1:
        raise WeightsError(f"{names[0]} and the tensors stacked with it are stored in different dtypes")
    shapes = [info["shape"] for _, info, _ in parts]
    out = torch.empty((sum(s[0] for s in shapes), *shapes[0][1:]), dtype=stored.pop())
    row = 0
    for (shard, info, start), shape in zip(parts, shapes):
        begin, end = info["data_offsets"]
        dest = out[row:row + shape[0]].view(torch.uint8).reshape(-1)  # a view of the stack's own memory
        if dest.numel() != end - begin:
            raise WeightsError(f"{shard.name}: a tensor's bytes do not match its shape {shape}")
        view, done = memoryview(dest.numpy()), 0
        with open(shard, "rb", buffering=0) as f:
            f.seek(start + begin)
            while done < len(view):  # one read returns at most about 2 GB
                got = f.readinto(view[done:])
                if not got:
                    raise WeightsError(f"{shard.name} is shorter than its header says")
                done += got
        row += shape[0]
    return out if dtype is None or dtype == out.dtype else out.to(dtype)
