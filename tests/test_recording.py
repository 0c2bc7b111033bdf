"""Attention maps come back as values (``nn/recording.py``): the recorded weights are the reference attention's,
recording changes no output and no attribute of any module, and a record holds only its own block's runs (another
thread's, or another model's, never land in it)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny
from scratchformer import GPT, EncoderClassifier, ModelConfig, Seq2SeqTransformer, ViT
from scratchformer.nn import MultiHeadAttention, attention_reference, causal_mask, record_attention
from scratchformer.nn.attention import set_attention_impl
from scratchformer.nn.recording import attention_maps


def _model(family: str, **kw) -> torch.nn.Module:
    if family == "vit":
        return ViT(ModelConfig(arch="vit", image_size=8, patch_size=4, channels=3, d_model=32, n_heads=4, n_layers=2,
                               d_ff=64, n_classes=3, dropout=0.0, **kw)).eval()
    return {"gpt": GPT, "seq2seq": Seq2SeqTransformer, "encoder": EncoderClassifier}[family](tiny(family, **kw)).eval()


def _inputs(family: str) -> tuple:
    """Two examples, the second padded (pad id 0) where the family takes padding."""
    ids = torch.randint(1, 37, (2, 7))
    padded = ids.clone()
    padded[1, 5:] = 0
    if family == "vit":
        return (torch.rand(2, 3, 8, 8),)
    if family == "seq2seq":
        return (padded, torch.randint(1, 37, (2, 5)))
    return (padded if family == "encoder" else ids,)


FAMILIES = ["gpt", "seq2seq", "encoder", "vit"]


def _split(m: MultiHeadAttention, t: torch.Tensor) -> torch.Tensor:
    B, L, _ = t.shape
    return t.view(B, L, m.n_heads, m.head_dim).transpose(1, 2)  # (B, L, C) -> (B, H, L, D)


def _reference_weights(m: MultiHeadAttention, args: tuple, kwargs: dict) -> torch.Tensor:
    """Equation 1's weights recomputed from what the module was called with, by attention_reference."""
    x = args[0]
    q = _split(m, F.linear(x, m.w_q, m.b_q))
    if len(args) > 1:  # cross-attention: keys projected (and normalised) from the encoder memory already
        k, is_causal = args[1][0], False
    else:
        k, is_causal = _split(m, F.linear(x, m.w_k, m.b_k)), kwargs.get("is_causal", False)
        if m.k_norm is not None:
            k = m.k_norm(k)
        if m.rope is not None:
            k = m.rope(k, kwargs.get("positions"))
    if m.q_norm is not None:
        q = m.q_norm(q)
    if m.rope is not None and len(args) == 1:
        q = m.rope(q, kwargs.get("positions"))
    mask = kwargs.get("mask")
    if is_causal:
        causal = causal_mask(q.size(-2), k.size(-2))
        mask = causal if mask is None else mask & causal
    return attention_reference(q, k, k, mask)[1]  # (B, H, T, S); the values do not enter the weights


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("variant", [{}, {"positional": "rotary", "qk_norm": True, "norm": "pre"}])
def test_recorded_maps_are_the_reference_attentions_weights(family, variant):
    if family == "vit" and variant:
        variant = {"qk_norm": True, "norm": "pre"}  # a ViT's positions are learned
    model = _model(family, **variant)
    calls: dict[str, tuple] = {}
    handles = [m.register_forward_pre_hook(lambda mod, a, kw, name=name: calls.__setitem__(name, (mod, a, kw)),
                                           with_kwargs=True)
               for name, m in model.named_modules() if isinstance(m, MultiHeadAttention)]
    try:
        with torch.no_grad(), record_attention(model) as maps:
            model(*_inputs(family))
    finally:
        for h in handles:
            h.remove()
    assert sorted(maps) == sorted(calls) and len(maps) == (6 if family == "seq2seq" else 2)
    for name, (mod, args, kwargs) in calls.items():
        expected = _reference_weights(mod, args, kwargs)
        torch.testing.assert_close(maps[name], expected, atol=1e-6, rtol=0)
        torch.testing.assert_close(maps[name].sum(-1), torch.ones(expected.shape[:-1]), atol=1e-5, rtol=0)
    if family == "encoder":  # the padded example puts no weight on its padding
        assert maps["encoder.layers.0.self_attn"][1, :, :, 5:].abs().max() == 0


@pytest.mark.parametrize("family", FAMILIES)
def test_recording_changes_no_output(family):
    model, inputs = _model(family), _inputs(family)
    with torch.no_grad():
        plain = model(*inputs)
        with record_attention(model) as maps:
            recorded = model(*inputs)
        assert maps
        torch.testing.assert_close(recorded, plain, atol=1e-5, rtol=0)  # sdpa before, the reference path now
        set_attention_impl(model, "reference")  # the same path both times: the same numbers, bit for bit
        with record_attention(model):
            recorded = model(*inputs)
        assert torch.equal(recorded, model(*inputs))


def _attributes(model: torch.nn.Module) -> dict:
    """Every module's attributes: plain values as they are, containers (parameters, buffers, submodules,
    hooks) by their items, anything else by identity."""
    def frozen(v):
        if isinstance(v, (bool, int, float, str, type(None))):
            return v
        if isinstance(v, dict):
            return tuple((k, frozen(x)) for k, x in v.items())
        return id(v)

    return {(name, key): frozen(v) for name, m in model.named_modules() for key, v in vars(m).items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_no_attribute_of_any_module_changes_while_recording(family):
    model, inputs = _model(family), _inputs(family)
    before = _attributes(model)
    with torch.no_grad(), record_attention(model) as maps:
        model(*inputs)
        assert maps and _attributes(model) == before  # during the block: no module holds a flag or a map
    assert _attributes(model) == before
    attention_maps(model.train(), *inputs)  # eval mode meanwhile, then handed back as it was
    assert model.training and _attributes(model.eval()) == before


def test_a_record_holds_only_its_block_s_runs_of_its_own_model():
    gpt, other = _model("gpt"), _model("gpt")
    a, b = torch.randint(1, 37, (1, 6)), torch.randint(1, 37, (1, 6))
    expected = attention_maps(gpt, a)
    opened, ran = threading.Event(), threading.Event()
    got: dict[str, torch.Tensor] = {}

    def recorder() -> None:
        with torch.no_grad(), record_attention(gpt) as maps:
            gpt(a)
            opened.set()
            ran.wait(30)  # meanwhile another thread runs the same model on another input
            other(a)  # another model in the same block: not this record's business
        got.update(maps)

    thread = threading.Thread(target=recorder)
    thread.start()
    assert opened.wait(30)
    with torch.no_grad():
        gpt(b)
    ran.set()
    thread.join(30)
    assert sorted(got) == sorted(expected)
    for name, w in expected.items():
        torch.testing.assert_close(got[name], w, atol=0, rtol=0)


def test_nested_records_each_get_the_maps_and_closing_stops_recording():
    gpt, ids = _model("gpt"), torch.randint(1, 37, (1, 5))
    with torch.no_grad(), record_attention(gpt) as outer:
        with record_attention(gpt.decoder.layers[0]) as inner:
            gpt(ids)
        gpt(ids[:, :3])  # only the outer block is open now
    assert list(inner) == ["self_attn"] and inner["self_attn"].shape == (1, 4, 5, 5)
    assert outer["decoder.layers.0.self_attn"].shape == (1, 4, 3, 3)  # a module's last run wins
    with torch.no_grad():
        gpt(ids)
    assert outer["decoder.layers.0.self_attn"].shape == (1, 4, 3, 3)  # closed: nothing more lands in it


def test_a_compiled_forward_has_no_graph_break_from_the_recording_hook():
    import torch._dynamo

    torch._dynamo.reset()
    explained = torch._dynamo.explain(_model("gpt"))(torch.randint(1, 37, (1, 7)))
    assert explained.graph_break_count == 0, explained.break_reasons
