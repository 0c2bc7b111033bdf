"""Scaled dot-product and multi-head attention: the equation, both paths, masks, and torch.nn parity."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from scratchformer.interop import mha_from_torch, mha_to_torch, to_torch_mask
from scratchformer.nn import MultiHeadAttention, attend, attention_reference, causal_mask, record_attention
from scratchformer.nn.attention import set_attention_impl


def qkv(B=2, H=3, T=5, S=7, D=8, grad=False):
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, H, S, D), torch.randn(B, H, S, D)
    return [t.requires_grad_(grad) for t in (q, k, v)]


def test_reference_is_equation_1():
    q, k, v = qkv()
    scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(8)
    expected_w = torch.exp(scores) / torch.exp(scores).sum(-1, keepdim=True)
    out, w = attention_reference(q, k, v)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, torch.einsum("bhts,bhsd->bhtd", expected_w, v))


def test_masked_keys_get_zero_weight():
    q, k, v = qkv()
    mask = torch.rand(2, 1, 5, 7) > 0.4
    mask[..., 0] = True
    _, w = attend(q, k, v, mask=mask, need_weights=True)
    assert torch.all(w[~mask.expand_as(w)] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))


def padding(B, S, lengths):
    return torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S) True = real


MASK_CASES = {
    "none": lambda T, S: (None, False),
    "padding": lambda T, S: (padding(2, S, [S, 3])[:, None, None, :], False),
    "causal": lambda T, S: (None, True),
    "causal+padding": lambda T, S: (padding(2, S, [S - 1, S])[:, None, None, :], True),
    "arbitrary": lambda T, S: (torch.rand(2, 3, T, S) > 0.3, False),
}


@pytest.mark.parametrize("case", list(MASK_CASES))
@pytest.mark.parametrize("T,S", [(6, 6), (1, 6), (3, 8), (8, 3)])
def test_reference_and_fast_paths_agree_forward_and_backward(case, T, S):
    mask, is_causal = MASK_CASES[case](T, S)
    grads = []
    outs = []
    for impl in ("reference", "sdpa"):
        torch.manual_seed(1)
        q, k, v = qkv(T=T, S=S, grad=True)
        out, _ = attend(q, k, v, mask=mask, is_causal=is_causal, impl=impl)
        (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
        outs.append(out.detach())
        grads.append([t.grad for t in (q, k, v)])
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)
    for g_ref, g_fast in zip(*grads):
        torch.testing.assert_close(g_ref, g_fast, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["reference", "sdpa"])
def test_fully_masked_rows_give_zeros_not_nan(impl):
    q, k, v = qkv(grad=True)
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of the first sentence may attend to nothing
    mask[1] = False  # the whole second sentence is padding
    out, _ = attend(q, k, v, mask=mask, impl=impl)
    out.sum().backward()
    assert torch.all(out[0, :, 2] == 0) and torch.all(out[1] == 0)
    assert not out.isnan().any()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_causal_mask_is_bottom_right_aligned_for_cached_queries():
    m = causal_mask(2, 5)  # 2 new queries after 3 cached keys: positions 3 and 4
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    # Attending the last 2 queries with a causal cache mask equals the last 2 rows of full attention.
    q, k, v = qkv(T=5, S=5)
    full, _ = attend(q, k, v, is_causal=True)
    last, _ = attend(q[:, :, 3:], k, v, is_causal=True)
    torch.testing.assert_close(last, full[:, :, 3:])


# ------------------------------------------------------------------ multi-head attention vs torch.nn


def torch_pair(C=16, H=4, bias=True):
    ours = MultiHeadAttention(C, H, bias=bias)
    return ours, mha_to_torch(ours).eval()


@pytest.mark.parametrize("bias", [True, False])
def test_self_attention_matches_torch_multihead_attention(bias):
    ours, theirs = torch_pair(bias=bias)
    x = torch.randn(3, 6, 16)
    expected, _ = theirs(x, x, x, need_weights=False)
    torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=0)


def test_cross_attention_with_padding_matches_torch_and_query_len_differs_from_key_len():
    ours, theirs = torch_pair()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 9, 16)  # T=3 queries, S=9 keys
    key_mask = padding(2, 9, [9, 4])
    expected, _ = theirs(x, memory, memory, key_padding_mask=to_torch_mask(key_mask), need_weights=False)
    got = ours.cross(x, ours.project_kv(memory), mask=key_mask[:, None, None, :])
    assert got.shape == (2, 3, 16)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_causal_and_padding_masks_match_torch():
    ours, theirs = torch_pair()
    x = torch.randn(2, 6, 16)
    key_mask = padding(2, 6, [6, 4])
    attn_mask = causal_mask(6)
    expected, _ = theirs(x, x, x, attn_mask=to_torch_mask(attn_mask), key_padding_mask=to_torch_mask(key_mask),
                         need_weights=False)
    got = ours(x, mask=key_mask[:, None, None, :], is_causal=True)
    torch.testing.assert_close(got[0], expected[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1, :4], expected[1, :4], atol=1e-5, rtol=0)


def test_attention_weights_match_torch_and_record_attention():
    ours, theirs = torch_pair()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 5, 16)
    _, expected = theirs(x, memory, memory, need_weights=True, average_attn_weights=False)
    with record_attention(ours) as maps:
        ours.cross(x, ours.project_kv(memory))
    assert maps[""].shape == (2, 4, 3, 5)  # (B, H, T, S)
    torch.testing.assert_close(maps[""], expected, atol=1e-6, rtol=0)
    assert ours.impl == "auto"  # recording left the module as it was (tests/test_recording.py: every attribute)


def test_mha_from_torch_round_trip():
    theirs = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    ours = mha_from_torch(theirs)
    x = torch.randn(2, 4, 16)
    torch.testing.assert_close(ours(x), theirs(x, x, x)[0], atol=1e-5, rtol=0)


def test_mha_reference_and_fast_paths_agree():
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    fast = mha(x, is_causal=True)
    set_attention_impl(mha, "reference")
    torch.testing.assert_close(mha(x, is_causal=True), fast, atol=1e-6, rtol=0)
    with pytest.raises(ValueError):
        set_attention_impl(mha, "flash")


def test_regression_attention_does_not_assume_query_len_equals_key_len():
    """Some tutorials build the mask as (T, T) or reshape keys with the query length."""
    mha = MultiHeadAttention(16, 4)
    x, memory = torch.randn(1, 2, 16), torch.randn(1, 11, 16)
    out = mha.cross(x, mha.project_kv(memory))
    # Each output is a convex combination of the 11 projected values: compare with the reference.
    q = F.linear(x, mha.in_proj.weight[:16], mha.in_proj.bias[:16]).view(1, 2, 4, 4).transpose(1, 2)
    k, v = mha.project_kv(memory)
    ref, w = attention_reference(q, k, v)
    assert w.shape == (1, 4, 2, 11)
    torch.testing.assert_close(out, mha.out_proj(ref.transpose(1, 2).reshape(1, 2, 16)))


def test_named_projections_are_the_papers_equation_head_by_head():
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(x W_i^Q, x W_i^K, x W_i^V), written
    with the module's named w_q, w_k, w_v (views of the stacked in_proj) and checked against its forward."""
    torch.manual_seed(0)
    C, H = 16, 4
    D = C // H
    mha = MultiHeadAttention(C, H).eval()
    x = torch.randn(2, 5, C)
    assert mha.w_q.shape == mha.w_k.shape == mha.w_v.shape == (C, C)
    assert mha.w_k.data_ptr() == mha.in_proj.weight[C:].data_ptr()  # a view, not a copy
    heads = []
    for i in range(H):
        rows = slice(i * D, (i + 1) * D)
        q = x @ mha.w_q[rows].T + mha.b_q[rows]  # (B, T, D)
        k = x @ mha.w_k[rows].T + mha.b_k[rows]
        v = x @ mha.w_v[rows].T + mha.b_v[rows]
        heads.append(torch.softmax(q @ k.transpose(-2, -1) / D ** 0.5, dim=-1) @ v)
    expected = mha.out_proj(torch.cat(heads, dim=-1))
    with torch.no_grad():
        torch.testing.assert_close(mha(x), expected, atol=1e-5, rtol=1e-5)
        memory = torch.randn(2, 7, C)
        q = x @ mha.w_q.T + mha.b_q
        k, v = memory @ mha.w_k.T + mha.b_k, memory @ mha.w_v.T + mha.b_v
        heads = [torch.softmax(q[..., i * D:(i + 1) * D] @ k[..., i * D:(i + 1) * D].transpose(-2, -1) / D ** 0.5, -1)
                 @ v[..., i * D:(i + 1) * D] for i in range(H)]
        torch.testing.assert_close(mha.cross(x, mha.project_kv(memory)), mha.out_proj(torch.cat(heads, -1)),
                                   atol=1e-5, rtol=1e-5)
