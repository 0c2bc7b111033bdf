"""Export to ONNX and TorchScript: the exported model equals the PyTorch one at shapes it was not traced at.

Each family is exported once (batch 2, length 8; seq2seq source 9) and then run at other batch sizes and
lengths, including the model's ``max_len`` and padded rows, so shapes baked in as constants (position
ranges, causal masks, reshapes) would show up as errors or wrong logits.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from conftest import tiny
from scratchformer import GPT, EncoderClassifier
from scratchformer.families import FAMILIES, family
from scratchformer.interop import ExportError, export_onnx, export_torchscript, verify_onnx
from scratchformer.models import build_model

ATOL = 1e-4
V = 37  # tiny()'s vocabulary


def _ids(B: int, T: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(1, V, (B, T), generator=gen)


def _padded(B: int, T: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids with trailing padding (pad_id 0) in every row but the first, and the matching real-token mask."""
    ids = _ids(B, T, gen)
    lengths = torch.randint(1, T + 1, (B,), generator=gen)
    lengths[0] = T
    mask = torch.arange(T)[None, :] < lengths[:, None]  # (B, T), True = real token
    return ids.masked_fill(~mask, 0), mask


# Every family of the registry with a single-graph export (so one added later is exported here too)
EXPORTED = [name for name, entry in FAMILIES.items() if "onnx-single" in entry.exports]
TRACED = [name for name, entry in FAMILIES.items() if "torchscript" in entry.exports]


def _models() -> dict[str, torch.nn.Module]:
    """A tiny model of each family; every other one with dropout in train mode: the export must switch to eval mode
    and hand the model back in the mode it came in."""
    torch.manual_seed(0)
    models = {}
    for i, name in enumerate(EXPORTED):
        classes = {"n_classes": 3} if family(name).classifies else {}
        models[name] = build_model(tiny(name, dropout=0.1, **classes)).train(i % 2 == 0)
    return models


def _inputs(name: str, B: int, T: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Inputs by forward-argument name, by what the family reads: a language model's ids; an encoder-decoder's
    padded source and a shorter target; a classifier's padded ids and their real-token mask."""
    entry = family(name)
    if entry.two_stacks:
        src, src_mask = _padded(B, T, gen)
        return {"src": src, "tgt": _ids(B, max(1, T - 4), gen), "src_padding_mask": src_mask}
    if not entry.classifies:
        return {"input_ids": _ids(B, T, gen)}
    ids, mask = _padded(B, T, gen)
    return {"input_ids": ids, "mask": mask}


# (batch, length) pairs that differ from the example's (2, 8): larger, single row, and max_len (48).
SHAPES = [(3, 13), (1, 5), (4, 48)]


# =============================================================================================== ONNX

@pytest.fixture(scope="module")
def onnx_exports(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
    pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")
    models = _models()
    directory = tmp_path_factory.mktemp("onnx")
    paths = {name: export_onnx(model, directory / f"{name}.onnx") for name, model in models.items()}
    modes = {name: model.training for name, model in models.items()}  # before any test switches them
    return models, paths, directory, modes


@pytest.mark.slow
@pytest.mark.parametrize("family", EXPORTED)
def test_onnx_matches_pytorch_at_other_shapes(onnx_exports, family):
    import onnxruntime as ort

    models, paths, _, _ = onnx_exports
    model = models[family]
    session = ort.InferenceSession(str(paths[family]), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(1)
    for B, T in SHAPES:
        inputs = _inputs(family, B, T, gen)
        (got,) = session.run(None, {k: v.numpy() for k, v in inputs.items()})
        with torch.no_grad():
            want = model.eval()(**inputs)
        assert got.shape == tuple(want.shape), (B, T)
        torch.testing.assert_close(torch.from_numpy(got), want, atol=ATOL, rtol=0)
        assert verify_onnx(model, paths[family], **inputs) < ATOL


def test_onnx_export_restores_train_mode_and_writes_one_file(onnx_exports):
    _, _, directory, modes = onnx_exports
    assert modes == {name: i % 2 == 0 for i, name in enumerate(EXPORTED)}  # handed back as given
    # nothing but the models: the temporary files of the atomic write are gone
    assert sorted(p.name for p in directory.iterdir()) == sorted(f"{name}.onnx" for name in EXPORTED)


@pytest.mark.parametrize("name", EXPORTED)
def test_onnx_graph_has_named_dynamic_axes(onnx_exports, name):
    onnx = pytest.importorskip("onnx", reason="reading the graph needs the onnx package")
    _, paths, _, _ = onnx_exports
    graph = onnx.load(str(paths[name])).graph
    axes = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in [*graph.input, *graph.output]}
    length = {"src": "src_len", "src_padding_mask": "src_len", "tgt": "tgt_len"}
    want = {k: ["batch", length.get(k, "seq_len")] for k in _inputs(name, 2, 8, torch.Generator())}
    entry = family(name)
    want["logits"] = ["batch", 3] if entry.classifies else ["batch", "tgt_len" if entry.two_stacks else "seq_len", V]
    assert axes == want


@pytest.mark.parametrize("family", [name for name in EXPORTED if "mask" in _inputs(name, 1, 2, torch.Generator())
                                    or family(name).two_stacks])
def test_onnx_ignores_padded_tokens(onnx_exports, family):
    """Changing the ids under the padding mask changes no logit, in onnxruntime as in PyTorch."""
    import onnxruntime as ort

    _, paths, _, _ = onnx_exports
    session = ort.InferenceSession(str(paths[family]), providers=["CPUExecutionProvider"])
    gen = torch.Generator().manual_seed(2)
    inputs = _inputs(family, 4, 12, gen)
    ids_name, mask_name = ("src", "src_padding_mask") if "src" in inputs else ("input_ids", "mask")
    mask = inputs[mask_name]
    assert not mask.all()  # some padding to change
    changed = dict(inputs)
    changed[ids_name] = torch.where(mask, inputs[ids_name], _ids(4, 12, gen))
    (a,) = session.run(None, {k: v.numpy() for k, v in inputs.items()})
    (b,) = session.run(None, {k: v.numpy() for k, v in changed.items()})
    torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), atol=1e-5, rtol=0)


def test_verify_onnx_detects_a_different_model(onnx_exports):
    models, paths, _, _ = onnx_exports
    other = copy.deepcopy(models["encoder"])
    with torch.no_grad():
        other.head.bias.add_(0.5)  # (the weights would not do: mean-pooled post-LN features sum to ~0)
    ids, mask = _padded(2, 6, torch.Generator().manual_seed(3))
    assert verify_onnx(models["encoder"], paths["encoder"], ids, mask) < ATOL  # positional, in graph order
    assert verify_onnx(other, paths["encoder"], ids, mask) > 1e-2
    with pytest.raises(ExportError, match="takes inputs"):
        verify_onnx(models["encoder"], paths["encoder"], input_ids=ids)


@pytest.mark.slow
def test_onnx_gpt_with_left_padding_mask(tmp_path):
    """GPT exported with an attention_mask: positions count real tokens only, at any length."""
    pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
    pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")
    model = GPT(tiny("gpt", positional="rotary", n_layers=1)).eval()  # one layer: the masks are what is tested
    gen = torch.Generator().manual_seed(4)
    example = {"input_ids": _ids(2, 6, gen), "attention_mask": torch.ones(2, 6, dtype=torch.bool)}
    path = export_onnx(model, tmp_path / "gpt.onnx", example=example)
    for B, T in [(3, 11), (2, 30)]:
        ids = _ids(B, T, gen)
        mask = torch.ones(B, T, dtype=torch.bool)
        mask[1:, : T // 3] = False  # left padding
        assert verify_onnx(model, path, ids.masked_fill(~mask, 0), mask) < ATOL


# ======================================================================================== TorchScript

@pytest.mark.filterwarnings("ignore:.*torch.jit.load.*deprecated:DeprecationWarning")
@pytest.mark.parametrize("family", TRACED)
def test_torchscript_matches_pytorch_at_other_shapes(tmp_path, family):
    model = _models()[family]
    was_training = model.training
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = export_torchscript(model, tmp_path / f"{family}.pt")
    noisy = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    assert not noisy, [str(w.message) for w in noisy]
    assert model.training == was_training
    assert [p.name for p in tmp_path.iterdir()] == [f"{family}.pt"]

    loaded = torch.jit.load(str(path))
    model.eval()
    gen = torch.Generator().manual_seed(5)
    for B, T in SHAPES:
        inputs = _inputs(family, B, T, gen)
        with torch.no_grad():
            got = loaded(*inputs.values())  # positional, in forward's order
            want = model(**inputs)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


# ============================================================================================= errors

def test_export_errors_are_one_readable_line(tmp_path):
    model = EncoderClassifier(tiny("encoder"))
    ids = torch.randint(1, V, (2, 5))
    cases = [
        (lambda: export_torchscript(torch.nn.Linear(2, 2), tmp_path / "m.pt"), "cannot export Linear"),
        (lambda: export_torchscript(model, tmp_path / "missing" / "m.pt"), "does not exist"),
        (lambda: export_torchscript(model, tmp_path), "is a directory"),
        (lambda: export_torchscript(model, tmp_path / "m.pt", example={"ids": ids}), "has no input 'ids'"),
        (lambda: export_torchscript(model, tmp_path / "m.pt", example=(ids[:1],)), "batch and length >= 2"),
        (lambda: export_torchscript(model, tmp_path / "m.pt", example=(torch.ones(2, 49, dtype=torch.long),)),
         "longer than max_len=48"),
        (lambda: export_onnx(model, tmp_path / "missing" / "m.onnx"), "does not exist"),
    ]
    for call, message in cases:
        with pytest.raises(ExportError, match=message) as info:
            call()
        assert "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing half-written
