"""Run directories: refusing to overwrite one, and finding the checkpoint a resumed run continues from.

``--resume`` continues from ``last/``. A ``last/`` that is truncated or corrupt (a full disk, a killed copy)
is reported in one line and, when ``best/`` is a good checkpoint, the run continues from there instead
(the steps after it are trained again). A run interrupted before its first checkpoint restarts at step 0
with its own settings.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.checkpoints import (
    BEST,
    LAST,
    CheckpointError,
    checkpoint_tokenizer,
    load_trainer_state,
    load_weights,
    read_meta,
)
from scratchformer.checkpoints.adapters import LoRARecord, check_base
from scratchformer.checkpoints.sharded import is_sharded, problem
from scratchformer.errors import RunDirError
from scratchformer.train.lock import LOCK


def check_out_dir(out: Path, resume: bool) -> None:
    """Refuse to overwrite a run; refuse to resume from nothing. Called before any work is done."""
    if resume:
        if not (out / "config.json").is_file():
            raise RunDirError(f"nothing to resume: {out} holds no run (start it without --resume)")
    elif out.exists() and (not out.is_dir() or any(p.name != LOCK for p in out.iterdir())):
        if (out / "config.json").is_file():
            raise RunDirError(f"{out} already holds a run; continue it with --resume, or choose another --out")
        raise RunDirError(f"{out} already exists and is not empty; choose another --out")


def remove_leftovers(out: Path) -> list[Path]:
    """Delete the temporary files and folders of writes that a killed process left in a run directory (and its
    ``history/``); returns them. Only the run's own writer calls this, under its lock."""
    found = [p for folder in (out, out / "history") if folder.is_dir() for p in folder.iterdir()
             if p.name.startswith(".") and (".tmp" in p.name)]
    for path in found:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    return found


def saved_run(out: Path) -> dict[str, Any]:
    """The ``config.json`` of the run to resume in ``out`` (its settings, its files)."""
    check_out_dir(out, resume=True)
    try:
        return json.loads((out / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise RunDirError(f"{out / 'config.json'} is unreadable ({type(err).__name__}); cannot resume") from None


def _candidates(out: Path) -> list[Path]:
    """``last/``, then ``best/`` (or their previous copies, when a crash interrupted a rename)."""
    found = []
    for name in (LAST, BEST):
        for path in (out / name, out / f".{name}.old"):
            if path.is_dir():
                found.append(path)
                break
    return found


def _check(ckpt: Path) -> None:
    """Raise ``CheckpointError`` unless every file of the checkpoint reads back whole."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    read_meta(ckpt)
    if is_sharded(ckpt):  # a shard=fsdp run's: every shard its index names, whole (checkpoints/sharded.py)
        wrong = problem(ckpt)
        if wrong:
            raise CheckpointError(wrong)
    else:
        try:
            load_file(str(ckpt / "model.safetensors"))
        except (SafetensorError, OSError, RuntimeError) as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise CheckpointError(f"{ckpt / 'model.safetensors'} is unreadable ({first})") from None
    load_trainer_state(ckpt)
    checkpoint_tokenizer(ckpt)  # raises CheckpointError for a missing or damaged tokenizer file


def pick_checkpoint(out: Path, log: Callable[[str], None]) -> Path | None:
    """The checkpoint a resumed run continues from (None: none was saved yet; the run restarts at step 0)."""
    candidates = _candidates(out)
    if not candidates:
        log(f"{out} has no checkpoint yet (it was stopped before its first one): starting at step 0 with its settings")
        return None
    problems = []
    for ckpt in candidates:
        try:
            _check(ckpt)
        except CheckpointError as err:
            problems.append(str(err))
            continue
        if problems:
            log(f"warning: {problems[0]}; resuming from {ckpt} (step {read_meta(ckpt)['step']:,}) instead, the "
                "steps after it are trained again")
        return ckpt
    raise CheckpointError(f"cannot resume: {problems[0]}, and no earlier good checkpoint is kept")


def restore_weights(ckpt: Path, model: nn.Module, device: torch.device,
                    optimizer: torch.optim.Optimizer | None = None) -> dict[str, Any]:
    """Load a checked checkpoint's weights into ``model``; return its trainer state. A LoRA run's adapters go on
    their base only if it is still where it was, unchanged. A sharded checkpoint (``shard=fsdp``) holds the
    ``optimizer``'s state too, restored here, on every process (``fsdp_checkpoint.py``)."""
    lora = read_meta(ckpt).get("lora")
    if lora is not None:
        check_base(LoRARecord.from_dict(lora), str(ckpt))
    if is_sharded(ckpt) and optimizer is not None:
        from scratchformer.train.fsdp_checkpoint import restore_sharded

        return restore_sharded(ckpt, model, optimizer)
    load_weights(model, ckpt / "model.safetensors", device)
    return load_trainer_state(ckpt)


def load_kept(ckpt: Path, model: nn.Module, device: torch.device) -> None:
    """Load the weights of a run's own checkpoint ``ckpt`` (its best/) into ``model``: ``model.safetensors``, or a
    sharded run's shards, on every process (``fsdp_checkpoint.py``)."""
    if is_sharded(ckpt):
        from scratchformer.train.fsdp_checkpoint import load_sharded_weights

        load_sharded_weights(ckpt, model)
    else:
        load_weights(model, ckpt / "model.safetensors", device)
