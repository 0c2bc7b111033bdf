"""Where a run computes: the device, batches moved to it, and the AdamW implementation it has.

- ``device=auto`` takes a CUDA GPU if there is one, else Apple's GPU (``mps``), else the CPU. A device asked
  for by name that is not there is refused in one line before any work is done.
- Batches are built on the CPU. On their way to a CUDA GPU they go through page-locked ("pinned") host
  memory, which the GPU reads by DMA, so the copy is asynchronous (``non_blocking=True``) and the CPU goes on
  launching the step's kernels meanwhile. For the CPU nothing moves; for mps a plain copy.
- AdamW runs ``fused`` (one kernel that updates every parameter, instead of a loop of small operations per
  parameter) where torch has a fused AdamW for the device: CUDA, mps, and, in torch 2.13, the CPU, where the
  optimizer step alone was measured 2.0x (d 128, 4 layers) and 4.4x (d 384, 6 layers) faster
  (``bench/adamw_speed.py``; RESULTS.md, "GPU path"). Where torch has no fused AdamW for a device, its own
  default is used.
- In a distributed run the training module is wrapped by DDP, or sharded by FSDP2 (``shard=fsdp``: ``fsdp.py``)
  (``training_module``).
- ``compile=true`` (``torch.compile``) needs a C++ compiler on the CPU; without one the run is refused in
  one line rather than failing at its first step with the compiler's traceback.
"""

from __future__ import annotations

import platform

import torch
from torch import Tensor, nn

from scratchformer.distributed import DistInfo
from scratchformer.errors import ConfigError


def available(name: str) -> bool:
    """Whether this machine (and this build of torch) has device ``name`` (cpu, cuda, mps)."""
    if name == "cuda":
        return torch.cuda.is_available()
    if name == "mps":
        mps = getattr(torch.backends, "mps", None)
        return bool(mps is not None and mps.is_available())
    return name == "cpu"


def pick_device(name: str) -> torch.device:
    """``auto``: cuda, else mps, else cpu; a named device must be there."""
    if name == "auto":
        return torch.device(next(d for d in ("cuda", "mps", "cpu") if available(d)))
    if not available(name):
        what = {"cuda": "no CUDA GPU is available (or this torch is a CPU build)",
                "mps": "no Apple GPU (mps) is available"}.get(name, "it is not a device this torch knows")
        raise ConfigError(f"device={name} was asked for, but {what}; use device=auto or device=cpu")
    return torch.device(name)


def to_device(batch: dict[str, Tensor], device: torch.device) -> dict[str, Tensor]:
    """A batch's tensors on ``device``: through pinned memory, asynchronously, for CUDA (module docstring)."""
    if device.type == "cuda":
        return {k: v.pin_memory().to(device, non_blocking=True) for k, v in batch.items()}
    return {k: v.to(device) for k, v in batch.items()}


def has_fused_adamw(device: torch.device) -> bool:
    """Whether torch has a fused AdamW kernel for ``device``'s type."""
    try:  # torch's own list; private, so an older torch without it gets the one device fused has long had
        from torch.optim.optimizer import _get_fused_kernels_supported_devices
    except ImportError:
        return device.type == "cuda"
    return device.type in _get_fused_kernels_supported_devices()


def compile_unavailable(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot run on ``device`` here, or None when it can."""
    import torch._dynamo

    if not torch._dynamo.is_dynamo_supported():
        return f"torch.compile does not support this Python ({platform.python_version()})"
    if device.type == "cpu":
        try:
            from torch._inductor.cpp_builder import get_cpp_compiler

            get_cpp_compiler()
        except (ImportError, RuntimeError):  # torch's InvalidCxxCompiler is a RuntimeError
            return "torch.compile on the CPU needs a C++ compiler (g++ or clang++ on PATH, or $CXX)"
    return None


def training_module(module: nn.Module, info: DistInfo, device: torch.device, compile: bool,
                    shard: tuple[nn.Module, str] | None = None) -> nn.Module:
    """What the training steps call: ``module`` wrapped by DDP in a distributed run, or sharded (``shard``: the model
    whose blocks are sharded, and the run's precision; ``fsdp.py``), and compiled when asked."""
    if shard is not None:
        from scratchformer.train.fsdp import shard_model

        module = shard_model(module, *shard)
    elif info.enabled:
        ids = [device.index] if device.type == "cuda" else None
        module = nn.parallel.DistributedDataParallel(module, device_ids=ids)
    if compile:
        problem = compile_unavailable(device)
        if problem:
            raise ConfigError(f"compile=true: {problem}; set compile=false")
        module = torch.compile(module)  # type: ignore[assignment]
    return module
