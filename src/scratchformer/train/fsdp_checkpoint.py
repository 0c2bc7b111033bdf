"""A ``shard=fsdp`` run's checkpoints (``checkpoints.sharded``): every process writes its own shard of the weights and
of the optimizer's moments with ``torch.distributed.checkpoint``, into one temporary directory that rank 0, the run's
one writer (it holds the lock), then completes and renames into place. A save killed at any point leaves the last
good checkpoint as it was (``atomic.atomic_dir``); a failed write on any process ends every process with one line.

    rank 0: a temporary directory beside the checkpoint        -> its path sent to every process
    every process: its shard (DCP), the writes of all gathered  -> a failed one raised on every process
    rank 0: config.json, tokenizer, trainer_state.pt; rename   -> its outcome sent to every process

``trainer_state.pt`` holds what is not a tensor: the step, the schedule, the optimizer's settings (its param groups).
A run saved by N processes resumes on any number of processes; on one, the tensors are put together whole.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.atomic import atomic_dir, failed_write
from scratchformer.checkpoints import CheckpointError, load_trainer_state
from scratchformer.checkpoints.adapters import own_state
from scratchformer.checkpoints.sharded import SHARDS, ShardsError, failure, quiet_single_process, read_tensors
from scratchformer.distributed import DistInfo, broadcast_object
from scratchformer.errors import WriteError

__all__ = ["load_sharded_weights", "restore_sharded", "save_sharded"]


def _states(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The weights a checkpoint keeps (a LoRA run's: its adapters and head) and the optimizer's state, by name: each
    process's ``DTensor`` pieces when the model is sharded, whole tensors when it is not."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    weights, optim = get_state_dict(model, optimizer)
    kept = own_state(model).keys()
    return {k: v for k, v in weights.items() if k in kept}, optim


def _write_shards(where: Path, tree: dict[str, Any], info: DistInfo) -> None:
    import torch.distributed.checkpoint as dcp

    try:
        with quiet_single_process():
            dcp.save(tree, storage_writer=dcp.FileSystemWriter(str(where)), no_dist=not info.enabled)
    except (Exception, dcp.CheckpointException) as err:  # noqa: BLE001 - DCP's is a BaseException
        first = next(iter(getattr(err, "failures", {}).values()), (err,))
        cause = first[0] if isinstance(first, tuple) else first
        raise cause if isinstance(cause, OSError) else OSError(failure(err)) from None


def save_sharded(directory: Path, model: nn.Module, optimizer: torch.optim.Optimizer, trainer_state: dict[str, Any],
                 write_rest: Callable[[Path, dict[str, Any]], None], info: DistInfo) -> None:
    """Every process: save checkpoint ``directory`` (module docstring). ``write_rest(tmp, state)``: rank 0 writes the
    files beside the weights (``checkpoints.write_beside_weights``) with the trainer's ``state``."""
    weights, optim = _states(model, optimizer)
    tree = {"model": weights, "optimizer": {"state": optim["state"]}}
    what = f"the checkpoint {directory.name}/"
    if not info.is_main:
        where, error = broadcast_object(None, info)
        if error:
            raise WriteError(error)
        try:
            _write_shards(Path(where) / SHARDS, tree, info)
        except OSError as err:
            raise failed_write(err, what, directory.parent) from None
        error = broadcast_object(None, info)
        if error:
            raise WriteError(error)
        return
    stage = "start"
    try:
        with atomic_dir(directory, what) as tmp:
            broadcast_object((str(tmp), None), info)
            stage = "shards"
            _write_shards(tmp / SHARDS, tree, info)
            stage = "rest"
            write_rest(tmp, {**trainer_state, "optimizer_groups": optim["param_groups"]})
    except WriteError as err:
        if stage != "shards":  # the others wait for the path, or for the outcome
            broadcast_object((None, str(err)) if stage == "start" else str(err), info)
        raise
    broadcast_object(None, info)


def restore_sharded(ckpt: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """Every process: load checkpoint ``ckpt``'s weights and optimizer state into ``model`` and ``optimizer`` (its
    pieces, sharded or whole); returns the trainer's state, its optimizer already restored."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

    state = load_trainer_state(ckpt)
    weights, optim = _states(model, optimizer)
    tree = {"model": weights, "optimizer": {"state": optim["state"]}}
    try:
        read_tensors(ckpt, tree)
    except ShardsError as err:
        raise CheckpointError(str(err)) from None
    groups = state.pop("optimizer_groups", optim["param_groups"])
    set_state_dict(model, optimizer, model_state_dict=tree["model"],
                   optim_state_dict={"state": tree["optimizer"]["state"], "param_groups": groups},
                   options=StateDictOptions(strict=False))
    return state


def load_sharded_weights(ckpt: Path, model: nn.Module) -> None:
    """Every process: load checkpoint ``ckpt``'s weights into ``model`` (its pieces, sharded or whole)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict

    kept = own_state(model).keys()
    weights = {k: v for k, v in get_model_state_dict(model).items() if k in kept}
    try:
        read_tensors(ckpt, {"model": weights})
    except ShardsError as err:
        raise CheckpointError(str(err)) from None
    set_model_state_dict(model, weights, options=StateDictOptions(strict=False))
