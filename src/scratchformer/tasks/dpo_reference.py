"""The reference of preference tuning: the model a DPO run starts from, frozen. Its log-probability of each answer
is needed at every step; two ways to have it without a second copy of the weights:

    precomputed   once, for every record of every split, before the first step (the policy is still the
                  reference then), in the run's directory (``reference.safetensors``: each split's (N, 2) table of
                  the chosen and rejected answers' log-probabilities, with a digest of the records' tokens); a
                  resumed run reads it back. Costs one forward pass over the data; each step then reads numbers.
    adapters      with LoRA: the model with its adapters switched off is the reference (``nn.lora.adapters_off``),
                  one more forward pass (without gradients) at every step. Costs nothing before the first step.

``scratchformer evaluate`` on a DPO run reads its records afresh: the reference is then the base ``init_from``
names, loaded for the occasion.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

from scratchformer.atomic import writing
from scratchformer.data.batching import sorted_batches
from scratchformer.data.memory import MemoryRows
from scratchformer.errors import ConfigError

__all__ = ["REFERENCE_FILE", "base_model", "compute_table", "digest", "dropout_off", "read_tables", "write_tables"]

REFERENCE_FILE = "reference.safetensors"
EVAL_TOKENS = 8192  # padded tokens per batch while a split's log-probabilities are computed


def dropout_off(model: nn.Module) -> None:
    """Every dropout of ``model`` set to 0 (its layers' ``nn.Dropout``, attention's dropout of its weights, LoRA's
    dropout of its inputs), as ``trl``'s ``disable_dropout_in_model``: a DPO step's log-probabilities are then the
    model's own, and at the first step the policy equals the reference."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        elif isinstance(getattr(module, "dropout", None), float):
            module.dropout = 0.0


def digest(rows: MemoryRows) -> str:
    """A fingerprint of a split's records as the model reads them (their tokens)."""
    ids = [rows.fields[k] for k in ("prompt", "chosen", "rejected")]
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()


@torch.no_grad()
def compute_table(model: nn.Module, pairs: Callable[[list[int]], dict[str, Tensor]], lengths: list[int],
                  logps: Callable[[nn.Module, dict[str, Tensor]], Tensor]) -> Tensor:
    """``(N, 2)``: the log-probabilities ``logps`` gives of each of the N pairs, chosen then rejected (``pairs``:
    positions -> their batch; ``lengths``: each pair's longer row), the model in eval mode, in batches of about
    ``EVAL_TOKENS`` padded tokens."""
    from scratchformer.models import eval_mode

    device = next(model.parameters()).device
    table = torch.zeros(len(lengths), 2)
    with eval_mode(model):
        for idx in sorted_batches(lengths, EVAL_TOKENS // 2):
            batch = {k: v.to(device) for k, v in pairs(idx).items()}
            table[idx] = logps(model, batch).float().cpu()
    return table


def read_tables(out: Path, digests: dict[str, str]) -> dict[str, Tensor] | None:
    """The tables saved in run directory ``out`` when they are of these records (each split's digest), else None."""
    from safetensors import safe_open

    path = out / REFERENCE_FILE
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), "pt") as f:
            saved = json.loads((f.metadata() or {}).get("digests", "{}"))
            if saved != digests:
                return None
            return {split: f.get_tensor(split) for split in digests}
    except Exception:  # noqa: BLE001 - an unreadable file is computed again, as a missing one
        return None


def write_tables(out: Path, tables: dict[str, Tensor], digests: dict[str, str]) -> None:
    """Save the tables in run directory ``out``, atomically (a failed write is one ``WriteError``)."""
    from safetensors.torch import save

    data = save({k: v.contiguous() for k, v in tables.items()}, metadata={"digests": json.dumps(digests)})
    path = out / REFERENCE_FILE
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with writing("the reference's log-probabilities", out, needed=len(data), leftovers=(tmp,)):
        out.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def base_model(init_from: str | None, device: torch.device) -> nn.Module:
    """The model a DPO run started from (``init_from``: a run or a Hugging Face folder), loaded in float32: the
    reference when its log-probabilities were not kept (``scratchformer evaluate`` on the run's records)."""
    from scratchformer.checkpoints import CheckpointError, load_checkpoint

    try:
        model = load_checkpoint(str(init_from), dtype=torch.float32).model
    except CheckpointError as err:
        raise ConfigError(f"the reference of this DPO run is its start, init_from={init_from}, which cannot be loaded "
                          f"from here ({err}); evaluate it from the directory it was trained in") from None
    dropout_off(model)
    return model.to(device)
