"""Multi-process data parallel training through PyTorch DDP.

Started by ``torchrun --nproc_per_node=N -m scratchformer train ...``, which sets ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``. The backend is gloo on CPU and nccl on GPU. Every rank builds the same
global batch and takes its share of the rows; DDP averages the gradients. Only rank 0 writes files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


def init_distributed(device: torch.device) -> DistInfo:
    """Join the process group if launched by torchrun; a single process otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistInfo(rank, world, local_rank)


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def broadcast_flag(flag: bool, info: DistInfo) -> bool:
    """Rank 0's boolean, on every rank (used to stop all ranks together)."""
    if not info.enabled:
        return flag
    t = torch.tensor([int(flag)])
    dist.broadcast(t, src=0)
    return bool(t.item())


def cleanup(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
