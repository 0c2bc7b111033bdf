"""A sharded run's start from ``init_from`` when the base is too large to read whole in each process.

A base that fits in a process's share of this machine's memory (its float32 weights, about three times over: the
base, the model made from it, a copy in between) is read as one process reads it (``fine_tune.fine_tuned``), then
sharded: the run then equals a one-process run from the same base, new head and adapters included. A larger one is
never whole in any process:

    the model                built on the meta device (shapes, no memory), adapters or frozen layers as asked
    sharded                  every process allocates its own rows of each weight (``fsdp.shard_model``)
    filled, weight by weight each process reads the weight from the base's memory-mapped files (a run's
                             ``model.safetensors`` or shards, a Hugging Face folder's by its name plan) and keeps
                             its rows: one weight at a time is whole, never the model
    what is new              a classifier's head (and pooler) and LoRA's adapters, drawn as ``build_model`` and
                             ``nn/lora.py`` draw them, from the run's seed: the same in every process, but not the
                             values a one-process run draws (it draws the base's weights first)

The base's kinds read this way: a scratchformer run (whole or sharded) and a Llama, Qwen3 or GPT-2 folder. A LoRA
run as a base (its adapters are folded into its base's weights) and a BERT folder are read whole, as they are small
(a line says so). ``SCRATCHFORMER_SHARD_INIT=meta`` (or ``whole``) overrides the choice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

from scratchformer.checkpoints import ModelSource
from scratchformer.families import family, parts
from scratchformer.models import build_model, cut_positions
from scratchformer.nn.config import ModelConfig
from scratchformer.settings.resolve import Resolved
from scratchformer.tasks.base import Task

__all__ = ["fill_from", "read_whole", "sharded_start"]

Tensors = dict[str, Callable[[], Tensor]]


def read_whole(config: ModelConfig, log: Callable[[str], None]) -> bool:
    """Whether a model of ``config`` is read whole in each process (it fits), else built on the meta device."""
    forced = os.environ.get("SCRATCHFORMER_SHARD_INIT", "")
    if forced in ("meta", "whole"):
        return forced == "whole"
    with torch.device("meta"):
        need = 3 * 4 * sum(p.numel() for p in build_model(config).parameters())  # float32, about three times over
    page, free = os.sysconf("SC_PAGE_SIZE"), _free_pages()
    if free is None:
        return True
    share = page * free // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if need <= share:
        return True
    log(f"init_from: {need / 3e9:.1f} GB of float32 weights, {share / 1e9:.1f} GB of memory for each process here: "
        "the model is built on the meta device and each process reads only its rows of the base's weights")
    return False


def _free_pages() -> int | None:
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


@contextlib.contextmanager
def base_tensors(base: ModelSource) -> Iterator[Tensors | None]:
    """The base's weights by our names, each read when called (None: a kind read whole, module docstring)."""
    if base.kind == "folder":
        if family(base.family).classifies:
            yield None
            return
        from scratchformer.interop.hf_folder import folder_tensors

        with folder_tensors(base.path) as (_, tensors):
            yield tensors
        return
    if base.lora is not None:
        yield None
        return
    weights = base.path / "model.safetensors"
    if not weights.is_file():  # a sharded run's: each weight put together from its shards
        yield {name: _shard_reader(base.path, name, shape) for name, shape in _stored_shapes(base).items()}
        return
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        yield {name: (lambda name=name: f.get_tensor(name)) for name in f.keys()}  # noqa: SIM118


def _stored_shapes(base: ModelSource) -> dict[str, tuple[int, ...]]:
    from scratchformer.checkpoints.sharded import index

    found = index(base.path).state_dict_metadata
    return {k.removeprefix("model."): tuple(v.size) for k, v in found.items() if k.startswith("model.")}


def _shard_reader(ckpt: Path, name: str, shape: tuple[int, ...]) -> Callable[[], Tensor]:
    def read() -> Tensor:
        from scratchformer.checkpoints.sharded import read_tensors

        tensor = torch.empty(shape)
        read_tensors(ckpt, {"model": {name: tensor}})
        return tensor
    return read


def fill_from(base: ModelSource, config: ModelConfig) -> Callable[[nn.Module], None] | None:
    """What fills a sharded model of ``config``, built on the meta device, from ``base`` (None when the base is a
    kind that is read whole): ``fill(model)`` once the model is sharded and its rows allocated."""
    with base_tensors(base) as tensors:
        if tensors is None:
            return None

    def fill(model: nn.Module) -> None:
        _rebuild_buffers(model, config)
        with base_tensors(base) as found, torch.no_grad():
            assert found is not None
            aliases = _aliases(model)
            new: list[str] = []
            for name, param in model.named_parameters():
                source = next((found[n] for n in aliases[name] if n in found), None)
                if source is None:
                    new.append(name)
                    continue
                whole = cut_positions({name: source()}, config.max_len)[name]  # a classifier's shorter inputs
                _keep_rows(param, whole.to(param.dtype))
        _draw_new(model, config, new)
    return fill


def _aliases(model: nn.Module) -> dict[str, list[str]]:
    """Each parameter's name -> every name it has (tied weights: the token embedding is the output layer)."""
    by_id: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(param), []).append(name)
    return {names[0]: names for names in by_id.values()}


def _keep_rows(param: Tensor, whole: Tensor) -> None:
    """Copy this process's rows of ``whole`` into ``param`` (a ``DTensor`` piece, or a whole tensor)."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if isinstance(param, DTensor):
        mine = distribute_tensor(whole, param.device_mesh, param.placements, src_data_rank=None).to_local()
        param.to_local().copy_(mine)
    else:
        param.copy_(whole)


def _draw_new(model: nn.Module, config: ModelConfig, new: list[str]) -> None:
    """The parameters that are not the base's (a head, a pooler, LoRA's adapters), drawn whole on the CPU from the
    run's seed, the same in every process, each process keeping its rows."""
    from scratchformer.models.init import init_module
    from scratchformer.nn.lora import LoRALinear, init_adapters

    wanted, head = set(new), parts(model).head
    for prefix, module in model.named_modules():
        adapters = isinstance(module, LoRALinear)  # its A and B live in ParameterDicts below it
        mine = {n: p for n, p in module.named_parameters(recurse=adapters) if f"{prefix}.{n}".lstrip(".") in wanted}
        if not mine:
            continue
        wanted -= {f"{prefix}.{n}".lstrip(".") for n in mine}
        if isinstance(module, LoRALinear):
            wholes = {n: torch.empty(p.shape) for n, p in mine.items()}
            init_adapters([t for n, t in wholes.items() if n.startswith("lora_A.")],
                          [t for n, t in wholes.items() if n.startswith("lora_B.")])
        elif isinstance(module, (nn.Linear, nn.LayerNorm)):  # a twin of it, whole, started as build_model does
            twin = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None) \
                if isinstance(module, nn.Linear) else nn.LayerNorm(module.normalized_shape)
            init_module(prefix, twin, config)
            if module is head and family(config.arch).zero_head:
                nn.init.zeros_(twin.weight)
            wholes = {n: t.detach() for n, t in twin.named_parameters() if n in mine}
        else:
            raise ValueError(f"{prefix} ({type(module).__name__}) is new in this model and has no rule to start it")
        with torch.no_grad():
            for n, p in mine.items():
                _keep_rows(p, wholes[n])


def _rebuild_buffers(model: nn.Module, config: ModelConfig) -> None:
    """The tables that are functions of the shape (rotary and sinusoidal positions), computed anew after the meta
    device left them empty."""
    from scratchformer.nn.embedding import RotaryEmbedding, SinusoidalPositionalEncoding, sinusoidal_table

    device = next((b.device for b in model.buffers()), torch.device("cpu"))
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            module.build_tables(device)
        elif isinstance(module, SinusoidalPositionalEncoding):
            module.table = sinusoidal_table(*module.table.shape).to(device)


def sharded_start(run: Resolved, task: Task, base: ModelSource,
                  log: Callable[[str], None]) -> tuple[nn.Module | None, Callable[[nn.Module], None] | None]:
    """A sharded run's model from ``base`` built on the meta device, and what fills it once sharded; (None, None) when
    the base is read whole (it fits, or is of a kind read whole: module docstring)."""
    from scratchformer.train.fine_tune import start_config

    config = start_config(run, task, base)
    fill = fill_from(base, config) if config is not None else None
    if config is None or fill is None:
        if config is not None or base.kind == "folder":
            log(f"init_from: {base.path} is read whole in each process (a LoRA run's or a BERT folder's weights)")
        return None, None
    if read_whole(config, log):
        return None, None
    with torch.device("meta"):
        model = build_model(config)
    log(f"initialised from {base.described} on the meta device: each process reads only its rows of each weight"
        + ("; the classification head is new" if family(config.arch).classifies else ""))
    return model.train(), fill
