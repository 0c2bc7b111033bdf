"""A sharded checkpoint: the weights and optimizer state of a run trained with ``shard=fsdp``, each process writing
its own shard with PyTorch's ``torch.distributed.checkpoint`` (DCP).

    CKPT/shards/.metadata      DCP's index: which rows of which tensor lie where
    CKPT/shards/__0_0.distcp   process 0's rows of every weight and of their AdamW moments
    CKPT/shards/__1_0.distcp   process 1's rows, and so on, one file a process
    CKPT/config.json, tokenizer.json, trainer_state.pt   as in every checkpoint (``checkpoint.py``); the optimizer's
                               tensors are in the shards, its settings and the run's step in trainer_state.pt

DCP names each tensor and the offsets of its pieces, so the checkpoint reads back on any number of processes: each
of N processes reads the rows it holds, and one process (``load_model``, ``generate``, ``export``, a run resumed on
one process) puts the pieces together into whole tensors (consolidated on load: ``read_tensors``).

Reading executes no code, as everywhere in the project: the shards hold tensors only, read by DCP with
``torch.load(weights_only=True)``; DCP's index is a pickle, read here by an unpickler that builds only the index's
own types (DCP's metadata records, torch's sizes and dtypes) and refuses any other (``SafeReader``). Anything that is
not a tensor (the optimizer's settings) goes to ``trainer_state.pt`` instead, read with ``weights_only=True``.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

__all__ = ["SHARDS", "ShardsError", "failure", "is_sharded", "planner", "problem", "quiet_single_process",
           "read_tensors", "reader", "shard_files"]

SHARDS = "shards"  # the folder of a checkpoint that holds its shards

# What DCP's index may be built of: its own records, torch's sizes, dtypes, layouts and memory formats, and the
# path it was written to
_INDEX_MODULES = ("torch.distributed.checkpoint.", "torch.distributed._shard.")
_TORCH_NAMES = {"Size", "strided", "sparse_coo", "contiguous_format", "channels_last", "preserve_format"}
_BUILTINS = {("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "slice"),
             ("builtins", "tuple"), ("builtins", "list"), ("builtins", "dict"), ("pathlib", "PosixPath"),
             ("pathlib", "WindowsPath"), ("torch.serialization", "_get_layout")}  # a layout by its name


class ShardsError(ValueError):
    """A sharded checkpoint that is missing, incomplete or of another kind (one line)."""


def is_sharded(ckpt: Path) -> bool:
    """Whether checkpoint directory ``ckpt`` holds its weights as shards (a ``shard=fsdp`` run's)."""
    return (Path(ckpt) / SHARDS / ".metadata").is_file()


class _IndexUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        torch_value = module == "torch" and (name in _TORCH_NAMES or isinstance(getattr(torch, name, None),
                                                                                 torch.dtype))
        if module.startswith(_INDEX_MODULES) or torch_value or (module, name) in _BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a checkpoint's index")


def reader(path: Path) -> Any:
    """A DCP storage reader for the shards in ``path`` whose index is read without running code from the file."""
    from torch.distributed.checkpoint import FileSystemReader

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            with open(Path(self.path) / ".metadata", "rb") as f:
                metadata = _IndexUnpickler(io.BytesIO(f.read())).load()
            if getattr(metadata, "storage_meta", None) is not None:
                metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeReader(str(path))


def planner() -> Any:
    """DCP's load planner, with ``weights_only=True`` for anything stored as bytes (nothing is, here)."""
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class SafePlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            self.state_dict[read_item.dest_index.fqn] = torch.load(value, weights_only=True)

    return SafePlanner(allow_partial_load=True)


def index(ckpt: Path) -> Any:
    """The DCP index of ``ckpt``'s shards; ``ShardsError`` when it is missing or unreadable."""
    try:
        return reader(Path(ckpt) / SHARDS).read_metadata()
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError) as err:
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ShardsError(f"{Path(ckpt) / SHARDS / '.metadata'} is unreadable ({why})") from None


def shard_files(ckpt: Path) -> dict[str, int]:
    """Each shard file the index names -> the bytes it must hold at least."""
    need: dict[str, int] = {}
    for item in index(ckpt).storage_data.values():
        need[item.relative_path] = max(need.get(item.relative_path, 0), item.offset + item.length)
    return need


def problem(ckpt: Path) -> str | None:
    """What is wrong with ``ckpt``'s shards (a file missing or cut short), or None when they are whole."""
    try:
        need = shard_files(ckpt)
    except ShardsError as err:
        return str(err)
    for name, size in sorted(need.items()):
        file = Path(ckpt) / SHARDS / name
        if not file.is_file():
            return f"{file} is missing"
        if file.stat().st_size < size:
            return f"{file} is cut short ({file.stat().st_size:,} of {size:,} bytes)"
    return None


def read_tensors(ckpt: Path, tree: dict[str, Any]) -> None:
    """Fill ``tree`` from ``ckpt``'s shards: ``{"model": {name: tensor}}`` (the weights), and ``"optimizer"``'s
    tensors where asked, each a tensor of the right shape, whole or a process's ``DTensor``. Whole tensors are put
    together from every process's pieces. ``ShardsError`` for a checkpoint that lacks a weight asked for."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.tensor import DTensor

    stored = {k.removeprefix("model.") for k in index(ckpt).state_dict_metadata if k.startswith("model.")}
    missing = sorted(set(tree.get("model", {})) - stored)
    if missing:
        raise ShardsError(f"{Path(ckpt) / SHARDS} does not match config.json: it lacks {missing[:3]}")
    whole = not any(isinstance(t, DTensor) for t in tree.get("model", {}).values())  # needs no other process
    try:
        with quiet_single_process():
            dcp.load(tree, storage_reader=reader(Path(ckpt) / SHARDS), planner=planner(), no_dist=whole)
    except (Exception, dcp.CheckpointException) as err:  # noqa: BLE001 - DCP's is a BaseException
        raise ShardsError(f"{Path(ckpt) / SHARDS} could not be read ({failure(err)})") from None


@contextlib.contextmanager
def quiet_single_process() -> Iterator[None]:
    """DCP warns that it reads or writes "in a single process" whenever no process group is joined: expected here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def failure(err: BaseException) -> str:
    """The first line of what went wrong, from DCP's ``CheckpointException`` (which gathers each process's error) or
    any other error."""
    failures = getattr(err, "failures", None)
    if failures:
        first = next(iter(failures.values()))
        err = first[0] if isinstance(first, tuple) else first
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
