"""Checkpoints: a directory per checkpoint, written atomically, loaded without executing code. A Hugging Face
folder of a Llama, Qwen3 or GPT-2 model loads as a checkpoint too (``interop/hf_folder.py``).

    CKPT/model.safetensors   weights (safetensors: no pickle; tied weights stored once). A LoRA run's holds only its
                             adapters and head; config.json's "lora" names its base and the base's sha256
                             (adapters.py), and loading merges them into the base
    CKPT/config.json         {"model": ModelConfig, "train": training settings, "step": ..., "labels": [...]}
    CKPT/tokenizer.json      the tokenizer (none for a ViT: it reads pixels; its image size is in the model config)
    CKPT/trainer_state.pt    optimizer state, step, early-stopping state (torch.load(weights_only=True))

A run directory keeps ``last/`` (the most recent) and ``best/`` (best validation ``select_by``). Writing goes
to a temporary sibling directory that is renamed into place, so a crash (even SIGKILL) mid-write leaves
the previous checkpoint intact.

Training and inference both use this module; it knows models and tokenizers, and keeps the training
settings as the plain dictionary they were saved as (``settings.config.TrainConfig.from_dict`` types them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.adapters import check_base, fill_from_base, lora_record, own_state
from scratchformer.atomic import atomic_dir
from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, family, saved_family
from scratchformer.models import build_model
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.lora import add_lora, merge_lora
from scratchformer.tokenizers import Tokenizer, load_tokenizer


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupt or of the wrong kind."""


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

    def check_tokenizer(self, command: str) -> None:
        """Refuse, in one line, a text command on a checkpoint without a tokenizer (a Hugging Face folder without
        ``tokenizer.json``; a ViT reads pixels and is refused by the commands for its family)."""
        if self.tokenizer is None and family(self.model_config.arch).reads == "tokens":
            where = self.extra.get("folder", "this checkpoint")
            raise CheckpointError(f"{where} has no tokenizer.json; '{command}' reads text with it: put the model's "
                                  "tokenizer.json in the folder")


def save_checkpoint(directory: Path, model: nn.Module, tokenizer: Tokenizer | None, model_config: ModelConfig,
                    train: dict[str, Any], step: int, trainer_state: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None) -> None:
    """Write a checkpoint to ``directory`` atomically (``atomic.atomic_dir``: a temporary directory renamed into
    place); a failed write removes it, leaves the previous checkpoint as it was and raises ``WriteError``."""
    from safetensors.torch import save_file, save_model

    directory = Path(directory)
    with atomic_dir(directory, f"the checkpoint {directory.name}/", _nbytes(own_state(model), trainer_state)) as tmp:
        lora = lora_record(model)
        if lora is None:
            save_model(model, str(tmp / "model.safetensors"))
        else:  # the adapters and what trained beside them; the base is named, not copied (adapters.py)
            save_file({n: t.contiguous() for n, t in own_state(model).items()}, str(tmp / "model.safetensors"))
        meta = {"model": model_config.to_dict(), "train": dict(train), "step": step, **(extra or {}),
                **({"lora": lora} if lora else {})}
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


def resolve(path: str | Path) -> Path:
    """A checkpoint directory from a checkpoint or run directory (a run directory means its ``averaged/``
    (``average_last``), else ``best/``, else ``last/``); falls back to the previous copy if a crash
    interrupted the final rename."""
    path = Path(path)
    if not path.exists():
        old = path.with_name(f".{path.name}.old")
        if old.is_dir():
            return old
        raise CheckpointError(f"no checkpoint at {path}")
    if (path / "model.safetensors").is_file() or not (path / "best").exists() and not (path / "last").exists():
        if not (path / "config.json").is_file():
            raise CheckpointError(f"{path} is not a checkpoint (no config.json)")
        return path
    for sub in ("averaged", "best", "last"):
        for candidate in (path / sub, path / f".{sub}.old"):
            if (candidate / "config.json").is_file():
                return candidate
    raise CheckpointError(f"{path} is a run directory without a complete best/ or last/ checkpoint")


def find_checkpoint(path: str | Path) -> Path | None:
    """The checkpoint directory if ``path`` is a scratchformer checkpoint or run directory, else ``None``
    (a Hugging Face model folder, a model's name, nothing at all)."""
    try:
        ckpt = resolve(path)
        return ckpt if {"model", "train"} <= read_meta(ckpt).keys() else None
    except CheckpointError:
        return None


def checkpoint_family(ckpt: Path) -> str:
    """The family (``ModelConfig.arch``) of the checkpoint in ``ckpt``, read from its config alone (an older form,
    such as a GPT classifier saved as ``arch="gpt"`` with ``pooling="last"``, as today's)."""
    fields = read_meta(ckpt)["model"]
    return saved_family(fields) or str(fields.get("arch"))


def read_meta(ckpt: Path) -> dict[str, Any]:
    try:
        meta = json.loads((ckpt / "config.json").read_text())
        meta["model"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        name = err.__class__.__name__
        raise CheckpointError(f"{ckpt / 'config.json'} is unreadable or incomplete ({name})") from None
    return meta


def load_weights(model: nn.Module, path: Path, device: str | torch.device = "cpu") -> None:
    """Load ``model.safetensors`` into ``model``: every parameter exactly once (tied weights are stored once
    and fill all their names). Raises ``CheckpointError``."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        state = load_file(str(path), device=str(device))
    except (SafetensorError, OSError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else err.__class__.__name__
        raise CheckpointError(f"{path} is corrupt or unreadable: {first}") from None
    own = own_state(model)  # a LoRA run's model: its adapters (and head), not the frozen base
    aliases: dict[int, list[str]] = {}
    for name, tensor in own.items():
        aliases.setdefault(tensor.data_ptr(), []).append(name)
    missing = [n for n in own if n not in state and not any(a in state for a in aliases[own[n].data_ptr()])]
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"{path} does not match config.json: missing {missing[:3]}, unexpected {unexpected[:3]}")
    try:
        model.load_state_dict(state, strict=False)
    except RuntimeError as err:
        raise CheckpointError(f"{path} does not match config.json: {str(err).splitlines()[0]}") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", *,
                    dtype: torch.dtype | None = None) -> Checkpoint:
    """Load model (eval mode), tokenizer and configs from a checkpoint (or run) directory, or from a Hugging Face
    folder of a Llama, Qwen3 or GPT-2 model (``interop.hf_folder``: its weights as stored, unless ``dtype``)."""
    from scratchformer.interop.hf_folder import FolderError, is_hf_folder, load_folder

    if is_hf_folder(path):
        try:
            model, tokenizer, architecture = load_folder(path, dtype)
        except FolderError as err:
            raise CheckpointError(str(err)) from None
        return Checkpoint(model.to(map_location), tokenizer, model.config, {"task": "lm"}, 0,
                          {"hf_architecture": architecture, "folder": str(path)})
    ckpt = resolve(path)
    meta = read_meta(ckpt)
    try:
        model_config = ModelConfig.from_dict(meta["model"])
    except (ConfigError, TypeError) as err:
        raise CheckpointError(f"{ckpt / 'config.json'} holds an invalid config: {err}") from None
    model = build_model(model_config)
    weights = ckpt / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{weights} is missing")
    if "lora" in meta:
        model = _base_with_adapters(model, meta["lora"], ckpt)
    load_weights(model, weights, map_location)
    if "lora" in meta:
        model = merge_lora(model)
        del model.lora
    if dtype is not None:
        model.to(dtype)
    tokenizer = checkpoint_tokenizer(ckpt, model_config)
    extra = {k: v for k, v in meta.items() if k not in ("model", "train", "step")}
    return Checkpoint(model.eval(), tokenizer, model_config, dict(meta.get("train", {})), int(meta.get("step", 0)),
                      extra)


def _base_with_adapters(model: nn.Module, lora: dict[str, Any], ckpt: Path) -> nn.Module:
    """``model`` filled from the base a LoRA run adapted (found and checked, ``adapters.check_base``), with the
    run's adapters added (their values still to load)."""
    from scratchformer.interop.hf_folder import is_hf_folder, load_folder
    from scratchformer.interop.huggingface import bert_from_pretrained

    path = check_base(lora, str(ckpt))
    config: ModelConfig = model.config  # type: ignore[assignment]
    if find_checkpoint(path) is not None:
        base = load_checkpoint(path).model
    elif is_hf_folder(path) and json.loads((path / "config.json").read_text()).get("model_type") != "bert":
        base = load_folder(path, torch.float32)[0]
    else:
        base = bert_from_pretrained(path, n_classes=config.n_classes, pooling=config.pooling)
    with torch.no_grad():
        fill_from_base(model, base.state_dict(), set(lora["trained"]), path)
    add_lora(model, lora["rank"], lora["alpha"], tuple(lora["targets"]), lora["dropout"])
    model.lora = lora
    return model


def checkpoint_tokenizer(ckpt: Path, model_config: ModelConfig | None = None) -> Tokenizer | None:
    """The tokenizer saved in checkpoint directory ``ckpt``; None for a model that reads pixels (a ViT)."""
    from scratchformer.errors import DataError

    fields = model_config.to_dict() if model_config is not None else read_meta(ckpt)["model"]
    arch = saved_family(fields) or fields.get("arch")
    if arch in FAMILIES and family(arch).reads != "tokens":
        return None
    try:
        return load_tokenizer(ckpt)
    except DataError as err:
        raise CheckpointError(str(err)) from None


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
