"""Linear attention (Katharopoulos et al. 2020): the equation, its parallel and recurrent forms, masks, the
recurrent state in place of the KV cache, and attention="linear" end to end (no new parameters, checkpoints,
the CLI). The family-wide invariances (causality, padding, cached == recomputed decoding) run over both kinds of
attention in test_models.py and test_generation.py."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from conftest import tiny
from scratchformer import GPT, EncoderClassifier, Seq2SeqTransformer, build_model, count_parameters_formula
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_model, save_checkpoint
from scratchformer.generation import generate
from scratchformer.nn.attention import set_attention_impl
from scratchformer.nn.kv_cache import KVCache, LinearAttentionState
from scratchformer.nn.linear_attention import (
    causal_linear_attention,
    elu_feature_map,
    linear_attend,
    linear_attention_reference,
    per_position_prefix_sums,
    recurrent_linear_attention,
)
from scratchformer.tokenizers import CharTokenizer
from shared_runs import TINY

FAMILIES = {"gpt": GPT, "seq2seq": Seq2SeqTransformer, "encoder": EncoderClassifier}


def qkv(B=2, H=3, T=5, S=None, D=8, grad=False):
    S = T if S is None else S
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    return [t.requires_grad_(grad) for t in (q, k, v)]


def key_mask(B, S, lengths):
    return (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[:, None, None, :]  # (B, 1, 1, S)


def textbook_prefix_sums(q, k, v, mask=None):
    """The causal form with one (D, D) prefix sum per position: s_i = sum_{j<=i} phi(k_j) v_j^T."""
    phi_q, phi_k = elu_feature_map(q), elu_feature_map(k)
    if mask is not None:
        phi_k = phi_k * mask[..., 0, :, None]
    s = torch.einsum("bhtd,bhte->bhtde", phi_k, v).cumsum(2)  # (B, H, T, D, D)
    z = phi_k.cumsum(2)  # (B, H, T, D)
    return torch.einsum("bhtd,bhtde->bhte", phi_q, s) / (torch.einsum("bhtd,bhtd->bht", phi_q, z)[..., None] + 1e-6)


# ------------------------------------------------------------------------------------ the equation


def test_reference_is_the_kernel_equation_and_its_weights_average_the_values():
    q, k, v = qkv(T=4, S=6)
    phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # elu(x) + 1, written out  # noqa: E731
    sim = torch.einsum("bhtd,bhsd->bhts", phi(q), phi(k))
    expected_w = sim / (sim.sum(-1, keepdim=True) + 1e-6)
    out, w = linear_attention_reference(q, k, v)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, torch.einsum("bhts,bhsd->bhtd", expected_w, v))
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 4))


@pytest.mark.parametrize("T", [1, 5, 63, 64, 65, 200])
@pytest.mark.parametrize("padded", [False, True])
def test_parallel_prefix_sums_equal_recurrent_textbook_and_reference(T, padded):
    """The chunked parallel form (training) == the token-by-token recurrent form (generation) <= 1e-5, and
    both equal the per-position prefix sums and the quadratic definition; chunk edges at 63/64/65."""
    q, k, v = qkv(T=T)
    mask = key_mask(2, T, [T, max(1, T // 2)]) if padded else None
    parallel, _ = linear_attend(q, k, v, mask=mask, is_causal=True)
    state = LinearAttentionState(2, 3, 8)
    phi_k = elu_feature_map(k) * (mask[..., 0, :, None] if padded else 1)
    recurrent = recurrent_linear_attention(elu_feature_map(q), phi_k, v, state)
    reference, _ = linear_attention_reference(q, k, v, mask, is_causal=True)
    torch.testing.assert_close(parallel, recurrent, atol=1e-5, rtol=0)
    torch.testing.assert_close(parallel, textbook_prefix_sums(q, k, v, mask), atol=1e-5, rtol=0)
    torch.testing.assert_close(parallel, per_position_prefix_sums(elu_feature_map(q), phi_k, v), atol=1e-5, rtol=0)
    torch.testing.assert_close(parallel, reference, atol=1e-5, rtol=0)
    assert state.length == T and state.s.shape == (2, 3, 8, 8)


@pytest.mark.parametrize("chunk", [1, 3, 64, 500])
def test_chunk_size_changes_nothing_and_the_returned_sums_are_the_whole_blocks(chunk):
    q, k, v = qkv(T=37)
    expected = textbook_prefix_sums(q, k, v)
    out, s, z = causal_linear_attention(elu_feature_map(q), elu_feature_map(k), v, chunk=chunk)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(s, torch.einsum("bhtd,bhte->bhde", elu_feature_map(k), v), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(z, elu_feature_map(k).sum(2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("split", [1, 7, 70])
def test_a_prompt_into_the_state_then_one_token_at_a_time_equals_the_parallel_form(split):
    q, k, v = qkv(T=90)
    full, _ = linear_attend(q, k, v, is_causal=True)
    state = LinearAttentionState(2, 3, 8)
    parts = [linear_attend(q[:, :, :split], k[:, :, :split], v[:, :, :split], is_causal=True, state=state)[0]]
    for t in range(split, 90):
        parts.append(linear_attend(q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1], is_causal=True,
                                   state=state)[0])
    torch.testing.assert_close(torch.cat(parts, 2), full, atol=1e-5, rtol=0)
    assert state.length == 90


CASES = {
    "self": dict(T=6, S=6, mask=None, is_causal=False),
    "self+padding": dict(T=6, S=6, mask=key_mask(2, 6, [6, 3]), is_causal=False),
    "causal": dict(T=70, S=70, mask=None, is_causal=True),
    "causal+padding": dict(T=9, S=9, mask=key_mask(2, 9, [9, 4]), is_causal=True),
    "cross": dict(T=3, S=8, mask=key_mask(2, 8, [8, 5]), is_causal=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fast_path_and_reference_agree_forward_and_backward(case):
    c = CASES[case]
    outs, grads = [], []
    for impl in ("reference", "auto"):
        torch.manual_seed(1)
        q, k, v = qkv(T=c["T"], S=c["S"], grad=True)
        out, _ = linear_attend(q, k, v, mask=c["mask"], is_causal=c["is_causal"], impl=impl)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append([t.grad for t in (q, k, v)])
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)
    for g_ref, g_fast in zip(*grads):
        torch.testing.assert_close(g_ref, g_fast, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("is_causal", [False, True])
def test_masked_keys_contribute_nothing_and_a_row_with_nothing_to_attend_to_is_zero(is_causal):
    q, k, v = qkv(T=6, grad=True)
    mask = key_mask(2, 6, [4, 0])  # the second sentence is all padding
    out, _ = linear_attend(q, k, v, mask=mask, is_causal=is_causal)
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[0, :, 4:], v2[0, :, 4:] = 100.0, -100.0  # other numbers under the mask...
    torch.testing.assert_close(linear_attend(q, k2, v2, mask=mask, is_causal=is_causal)[0][0], out[0].detach())
    assert torch.all(out[1] == 0) and not out.isnan().any()  # ...change nothing; no key: zeros, not NaN
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_what_linear_attention_cannot_express_is_refused():
    q, k, v = qkv(T=4)
    with pytest.raises(ValueError, match="key masks only"):
        linear_attend(q, k, v, mask=torch.ones(4, 4, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="weights need every key"):
        linear_attend(q, k, v, is_causal=True, state=LinearAttentionState(2, 3, 8), need_weights=True)
    with pytest.raises(ValueError, match="as many keys as queries"):
        linear_attend(q[:, :, :1], k, v, is_causal=True)
    with pytest.raises(ValueError, match="attention_window"):
        tiny("encoder", attention="linear", attention_window=2)
    with pytest.raises(ValueError, match="attention_dropout"):
        tiny("gpt", attention="linear", attention_dropout=0.1)


# ------------------------------------------------------------------------------------ the recurrent state


def test_the_model_chooses_its_cache_and_refuses_the_other_kind():
    linear, softmax = GPT(tiny("gpt", attention="linear")).eval(), GPT(tiny("gpt")).eval()
    assert all(isinstance(c, LinearAttentionState) for c in linear.new_cache(2).self_attn)
    assert all(isinstance(c, KVCache) for c in softmax.new_cache(2).self_attn)
    ids = torch.randint(1, 37, (2, 3))
    with pytest.raises(TypeError, match="LinearAttentionState, not a KVCache"):
        linear(ids, cache=softmax.new_cache(2))
    with pytest.raises(TypeError, match="KVCache, not a LinearAttentionState"):
        softmax(ids, cache=linear.new_cache(2))


def _step_flops(model: GPT, context: int) -> int:
    """Floating-point operations of one decoding step after ``context`` tokens (matmuls, as torch counts them)."""
    cache = model.new_cache(1)
    model(torch.randint(1, 37, (1, context)), cache=cache)
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(1, 37, (1, 1)), cache=cache)
    return counter.get_total_flops()


@torch.no_grad()
def test_a_new_token_costs_the_same_at_any_context_length_with_the_state_not_with_a_kv_cache():
    linear, softmax = GPT(tiny("gpt", attention="linear")).eval(), GPT(tiny("gpt")).eval()
    set_attention_impl(softmax, "reference")  # matmuls the counter sees (it does not count the fused kernel)
    assert _step_flops(linear, 4) == _step_flops(linear, 40)
    assert _step_flops(softmax, 40) > _step_flops(softmax, 4)  # attention reads every cached key
    cache = linear.new_cache(1)
    linear(torch.randint(1, 37, (1, 40)), cache=cache)
    assert cache.length == 40 and all(c.s.shape == (1, 4, 8, 8) and c.z.shape == (1, 4, 8) for c in cache.self_attn)


@torch.no_grad()
def test_generation_with_the_state_equals_full_recomputation_tokens_and_logits():
    m = GPT(tiny("gpt", attention="linear", tie_embeddings=False)).eval()
    seq = torch.randint(1, 37, (2, 5))
    cache = m.new_cache(2)
    logits = m(seq, cache=cache)[:, -1]
    for _ in range(20):
        torch.testing.assert_close(logits, m(seq)[:, -1], atol=1e-5, rtol=0)  # the state == recomputing it all
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], 1)
        logits = m(seq[:, -1:], cache=cache)[:, -1]
    assert generate(m, seq[:, :5], 20).tolist() == seq.tolist() == generate(m, seq[:, :5], 20, use_cache=False).tolist()
    assert len(set(seq[:, 5:].flatten().tolist())) > 2  # not a degenerate repetition


# ------------------------------------------------------------------------------------ the models


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_linear_attention_adds_no_parameters_and_changes_the_function(arch):
    softmax = build_model(tiny(arch))
    linear = build_model(tiny(arch, attention="linear"))
    assert {k: v.shape for k, v in softmax.state_dict().items()} == {k: v.shape for k, v in linear.state_dict().items()}
    assert sum(p.numel() for p in linear.parameters()) == count_parameters_formula(tiny(arch, attention="linear")) \
        == count_parameters_formula(tiny(arch))
    linear.load_state_dict(softmax.state_dict())  # the same weights...
    softmax.eval(), linear.eval()
    ids = torch.randint(1, 37, (2, 6))
    args = (ids, ids) if arch == "seq2seq" else (ids,)
    assert not torch.allclose(softmax(*args), linear(*args), atol=1e-3)  # ...another attention


def test_a_linear_attention_checkpoint_reloads_and_decodes_the_same(tmp_path):
    tokenizer = CharTokenizer.train(["to be or not to be"])
    cfg = tiny("gpt", vocab_size=tokenizer.vocab_size, attention="linear", tie_embeddings=False)
    model = GPT(cfg).eval()
    save_checkpoint(tmp_path / "ckpt", model, tokenizer, cfg, {"task": "lm"}, step=0)
    loaded = load_model(tmp_path / "ckpt")
    assert loaded.config.attention == "linear"
    ids = torch.tensor([tokenizer.encode("to be")])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids), model(ids), atol=0, rtol=0)
    assert generate(loaded, ids, 30).tolist() == generate(model, ids, 30).tolist()


@pytest.mark.slow
def test_attention_linear_through_the_cli_trains_generates_and_refuses_hf_export(tmp_path, shared_file, capsys):
    text = shared_file("text.txt")  # the shared ``lm``'s run, with linear attention
    run = tmp_path / "run"
    assert main(["train", "task=lm", "--data", str(text), "attention=linear", *TINY, "max_len=32", "max_steps=30",
                 "batch_size=8", "eval_every=30", "eval_batches=1", "--out", str(run)]) == 0
    assert load_model(run).config.attention == "linear"
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(run), "--prompt", "to be", "--max-new-tokens", "12", "--seed", "1"]) == 0
    assert capsys.readouterr().out.startswith("to be")
    assert main(["export", "--format", "hf", "--ckpt", str(run), "--out", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "attention='linear'" in err and not (tmp_path / "hf").exists()
    assert main(["explain", "--preset", "gpt-char-small", "attention=linear"]) == 0
    assert "masked linear self-attention" in capsys.readouterr().out
    assert main(["train", "task=lm", "--data", str(text), "attention=lineer", "--out", str(tmp_path / "x")]) == 2
    assert "attention='lineer' is not one of softmax, linear" in capsys.readouterr().err


def test_the_reference_path_with_a_state_is_the_recurrent_form():
    q, k, v = qkv(T=10)
    state = LinearAttentionState(2, 3, 8)
    out, weights = linear_attend(q, k, v, is_causal=True, state=state, impl="reference")
    assert weights is None and state.length == 10
    torch.testing.assert_close(out, linear_attend(q, k, v, is_causal=True)[0], atol=1e-5, rtol=0)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*torch.jit.load.*deprecated:DeprecationWarning")
@pytest.mark.parametrize("arch", list(FAMILIES))
def test_linear_models_export_to_onnx_and_torchscript_and_run_at_other_lengths(tmp_path, arch):
    """Traced at length 8, run at 150 (three chunks of the parallel form) with padding."""
    pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
    from scratchformer.interop import export_onnx, export_torchscript, verify_onnx

    model = build_model(tiny(arch, attention="linear", max_len=160)).eval()
    ids = torch.randint(1, 37, (3, 150))
    ids[1, 100:] = 0
    inputs = {"gpt": (ids,), "encoder": (ids, ids != 0), "seq2seq": (ids, ids[:, :70], ids != 0)}[arch]
    assert verify_onnx(model, export_onnx(model, tmp_path / "m.onnx"), *inputs) < 1e-4
    traced = torch.jit.load(str(export_torchscript(model, tmp_path / "m.pt")))
    with torch.no_grad():
        torch.testing.assert_close(traced(*inputs), model(*inputs), atol=1e-5, rtol=0)


def test_the_torch_nn_conversions_refuse_linear_attention():
    """``nn.MultiheadAttention`` and ``nn.Transformer`` compute softmax: a linear-attention layer would come
    back as a different function, so the conversion says so instead."""
    from scratchformer.interop.torch_nn import encoder_layer_to_torch, mha_to_torch
    from scratchformer.nn import EncoderLayer, MultiHeadAttention

    with pytest.raises(ValueError, match="softmax attention only"):
        mha_to_torch(MultiHeadAttention(16, 2, kind="linear"))
    cfg = tiny("encoder", attention="linear")
    with pytest.raises(ValueError, match="attention='linear' has no counterpart"):
        encoder_layer_to_torch(EncoderLayer(cfg), cfg)
    assert mha_to_torch(MultiHeadAttention(16, 2)).num_heads == 2  # softmax still converts
