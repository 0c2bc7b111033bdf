"""Multi-process data parallel training through PyTorch DDP.

Started by ``torchrun --nproc_per_node=N -m scratchformer train ...``, which sets ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``. The backend is gloo on CPU and nccl on GPU. Every rank builds the same
global batch and takes its share of the rows; DDP averages the gradients. Only rank 0 writes files.
Decisions that must be the same everywhere (stop now, how many steps a time budget buys) are rank 0's,
or any rank's for an interrupt, shared by a collective.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def launched_processes() -> int:
    """How many processes torchrun started for this run (1 without torchrun), before any group is joined."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group if launched by torchrun; a single process otherwise."""
    world = launched_processes()
    if world <= 1:
        return DistInfo()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank, world, local_rank)


def broadcast_object(value: Any, info: DistInfo) -> Any:
    """Rank 0's ``value`` (anything picklable: a flag, a number, the paths of prepared corpora), on every rank."""
    if not info.enabled:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def reduce_flags(flags: list[bool], info: DistInfo) -> list[bool]:
    """Each flag true on every rank if it is true on any rank."""
    if not info.enabled:
        return flags
    device = f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([int(f) for f in flags], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


def cleanup(info: DistInfo, finished: bool = False) -> None:
    """Leave the process group. ``finished``: every rank got to the end, so wait for the others first (rank 0
    measures the test split alone at the end; a rank that tore its connections down while another still held
    them could abort the process); after an error, leave at once (a rank waiting for a failed one would hang)."""
    if info.enabled and dist.is_initialized():
        if finished:
            dist.barrier()
        dist.destroy_process_group()
