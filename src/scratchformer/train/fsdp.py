"""Sharded training (``shard=fsdp``): PyTorch's FSDP2 (``torch.distributed.fsdp.fully_shard``) under ``torchrun``.

DDP keeps a whole copy of the model in every process. ``shard=fsdp`` splits it: each block of every stack (and then
the rest, the root: embeddings, final norm, head) is sharded on its own, every weight cut by rows into one piece a
process, and so are its gradient and its AdamW moments. A block's weights are gathered whole just before it runs
(forward, and again for the backward) and freed right after, its gradient reduced and scattered back to the pieces.
Per process, in float32 with AdamW (4 bytes a weight, 4 a gradient, 8 the two moments), for P weights on N processes:

    DDP        16 P                          (Qwen3-0.6B: 9.5 GB in every process)
    fsdp       16 P / N + 8 (R + B)          R: the root's weights, which FSDP2 keeps gathered from the forward to
                                             the backward pass; B: the largest block's, gathered while it runs; each
                                             with its gradient until it is reduced (Qwen3-0.6B on 4: 3.8 GB each)

Each process takes an equal share of every batch, as under DDP, and the gradients are averaged the same way, so
a sharded run computes what one process computes (``tests/test_fsdp.py``). ``precision=bf16`` is FSDP2's own mixed
precision: the gathered weights are cast to bfloat16 for the matmuls, gradients reduced in float32, the pieces (the
master weights) and the optimizer state stay float32. Checkpoints are written by every process, its own shard
(``checkpoints/sharded.py``), and read back on any number of processes; on one process the run continues whole.

What shard=fsdp refuses, in one line, and why: Muon (it orthogonalises whole matrices: gathering every matrix for
the step would undo the sharding), fp16 (its gradient scaler would need to see every shard), ``ema_decay`` and
``average_last`` (whole copies of the weights); those are settings' checks (``settings/config.py``). Here: a run
without torchrun, a batch the processes cannot share equally, and a torch older than 2.6.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from scratchformer.errors import ConfigError
from scratchformer.families import parts
from scratchformer.settings.resolve import Resolved

__all__ = ["MIN_TORCH", "gathered", "is_sharded_module", "sharded_run", "shard_model"]

MIN_TORCH = (2, 6)  # fully_shard became public in torch 2.6


def sharded_run(run: Resolved, processes: int) -> bool:
    """Whether this run's model is sharded across its ``processes``; what cannot be, refused in one line. A run saved
    sharded and resumed on one process continues with the whole model (its checkpoints stay sharded)."""
    cfg = run.train
    if not cfg.sharded:
        return False
    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if have < MIN_TORCH:
        raise ConfigError(f"shard=fsdp needs torch 2.6 or newer (fully_shard became public there); this is torch "
                          f"{torch.__version__}: upgrade torch, or train without shard (DDP)")
    if processes == 1:
        if run.source.get("shard") == "the run":
            return False
        raise ConfigError("shard=fsdp splits the model across processes, and this run has one: launch it with "
                          "torchrun --nproc_per_node=N -m scratchformer train ... (N >= 2; add --nnodes for several "
                          "machines), or leave shard out")
    if cfg.batch_size % processes:
        raise ConfigError(f"batch_size={cfg.batch_size} does not split evenly across {processes} processes: with "
                          f"shard=fsdp each takes an equal share of every batch; make it a multiple of {processes}")
    return True


def shard_model(module: nn.Module, model: nn.Module, precision: str) -> nn.Module:
    """Shard ``model``'s blocks (every stack's, each on its own), then ``module`` (what the training steps call: the
    model, or a view of it such as masked-token pretraining's) as the root, holding the rest. ``bf16``: FSDP2's mixed
    precision (bfloat16 compute, float32 gradients' reduction and master weights; float32 outputs)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    half = precision == "bf16"
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if half \
        else MixedPrecisionPolicy()
    for block in parts(model).every_block:
        fully_shard(block, mp_policy=policy)
    root = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                output_dtype=torch.float32) if half else policy
    fully_shard(module, mp_policy=root)
    return module


def is_sharded_module(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


@contextlib.contextmanager
def gathered(root: nn.Module) -> Iterator[None]:
    """Inside, the root's own weights (embeddings, final norm, head) are whole on every process, so that a model
    used other than through its ``forward`` (decoding calls ``encode`` and ``decode``; masked-token evaluation its
    token predictions) reads them; each block still gathers its own as it runs. Every process must enter it."""
    if not is_sharded_module(root):
        yield
        return
    root.unshard()  # type: ignore[operator]
    try:
        yield
    finally:
        root.reshard()  # type: ignore[operator]
