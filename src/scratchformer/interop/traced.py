"""Export trained models for serving without this package: ONNX (any runtime) and TorchScript (libtorch).

One entry point per format, the same for every family that reads tokens (the family registry's ``exports``)::

    GPT                 input_ids (B, T) [, attention_mask (B, T)]       -> logits (B, T, V)
    Seq2SeqTransformer  src (B, S), tgt (B, T) [, src_padding_mask (B, S)]        -> logits (B, T, V_tgt)
    EncoderClassifier   input_ids (B, T) [, mask (B, T)]                  -> logits (B, K)
    GPTClassifier       input_ids (B, T) [, mask (B, T)]                  -> logits (B, K)

The graph inputs are the ``forward`` arguments named in ``example``: by default ``input_ids`` for GPT,
``src, tgt, src_padding_mask`` for seq2seq and ``input_ids, mask`` for the classifiers. Masks are boolean,
``True`` = real token (the convention of the whole package); a mask left out of ``example`` is computed
inside the graph as ``ids != pad_id``. Batch and sequence lengths are dynamic (ONNX axis names
``batch``, ``seq_len``, ``src_len``, ``tgt_len``), up to the model's ``max_len``; tests run every
family at shapes other than the example's.

How each format is produced, and why:

- ONNX: ``torch.onnx.export(dynamo=True)`` (``torch.export`` + onnxscript), the exporter PyTorch
  maintains. It exports the fast attention path (``F.scaled_dot_product_attention``, ``is_causal`` for
  the decoder) directly, and records sequence lengths symbolically, so position ranges and causal masks
  are computed from the input shape rather than baked in at the example's length.
- TorchScript: ``torch.jit.trace``, checked at a second shape. ``torch.jit.script`` cannot compile the
  model code (lambdas passed to ``ResidualNorm``, ``Literal`` types, context managers), and the code
  should not be bent for a deprecated format. Tracing records ``x.size(1)`` as a graph value, so
  ``torch.arange(T)`` and the reshapes follow the input; the only Python branches taken at trace time
  are the ``max_len`` check (too-long inputs then fail at the position-table lookup instead) and
  ``attend``'s "single query" shortcut, which is why example lengths must be at least 2. TorchScript is
  deprecated in recent PyTorch; the tracer's warnings about these branches are expected and silenced.

Both writers are atomic: the file is written under a temporary name in the destination's directory and
renamed into place, so an interrupted export never leaves a truncated model behind.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from scratchformer.atomic import staging_dir
from scratchformer.extras import require
from scratchformer.models import (
    GPT,
    EncoderClassifier,
    GPTClassifier,
    Seq2SeqTransformer,
    eval_mode,  # no dropout in an exported graph
)

# Models above this size keep their weights in a side file ``NAME.data``: protobuf caps a file at 2 GiB.
_EXTERNAL_DATA_BYTES = 1536 * 2**20

# Which length axis each input uses; every input's axis 0 is "batch".
_LENGTH_AXIS: dict[type[nn.Module], dict[str, str]] = {
    GPT: {"input_ids": "seq_len", "attention_mask": "seq_len"},
    Seq2SeqTransformer: {"src": "src_len", "tgt": "tgt_len", "src_padding_mask": "src_len",
                         "tgt_padding_mask": "tgt_len"},
    EncoderClassifier: {"input_ids": "seq_len", "mask": "seq_len"},
    GPTClassifier: {"input_ids": "seq_len", "mask": "seq_len"},
}

Example = Mapping[str, Tensor] | Sequence[Tensor]


class ExportError(ValueError):
    """An export that cannot be done as asked (unsupported model, bad example, unwritable path)."""


# ============================================================================================= ONNX

def export_onnx(model: nn.Module, path: str | os.PathLike, *, example: Example | None = None,
                opset: int | None = None) -> Path:
    """Write ``model`` to ``path`` as ONNX with dynamic batch and sequence axes; return the path.

    ``example``: the inputs to trace with, a mapping ``{forward argument name: tensor}`` or a tuple in
    ``forward``'s order; its keys become the graph's input names (the output is ``logits``). Default:
    a batch of 2 random sequences of length ``min(8, max_len)`` with the family's default inputs (see
    the module docstring). Every example dimension must be >= 2: ``torch.export`` treats sizes 0 and 1
    as constants. ``opset``: ONNX opset version (default: the exporter's). The model is exported in eval
    mode and handed back in the mode it came in.
    """
    family = _family(model)
    named = _example(model, family, example)
    path = _destination(path)
    require("onnxscript", "onnx")  # the dynamo exporter needs it (and onnx)
    if "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        raise ExportError(f"ONNX export needs torch >= 2.5 (torch.onnx.export(dynamo=True)), not {torch.__version__}")

    # One Dim object per axis name ties axes together (src and src_padding_mask share src_len). Lengths are
    # bounded by max_len because forward checks it, and torch.export must prove every such check.
    max_len = model.config.max_len
    dims = {"batch": torch.export.Dim("batch")}
    for axis in {_LENGTH_AXIS[family][name] for name in named}:
        dims[axis] = torch.export.Dim(axis, max=max_len)
    dynamic_shapes = {name: {0: dims["batch"], 1: dims[_LENGTH_AXIS[family][name]]} for name in named}
    with eval_mode(model), _quiet():
        program = torch.onnx.export(model, (), None, kwargs=dict(named), input_names=list(named),
                                    output_names=["logits"], dynamic_shapes=dynamic_shapes,
                                    opset_version=opset, dynamo=True, verbose=False)
    n_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    external = n_bytes > _EXTERNAL_DATA_BYTES
    with _atomic_dir(path) as tmp:
        program.save(tmp / path.name, external_data=external)
        if external:  # the .onnx refers to its data file by its (final) base name
            os.replace(tmp / f"{path.name}.data", path.with_name(f"{path.name}.data"))
        os.replace(tmp / path.name, path)
    return path


def verify_onnx(model: nn.Module, path: str | os.PathLike, *inputs: Tensor, **named_inputs: Tensor) -> float:
    """Run the ONNX file at ``path`` in onnxruntime and ``model`` in PyTorch on the same inputs; return
    the largest absolute difference between their logits (``inf`` if their shapes differ).

    Inputs are given in the graph's input order (``verify_onnx(model, path, src, tgt, src_padding_mask)``) or
    by name (``verify_onnx(model, path, input_ids=ids)``); the names are ``forward``'s argument names.
    """
    require("onnxruntime", "onnx")
    import onnxruntime as ort
    if not Path(path).is_file():
        raise ExportError(f"no ONNX file at {path}")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    graph_inputs = [i.name for i in session.get_inputs()]
    if len(inputs) > len(graph_inputs):
        raise ExportError(f"{len(inputs)} inputs given, but {path} takes {len(graph_inputs)}: {graph_inputs}")
    feeds = {**dict(zip(graph_inputs, inputs)), **named_inputs}
    if set(feeds) != set(graph_inputs):
        raise ExportError(f"{path} takes inputs {graph_inputs}, got {sorted(feeds)}")
    onnx_logits = session.run(None, {k: v.detach().cpu().numpy() for k, v in feeds.items()})[0]
    device = _device(model)
    with eval_mode(model), torch.no_grad():
        torch_logits = model(**{k: v.to(device) for k, v in feeds.items()})
    if tuple(torch_logits.shape) != onnx_logits.shape:  # e.g. a length baked in at export time
        return float("inf")
    return (torch_logits.float().cpu() - torch.from_numpy(onnx_logits).float()).abs().max().item()


# ====================================================================================== TorchScript

def export_torchscript(model: nn.Module, path: str | os.PathLike, *, example: Example | None = None) -> Path:
    """Write ``model`` to ``path`` as a traced TorchScript module (``torch.jit.load`` reads it); return the path.

    The module takes the inputs of ``example`` positionally, in ``forward``'s order (default: the same
    inputs as ``export_onnx``). The trace is checked against the eager model at a second, different
    (batch, length) shape before it is written; see the module docstring for why tracing is safe here.
    """
    family = _family(model)
    named = _example(model, family, example)
    order = list(inspect.signature(model.forward).parameters)
    if list(named) != order[:len(named)]:
        # a traced module takes positional arguments only, so the inputs must be a prefix of forward's
        raise ExportError(f"TorchScript inputs must be the first arguments of forward {order}, got {list(named)}")
    path = _destination(path)
    args = tuple(named.values())
    check = _other_shape(named, family, model.config.max_len)
    with eval_mode(model), warnings.catch_warnings():
        # TracerWarning: the two shape branches described above, both safe; DeprecationWarning: torch.jit.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit")
        warnings.filterwarnings("ignore", message=r".*torch\.jit.*deprecated", category=DeprecationWarning)
        traced = torch.jit.trace(model, args, check_inputs=[check], check_tolerance=1e-4)
        with _atomic_dir(path) as tmp:
            torch.jit.save(traced, str(tmp / path.name))
            os.replace(tmp / path.name, path)
    return path


# ========================================================================================== helpers

def _family(model: nn.Module) -> type[nn.Module]:
    for family in _LENGTH_AXIS:
        if isinstance(model, family):
            return family
    raise ExportError(f"cannot export {type(model).__name__}: expected a "
                      f"{', '.join(c.__name__ for c in _LENGTH_AXIS)}")


def _device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _default_example(model: nn.Module, family: type[nn.Module]) -> dict[str, Tensor]:
    cfg = model.config
    length = max(2, min(8, cfg.max_len))
    gen = torch.Generator().manual_seed(0)
    # ids in 1..V-1 and all-True masks: the values do not shape the graph, only the dtypes and ranks do
    ids = lambda n: torch.randint(1, max(cfg.vocab_size, 2), (2, n), generator=gen)  # noqa: E731
    if family is Seq2SeqTransformer:
        src_len = max(2, min(length + 1, cfg.max_len))  # S != T, so no axis is confused with the other
        return {"src": ids(src_len), "tgt": torch.randint(1, max(cfg.target_vocab_size, 2), (2, length),
                                                          generator=gen),
                "src_padding_mask": torch.ones(2, src_len, dtype=torch.bool)}
    if "mask" in _LENGTH_AXIS[family]:  # a classifier's real-token mask
        return {"input_ids": ids(length), "mask": torch.ones(2, length, dtype=torch.bool)}
    return {"input_ids": ids(length)}


def _example(model: nn.Module, family: type[nn.Module], example: Example | None) -> dict[str, Tensor]:
    """The example as ``{forward argument name: tensor}`` on the model's device, checked."""
    params = [n for n in inspect.signature(model.forward).parameters if n in _LENGTH_AXIS[family]]
    if example is None:
        named = _default_example(model, family)
    elif isinstance(example, Mapping):
        named = dict(example)
    else:
        if len(example) > len(params):
            raise ExportError(f"{type(model).__name__} takes at most {len(params)} inputs {params}, "
                              f"got {len(example)}")
        named = dict(zip(params, example))
    unknown = sorted(set(named) - set(params))
    if unknown:
        raise ExportError(f"{type(model).__name__} has no input {', '.join(map(repr, unknown))}; choose from {params}")
    named = {k: named[k] for k in params if k in named}  # forward's order
    for name, t in named.items():
        if not isinstance(t, Tensor) or t.dim() != 2:
            raise ExportError(f"example input {name!r} must be a (batch, length) tensor")
        if min(t.shape) < 2:
            raise ExportError(f"example input {name!r} has shape {tuple(t.shape)}: use batch and length >= 2, "
                              "otherwise the exporter treats a size of 1 as a constant")
        if t.size(1) > model.config.max_len:
            raise ExportError(f"example input {name!r} is longer than max_len={model.config.max_len}")
    device = _device(model)
    return {k: v.to(device) for k, v in named.items()}


def _other_shape(named: dict[str, Tensor], family: type[nn.Module], max_len: int) -> tuple[Tensor, ...]:
    """The example at another shape, to check a trace with: one more row, every length axis changed
    (by different amounts, so that a source length confused with a target length shows up)."""
    lengths: dict[str, int] = {}
    for name, t in named.items():
        axis, T = _LENGTH_AXIS[family][name], t.size(1)
        step = 3 if axis == "src_len" else 2
        lengths.setdefault(axis, T + step if T + step <= max_len else max(2, T - 1))
    out = []
    for name, t in named.items():
        T2 = lengths[_LENGTH_AXIS[family][name]]
        t = torch.cat([t, t[:1]], 0)  # (B + 1, T): rows of the example keep the ids in range
        while t.size(1) < T2:
            t = torch.cat([t, t[:, : T2 - t.size(1)]], 1)
        out.append(t[:, :T2].contiguous())  # (B + 1, T2)
    return tuple(out)


def _destination(path: str | os.PathLike) -> Path:
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ExportError(f"cannot write {path}: it is a directory")
    if not parent.is_dir():
        raise ExportError(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ExportError(f"cannot write {path}: directory {parent} is not writable")
    return path


@contextlib.contextmanager
def _atomic_dir(path: Path) -> Iterator[Path]:
    """A temporary directory beside ``path`` (``atomic.staging_dir``: the same file system, so ``os.replace`` into
    ``path`` is an atomic rename); a failed write is one ``ExportError`` line."""
    try:
        with staging_dir(path) as tmp:
            yield tmp
    except OSError as e:
        raise ExportError(f"cannot write {path}: {e.strerror or e}") from e


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's progress lines and known-harmless warnings; errors still propagate."""
    import logging

    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._export", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            # "axis name batch will not be used, since it shares constraints with batch": one Dim, two inputs
            warnings.filterwarnings("ignore", message=r".*axis name", category=UserWarning)
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


__all__ = ["ExportError", "export_onnx", "export_torchscript", "verify_onnx"]
