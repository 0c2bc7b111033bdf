"""Encoder/decoder layers and stacks against torch.nn.TransformerEncoderLayer and nn.Transformer."""

import pytest
import torch
from torch import nn

from conftest import tiny
from scratchformer import Seq2SeqTransformer
from scratchformer.interop import (
    decoder_layer_from_torch,
    encoder_layer_from_torch,
    encoder_layer_to_torch,
    load_torch_transformer,
    to_torch_mask,
    to_torch_transformer,
)
from scratchformer.nn import EncoderLayer, ResidualNorm, causal_mask


def padding(B, S, lengths):
    return torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("norm", ["pre", "post"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm, activation):
    cfg = tiny("encoder", norm=norm, activation=activation)
    theirs = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation, batch_first=True,
                                        norm_first=norm == "pre").eval()
    ours = encoder_layer_from_torch(theirs, cfg).eval()
    x = torch.randn(3, 7, 32)
    key_mask = padding(3, 7, [7, 5, 2])
    expected = theirs(x, src_key_padding_mask=to_torch_mask(key_mask))
    got = ours(x, key_mask[:, None, None, :])
    real = key_mask[..., None].expand_as(got)  # torch's fast path zeroes padded rows; compare real ones
    torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=0)
    # and the other direction
    back = encoder_layer_to_torch(ours, cfg).eval()
    torch.testing.assert_close(back(x), ours(x), atol=1e-5, rtol=0)


def test_decoder_layer_matches_torch():
    cfg = tiny("seq2seq")
    theirs = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    ours = decoder_layer_from_torch(theirs, cfg).eval()
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 8, 32)
    mem_mask = padding(2, 8, [8, 3])
    expected = theirs(x, memory, tgt_mask=to_torch_mask(causal_mask(5)),
                      memory_key_padding_mask=to_torch_mask(mem_mask))
    got = ours(x, memory, memory_mask=mem_mask[:, None, None, :])
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
# torch's own note that it skips its nested-tensor fast path for norm_first=True: nothing to do with us
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True:UserWarning")
def test_encoder_decoder_matches_nn_transformer(norm):
    cfg = tiny("seq2seq", norm=norm, n_encoder_layers=2, n_decoder_layers=3)
    model = Seq2SeqTransformer(cfg).eval()
    theirs = to_torch_transformer(model).eval()
    src_emb, tgt_emb = torch.randn(3, 9, 32), torch.randn(3, 6, 32)
    src_mask = padding(3, 9, [9, 6, 1])
    expected = theirs(src_emb, tgt_emb, tgt_mask=to_torch_mask(causal_mask(6)),
                      src_key_padding_mask=to_torch_mask(src_mask),
                      memory_key_padding_mask=to_torch_mask(src_mask))
    memory = model.encoder(src_emb, src_mask)
    got = model.decoder(tgt_emb, memory, memory_key_mask=src_mask)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)

    # torch.nn -> scratchformer: a fresh model loaded from nn.Transformer gives the same outputs.
    fresh = Seq2SeqTransformer(cfg).eval()
    load_torch_transformer(fresh, theirs)
    torch.testing.assert_close(fresh.decoder(tgt_emb, fresh.encoder(src_emb, src_mask), memory_key_mask=src_mask),
                               expected, atol=1e-5, rtol=0)


def test_load_refuses_post_ln_transformer_with_final_norms():
    model = Seq2SeqTransformer(tiny("seq2seq"))
    with pytest.raises(ValueError, match="final LayerNorm"):
        load_torch_transformer(model, nn.Transformer(32, 4, 2, 2, 64, batch_first=True))


def test_residual_norm_post_and_pre():
    x = torch.randn(2, 3, 32)
    f = torch.nn.Linear(32, 32)
    post, pre = ResidualNorm(tiny("seq2seq", norm="post")), ResidualNorm(tiny("seq2seq", norm="pre"))
    torch.testing.assert_close(post(x, f), torch.nn.functional.layer_norm(x + f(x), (32,)))
    torch.testing.assert_close(pre(x, f), x + f(torch.nn.functional.layer_norm(x, (32,))))


@pytest.mark.parametrize("bias", [True, False])
def test_swiglu_is_its_formula(bias):
    """FFN(x) = (SiLU(x W_1 + b_1) * (x W_3 + b_3)) W_2 + b_2 (Shazeer 2020), written out with the weights."""
    from scratchformer.nn.feedforward import FeedForward

    ffn = FeedForward(32, 48, "swiglu", bias=bias)
    x = torch.randn(2, 5, 32)
    b = (lambda layer: layer.bias) if bias else (lambda layer: 0.0)
    gate = torch.nn.functional.silu(x @ ffn.linear1.weight.T + b(ffn.linear1))  # (B, T, F)
    up = x @ ffn.linear3.weight.T + b(ffn.linear3)
    expected = (gate * up) @ ffn.linear2.weight.T + b(ffn.linear2)
    torch.testing.assert_close(ffn(x), expected, atol=1e-6, rtol=1e-5)
    assert ffn.linear1.weight.shape == ffn.linear3.weight.shape == (48, 32) and ffn.linear2.weight.shape == (32, 48)
    # the gate is the SiLU branch: swapping the roles of W_1 and W_3 gives another function
    other = (torch.nn.functional.silu(x @ ffn.linear3.weight.T + b(ffn.linear3))
             * (x @ ffn.linear1.weight.T + b(ffn.linear1))) @ ffn.linear2.weight.T + b(ffn.linear2)
    assert not torch.allclose(ffn(x), other, atol=1e-4)


def test_swiglu_and_no_bias_in_a_layer():
    layer = EncoderLayer(tiny("encoder", activation="swiglu", bias=False))
    assert layer.ffn.linear3 is not None and layer.ffn.linear1.bias is None
    assert layer(torch.randn(2, 4, 32)).shape == (2, 4, 32)
