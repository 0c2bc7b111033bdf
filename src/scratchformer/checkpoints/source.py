"""Where a model comes from, worked out once: a scratchformer checkpoint (a run's directory) or a Hugging Face
folder (a Llama, Qwen3 or GPT-2 model; a BERT encoder to fine-tune), or the name of a pretrained model.

    source = find_source("runs/book")          # or "Llama-3.2-1B/", or "all-MiniLM-L6-v2"
    source.kind, source.family, source.config  # "run" or "folder"; its family (families.py); its ModelConfig
    model = source.load()                      # its weights (a LoRA run's: the base with the adapters folded in)
    tokenizer = source.tokenizer()

``find_source`` is the one place that reads what a path or a name is: ``init_from`` becomes this value once, at the
start of a run (``train/session.py``), and every later step reads it; ``checkpoint.load_checkpoint`` reads ``--ckpt``
with it too. Only ``config.json`` is read to make it: the weights are read when ``load`` is called.

Loading never executes code from the files: weights come from safetensors only (a pickled ``*.bin`` is refused
everywhere), configs are JSON. A LoRA run names its base and fingerprints it (``adapters.py``); loading one finds
the base, checks it is unchanged, fills a model of the run's architecture from it and folds the adapters in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.checkpoints.adapters import LoRARecord, check_base, fill_from_base, own_state
from scratchformer.checkpoints.sharded import ShardsError, is_sharded, read_tensors
from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, family
from scratchformer.models import build_model
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.lora import add_lora, merge_lora

__all__ = ["AVERAGED", "BEST", "CheckpointError", "KEPT", "LAST", "ModelSource", "find_checkpoint", "find_source",
           "load_weights", "read_meta", "resolve", "run_of"]

# The checkpoints a run directory keeps: averaged/ (the mean of its last saves, average_last), best/ (the best
# validation select_by), last/ (the most recent); a run directory is read as the first of them it holds (KEPT)
AVERAGED, BEST, LAST = "averaged", "best", "last"
KEPT = (AVERAGED, BEST, LAST)


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupt or of the wrong kind."""


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
    if (path / "model.safetensors").is_file() or is_sharded(path) or not (path / BEST).exists() \
            and not (path / LAST).exists():
        if not (path / "config.json").is_file():
            raise CheckpointError(f"{path} is not a checkpoint (no config.json)")
        return path
    for sub in KEPT:
        for candidate in (path / sub, path / f".{sub}.old"):
            if (candidate / "config.json").is_file():
                return candidate
    raise CheckpointError(f"{path} is a run directory without a complete best/ or last/ checkpoint")


def run_of(path: str | Path) -> Path:
    """The run directory that checkpoint ``path`` belongs to (the folder above its ``best/``), else ``path``."""
    path = Path(path)
    return path.parent if path.name in KEPT else path


def find_checkpoint(path: str | Path) -> Path | None:
    """The checkpoint directory if ``path`` is a scratchformer checkpoint or run directory, else ``None``
    (a Hugging Face model folder, a model's name, nothing at all)."""
    try:
        ckpt = resolve(path)
        return ckpt if {"model", "train"} <= read_meta(ckpt).keys() else None
    except CheckpointError:
        return None


def read_meta(ckpt: Path) -> dict[str, Any]:
    """A checkpoint's ``config.json``; ``CheckpointError`` in one line (where JSON breaks: its line and column)."""
    try:
        meta = json.loads((ckpt / "config.json").read_text())
        meta["model"]
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{ckpt / 'config.json'} is not valid JSON (line {err.lineno}, column {err.colno}: "
                              f"{err.msg})") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        name = err.__class__.__name__
        raise CheckpointError(f"{ckpt / 'config.json'} is unreadable or incomplete ({name})") from None
    return meta


@dataclass(frozen=True)
class ModelSource:
    """A model found where ``given`` points (``find_source``): what it is, without its weights."""

    given: str  # as the run or the command named it
    path: Path  # the checkpoint directory (a run's best/, last/ ...), or the folder
    kind: str  # "run" (a scratchformer checkpoint) or "folder" (a Hugging Face model folder)
    family: str  # its family (ModelConfig.arch; a folder's, by the registry's hf_plans)
    config: ModelConfig  # its model's configuration (a pretrained encoder's with 2 classes and mean pooling)
    meta: dict[str, Any] = field(repr=False)  # its config.json: a run's (train, step, lora, ...) or the folder's
    hf_type: str = ""  # a folder's model_type ("llama", "qwen3", "gpt2", "bert")
    # characters a run adds to a character-level model's vocabulary (those its prompt template writes and the model
    # never saw: ``train/prompt_room.py``); ``load`` and ``tokenizer`` give the model and tokenizer with them
    added_chars: tuple[str, ...] = ()

    @property
    def described(self) -> str:
        """Where it came from, for a run's lines: ``DIR (step 800 of a task=lm run)`` or ``FOLDER (a llama model)``."""
        if self.kind == "run":
            return f"{self.path} (step {self.meta.get('step', 0)} of a task={self.meta['train'].get('task')} run)"
        return f"{self.path} (a {self.hf_type} model)"

    @property
    def template(self) -> dict[str, str] | None:
        """The prompt template its model was tuned with (an instruction-tuned run's ``template``), else None."""
        return self.meta.get("template") if self.kind == "run" else None

    @property
    def lora(self) -> LoRARecord | None:
        """A LoRA run's record of its adapters and base (``checkpoints/adapters.py``), else None."""
        return LoRARecord.from_dict(self.meta["lora"]) if self.kind == "run" and "lora" in self.meta else None

    def load(self, dtype: torch.dtype | None = None, *, classes: tuple[int, str] | None = None) -> nn.Module:
        """Its model in eval mode, the weights as stored unless ``dtype``. ``classes``: (n_classes, pooling) of the
        new head a pretrained encoder (a BERT folder) is loaded with, for fine-tuning."""
        if self.kind == "run":
            model = self._load_run()
        elif family(self.family).classifies:  # a pretrained encoder: its body under a new head
            if classes is None:
                raise CheckpointError(f"{self.path} is a pretrained encoder ({self.hf_type}) without a trained head: "
                                      f"fine-tune it first (train task=classify init_from={self.path})")
            from scratchformer.interop.huggingface import bert_from_pretrained

            model = bert_from_pretrained(self.path, n_classes=classes[0], pooling=classes[1])
        else:
            from scratchformer.interop.hf_folder import FolderError, load_folder

            try:
                model = load_folder(self.path, dtype)
            except FolderError as err:
                raise CheckpointError(str(err)) from None
        if self.added_chars:
            from scratchformer.models import widen_vocabulary

            model = widen_vocabulary(model, len(self.added_chars))
        return (model if dtype is None else model.to(dtype)).eval()

    @property
    def start_config(self) -> ModelConfig:
        """The config of the model ``load`` gives: its own, with ``added_chars`` in its vocabulary."""
        import dataclasses

        return dataclasses.replace(self.config, vocab_size=self.config.vocab_size + len(self.added_chars))

    def tokenizer(self) -> Any:
        """Its tokenizer: a run's saved one (None for a model that reads pixels), a folder's ``tokenizer.json`` with
        the folder's special tokens (None where the folder has none)."""
        from scratchformer.errors import DataError
        from scratchformer.tokenizers import load_tokenizer

        if self.kind == "run":
            if family(self.family).reads_pixels:
                return None
            try:
                tokenizer = load_tokenizer(self.path)
            except DataError as err:
                raise CheckpointError(str(err)) from None
            return tokenizer.with_characters(self.added_chars) if self.added_chars else tokenizer
        from scratchformer.interop.folder_tokenizer import folder_tokenizer

        return folder_tokenizer(self.path, self.meta, self.config)

    def _load_run(self) -> nn.Module:
        model = build_model(self.config)
        weights = self.path / "model.safetensors"
        if not weights.is_file() and not is_sharded(self.path):
            raise CheckpointError(f"{weights} is missing")
        record = self.lora
        if record is not None:  # the base, then the adapters; the run's own weights loaded into them, then folded
            base = find_source(str(check_base(record, str(self.path))))
            with torch.no_grad():
                fill_from_base(model, base.load(torch.float32, classes=(self.config.n_classes, self.config.pooling))
                               .state_dict(), set(record.trained), base.path)
            add_lora(model, record.rank, record.alpha, record.targets, record.dropout)
            model.lora = record
        load_weights(model, weights) if weights.is_file() else load_shards(model, self.path)
        if record is not None:
            model = merge_lora(model)
            del model.lora
        return model


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


def load_shards(model: nn.Module, ckpt: Path) -> None:
    """Load a sharded checkpoint's weights (``sharded.py``: a ``shard=fsdp`` run's) into ``model``, whole: the shards
    of every process put together. Raises ``CheckpointError``."""
    state = {name: torch.empty_like(t) for name, t in own_state(model).items()}
    try:
        read_tensors(ckpt, {"model": state})
    except ShardsError as err:
        raise CheckpointError(str(err)) from None
    model.load_state_dict(state, strict=False)


def find_source(given: str | Path, data_dir: str | Path | None = None) -> ModelSource:
    """What ``given`` is (a run or checkpoint directory, a Hugging Face folder, a known pretrained model's name,
    looked for in ``data_dir`` and the usual places: ``interop.pretrained``), from its ``config.json`` alone.
    Anything else is refused in one line (``CheckpointError``, ``DataError``)."""
    from scratchformer.interop.hf_folder import FolderError, folder_config, is_hf_folder
    from scratchformer.interop.pretrained import PRETRAINED, find_pretrained

    path = Path(given).expanduser()
    known = str(given).removeprefix("sentence-transformers/") in PRETRAINED
    if not is_hf_folder(path) and not (known and not path.exists()):
        ckpt = resolve(path)  # says what is missing: nothing there, a run without a complete checkpoint, ...
        meta = read_meta(ckpt)
        if "train" not in meta:
            raise CheckpointError(f"{ckpt / 'config.json'} is not a scratchformer checkpoint's (no training settings)")
        try:
            config = ModelConfig.from_dict(meta["model"])
        except (ConfigError, TypeError) as err:
            raise CheckpointError(f"{ckpt / 'config.json'} holds an invalid config: {err}") from None
        return ModelSource(str(given), ckpt, "run", config.arch, config, meta)
    folder = path if is_hf_folder(path) else find_pretrained(str(given), data_dir)
    try:
        hf, hf_type, config = folder_config(folder)
    except FolderError as err:
        raise CheckpointError(str(err)) from None
    entry = next(f for f in FAMILIES.values() if hf_type in f.hf_plans)
    return ModelSource(str(given), folder.resolve(), "folder", entry.name, config, hf, hf_type)
