"""Checkpoints: a directory per checkpoint, written atomically, loaded without executing code. A Hugging Face
folder of a Llama, Qwen3 or GPT-2 model loads as a checkpoint too (``interop/hf_folder.py``).

    CKPT/model.safetensors   weights (safetensors: no pickle; tied weights stored once). A LoRA run's holds only its
                             adapters and head; config.json's "lora" names its base and the base's sha256
                             (adapters.py), and loading merges them into the base
    CKPT/config.json         {"model": ModelConfig, "train": training settings, "step": ..., "labels": [...]}
    CKPT/tokenizer.json      the tokenizer (none for a ViT: it reads pixels; its image size is in the model config)
    CKPT/trainer_state.pt    optimizer state, step, early-stopping state (torch.load(weights_only=True))
    CKPT/shards/             instead of model.safetensors, a ``shard=fsdp`` run's weights and optimizer state, a file
                             per process (``sharded.py``), read back whole by the loaders here

A run directory keeps ``last/`` (the most recent) and ``best/`` (best validation ``select_by``). Writing goes
to a temporary sibling directory that is renamed into place, so a crash (even SIGKILL) mid-write leaves
the previous checkpoint intact.

Training and inference both use this module; it knows models and tokenizers, and keeps the training
settings as the plain dictionary they were saved as (``settings.config.TrainConfig.from_dict`` types them). What a
path holds (a run, a checkpoint, a Hugging Face folder) is worked out by ``source.find_source``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.atomic import atomic_dir
from scratchformer.checkpoints.adapters import lora_record, own_state
from scratchformer.checkpoints.source import CheckpointError, find_source
from scratchformer.families import family
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import Tokenizer

__all__ = ["Checkpoint", "checkpoint_tokenizer", "load_checkpoint", "load_model", "load_trainer_state",
           "save_checkpoint", "write_beside_weights"]


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (in eval mode), its tokenizer, its configuration and training settings."""

    model: nn.Module
    tokenizer: Tokenizer | None  # None for a ViT
    model_config: ModelConfig
    train: dict[str, Any]  # the training settings it was trained with
    step: int
    extra: dict[str, Any] = field(default_factory=dict)  # labels, data files, ...

    @property
    def task(self) -> str:
        return str(self.train.get("task", ""))

    @property
    def chat_template(self) -> str | None:
        """The chat template (Jinja) its exports carry: the one an instruction-tuned run was tuned with (Alpaca's
        written as one: ``data.templates.ALPACA_JINJA``), else its tokenizer's own (a Hugging Face folder's), else
        None."""
        from scratchformer.data.templates import Template

        if self.extra.get("template"):
            return Template.from_dict(self.extra["template"]).jinja
        return self.tokenizer.chat_template if self.tokenizer is not None else None

    def check_tokenizer(self, command: str) -> None:
        """Refuse, in one line, a text command on a checkpoint without a tokenizer (a Hugging Face folder without
        ``tokenizer.json``; a ViT reads pixels and is refused by the commands for its family)."""
        if self.tokenizer is None and family(self.model_config.arch).reads_tokens:
            where = self.extra.get("folder", "this checkpoint")
            raise CheckpointError(f"{where} has no tokenizer.json, which '{command}' needs (it reads text, or carries "
                                  "the tokenizer): put the model's tokenizer.json in the folder")


def save_checkpoint(directory: Path, model: nn.Module, tokenizer: Tokenizer | None, model_config: ModelConfig,
                    train: dict[str, Any], step: int, trainer_state: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None) -> None:
    """Write a checkpoint to ``directory`` atomically (``atomic.atomic_dir``: a temporary directory renamed into
    place); a failed write removes it, leaves the previous checkpoint as it was and raises ``WriteError``."""
    from safetensors.torch import save_file, save_model

    directory = Path(directory)
    with atomic_dir(directory, f"the checkpoint {directory.name}/", _nbytes(own_state(model), trainer_state)) as tmp:
        if lora_record(model) is None:
            save_model(model, str(tmp / "model.safetensors"))
        else:  # the adapters and what trained beside them; the base is named, not copied (adapters.py)
            save_file({n: t.contiguous() for n, t in own_state(model).items()}, str(tmp / "model.safetensors"))
        write_beside_weights(tmp, model, tokenizer, model_config, train, step, trainer_state, extra)


def write_beside_weights(tmp: Path, model: nn.Module, tokenizer: Tokenizer | None, model_config: ModelConfig,
                         train: dict[str, Any], step: int, trainer_state: dict[str, Any] | None = None,
                         extra: dict[str, Any] | None = None) -> None:
    """A checkpoint's files other than its weights, into the directory ``tmp``: ``config.json`` (with a LoRA run's
    record), the tokenizer and the trainer's state. The weights are ``model.safetensors`` or, for a sharded run,
    its shards (``sharded.py``)."""
    lora = lora_record(model)
    meta = {"model": model_config.to_dict(), "train": dict(train), "step": step, **(extra or {}),
            **({"lora": lora.to_dict()} if lora else {})}
    (tmp / "config.json").write_text(json.dumps(meta, indent=2))
    if tokenizer is not None:
        tokenizer.save(tmp)
    if trainer_state is not None:
        torch.save(trainer_state, tmp / "trainer_state.pt")


def _nbytes(*values: Any) -> int:
    """The bytes of the tensors in nested dicts and lists (about what a checkpoint of them takes on disk)."""
    total = 0
    for value in values:
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
        elif isinstance(value, dict):
            total += _nbytes(*value.values())
        elif isinstance(value, (list, tuple)):
            total += _nbytes(*value)
    return total


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", *,
                    dtype: torch.dtype | None = None) -> Checkpoint:
    """Load model (eval mode), tokenizer and configs from a checkpoint (or run) directory, or from a Hugging Face
    folder of a Llama, Qwen3 or GPT-2 model (``interop.hf_folder``: its weights as stored, unless ``dtype``)."""
    source = find_source(path)
    model = source.load(dtype).to(map_location)
    if source.kind == "folder":
        return Checkpoint(model, source.tokenizer(), source.config, {"task": "lm"}, 0,
                          {"hf_architecture": (source.meta.get("architectures") or [source.hf_type])[0],
                           "folder": str(path)})
    extra = {k: v for k, v in source.meta.items() if k not in ("model", "train", "step")}
    return Checkpoint(model, source.tokenizer(), source.config, dict(source.meta.get("train", {})),
                      int(source.meta.get("step", 0)), extra)


def checkpoint_tokenizer(ckpt: Path) -> Tokenizer | None:
    """The tokenizer saved in checkpoint directory ``ckpt``; None for a model that reads pixels (a ViT)."""
    return find_source(ckpt).tokenizer()


def load_trainer_state(path: str | Path) -> dict[str, Any]:
    file = Path(path) / "trainer_state.pt"
    if not file.is_file():
        raise CheckpointError(f"{file} is missing: cannot resume")
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means a corrupt file
        raise CheckpointError(f"{file} is corrupt ({err.__class__.__name__})") from None


def load_model(path: str | Path, *, dtype: torch.dtype | str | None = None) -> nn.Module:
    """The model of a checkpoint (or run) directory, or of a Hugging Face folder (Llama, Qwen3, GPT-2: its
    ``config.json``, ``*.safetensors``), in eval mode. ``dtype`` (``torch.float32`` or ``"float32"``, say) converts
    the weights; without it they stay as stored (a bfloat16 folder loads as bfloat16)."""
    if isinstance(dtype, str):
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise CheckpointError(f"dtype={dtype!r} is not a torch dtype (float32, bfloat16, float16)")
        dtype = getattr(torch, dtype)
    return load_checkpoint(path, dtype=dtype).model
