"""The changes made since 2017 (RMSNorm, QK-norm, ReLU², zero-initialised output projections): each against its
formula, the family-wide invariances with them on, the parameter formula, checkpoints and export refusals."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny
from scratchformer import (
    GPT,
    ConfigError,
    EncoderClassifier,
    ModelConfig,
    Seq2SeqTransformer,
    build_model,
    count_parameters_formula,
)
from scratchformer.checkpoints import load_checkpoint, save_checkpoint
from scratchformer.generation import generate
from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.feedforward import FeedForward
from scratchformer.nn.norms import RMSNorm, norm_layer
from scratchformer.tokenizers import CharTokenizer
from shared_runs import TINY

MODERN = dict(norm_type="rmsnorm", qk_norm=True, activation="relu2")


def rand_ids(B, T, low=1, high=37):
    return torch.randint(low, high, (B, T))


# ------------------------------------------------------------------------------------ each against its formula


def test_rmsnorm_is_its_formula_and_torchs():
    norm = RMSNorm(16, eps=1e-5)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 16) * 4 + 2
    expected = x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(norm(x), expected, atol=1e-6, rtol=1e-6)
    if hasattr(torch.nn, "RMSNorm"):  # torch >= 2.4 ships one: the same numbers
        theirs = torch.nn.RMSNorm(16, eps=1e-5)
        theirs.weight.data.copy_(norm.weight.data)
        torch.testing.assert_close(norm(x), theirs(x), atol=1e-6, rtol=1e-6)
    assert not any(n == "bias" for n, _ in norm.named_parameters())  # no centring, no bias


def test_norm_type_picks_the_layer_everywhere_a_model_normalises():
    cfg = tiny("gpt", norm_type="rmsnorm", embedding_norm=True)
    model = GPT(cfg)
    norms = [m for m in model.modules() if isinstance(m, (RMSNorm, torch.nn.LayerNorm))]
    assert norms and all(isinstance(m, RMSNorm) for m in norms)
    assert len(norms) == 2 * cfg.n_layers + 2  # two per layer, the final one, the embeddings'
    assert isinstance(norm_layer(tiny("gpt")), torch.nn.LayerNorm)


def test_relu2_is_relu_squared():
    ffn = FeedForward(8, 32, "relu2")
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), ffn.linear2(F.relu(ffn.linear1(x)) ** 2))


def test_qk_norm_makes_scores_independent_of_the_scale_of_queries_and_keys():
    """With queries and keys normalised, scaling W^Q and W^K changes nothing; without, it changes the output."""
    torch.manual_seed(0)
    cfg = tiny("gpt", qk_norm=True, bias=False)
    normed = MultiHeadAttention(32, 4, bias=False, q_norm=norm_layer(cfg, 8), k_norm=norm_layer(cfg, 8))
    plain = MultiHeadAttention(32, 4, bias=False)
    plain.load_state_dict({k: v for k, v in normed.state_dict().items() if "norm" not in k})
    x = torch.randn(2, 6, 32)
    before = normed(x, is_causal=True), plain(x, is_causal=True)
    with torch.no_grad():
        for m in (normed, plain):
            m.in_proj.weight[:64] *= 10.0  # W^Q and W^K, ten times larger
    torch.testing.assert_close(normed(x, is_causal=True), before[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(plain(x, is_causal=True), before[1], atol=1e-3)


def test_qk_norm_normalises_each_heads_queries_and_keys():
    cfg = tiny("gpt", qk_norm=True)
    mha = GPT(cfg).decoder.layers[0].self_attn
    seen = {}
    mha.q_norm.register_forward_hook(lambda m, a, out: seen.setdefault("q", out))
    mha.k_norm.register_forward_hook(lambda m, a, out: seen.setdefault("k", out))
    mha(torch.randn(2, 5, 32) * 7)
    for out in seen.values():
        assert out.shape == (2, 4, 5, 8)  # (B, H, T, D): over each head's D features
        torch.testing.assert_close(out.pow(2).mean(-1), torch.ones(2, 4, 5), atol=1e-3, rtol=0)  # eps aside


def test_zero_out_starts_every_layer_as_the_identity_and_still_learns():
    torch.manual_seed(0)
    model = GPT(tiny("gpt", init="zero_out"))
    zeroed = [n for n, p in model.named_parameters() if n.endswith(("out_proj.weight", "linear2.weight"))]
    assert len(zeroed) == 2 * model.config.n_layers
    assert all(not model.get_parameter(n).any() for n in zeroed)
    ids = rand_ids(2, 9)
    positions = torch.arange(9)
    alone = model.decoder.norm(model.embed(ids, positions)) @ model.output_weight().t()  # no layer at all
    torch.testing.assert_close(model(ids), alone, atol=1e-5, rtol=1e-5)
    loss = F.cross_entropy(model(ids).flatten(0, 1), rand_ids(2, 9).flatten())
    loss.backward()
    assert all(model.get_parameter(n).grad.abs().sum() > 0 for n in zeroed)  # the gradient reaches them
    default = GPT(tiny("gpt"))
    assert all(default.get_parameter(n).any() for n in zeroed)


# ------------------------------------------------------------------------------------ invariances, settings on


@pytest.mark.parametrize("setting", [dict(norm_type="rmsnorm"), dict(qk_norm=True), dict(activation="relu2"), MODERN])
def test_gpt_is_causal_and_cached_decoding_equals_recomputation(setting):
    model = GPT(tiny("gpt", positional="rotary", **setting)).eval()
    ids = rand_ids(2, 12)
    changed = ids.clone()
    changed[:, 7] = changed[:, 7] % 36 + 1
    a, b = model(ids), model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 7:], b[:, 7:])
    cache = model.new_cache(2)
    steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, t:t + 1], cache=cache) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, 1), a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("setting", [dict(norm_type="rmsnorm"), dict(qk_norm=True), MODERN])
def test_seq2seq_padding_changes_nothing_and_cache_equals_recomputation(setting):
    model = Seq2SeqTransformer(tiny("seq2seq", **setting)).eval()
    src, tgt = rand_ids(3, 9), rand_ids(3, 6)
    src[1, 5:] = 0
    out = model(src, tgt)
    for b, n in enumerate([9, 5]):
        torch.testing.assert_close(model(src[b:b + 1, :n], tgt[b:b + 1]), out[b:b + 1], atol=1e-5, rtol=0)
    memory = model.encode(src, src != 0)
    cache = model.new_cache(3)
    steps = [model.decode(tgt[:, t:t + 1], memory, src_padding_mask=src != 0, cache=cache) for t in range(6)]
    torch.testing.assert_close(torch.cat(steps, 1), out, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("setting", [dict(norm_type="rmsnorm", norm="pre"), MODERN])
def test_classifier_padding_changes_nothing(setting):
    model = EncoderClassifier(tiny("encoder", **setting)).eval()
    ids = rand_ids(2, 8)
    ids[1, 4:] = 0
    out = model(ids)
    torch.testing.assert_close(model(ids[1:, :4]), out[1:], atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------ config, counts, checkpoints


@pytest.mark.parametrize("arch,norm_type,qk_norm,bias", list(itertools.product(
    ["seq2seq", "gpt", "encoder"], ["layernorm", "rmsnorm"], [False, True], [True, False])))
def test_parameter_formula_counts_the_new_settings(arch, norm_type, qk_norm, bias):
    cfg = tiny(arch, norm_type=norm_type, qk_norm=qk_norm, bias=bias, norm="pre", activation="relu2")
    assert sum(p.numel() for p in build_model(cfg).parameters()) == count_parameters_formula(cfg)


@pytest.mark.parametrize("field,value", [("norm_type", "batchnorm"), ("init", "orthogonal"),
                                         ("activation", "relu3"), ("qk_norm", "yes")])
def test_unknown_values_are_refused_naming_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        ModelConfig(arch="gpt", **{field: value})


def test_a_modern_checkpoint_reloads_and_decodes_identically(tmp_path):
    tok = CharTokenizer.train(["abcdefgh ijklmnop"])
    cfg = ModelConfig(arch="gpt", vocab_size=tok.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                      max_len=48, dropout=0.0, init="zero_out", **MODERN)
    model = GPT(cfg).eval()
    with torch.no_grad():  # away from the zero start, so that every weight matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    save_checkpoint(tmp_path / "ckpt", model, tok, cfg, {}, 0, None)
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.model_config == cfg
    prompt = torch.tensor([tok.encode("abc")])
    assert generate(loaded.model, prompt, 20).tolist() == generate(model, prompt, 20).tolist()


def test_hugging_face_export_refuses_what_gpt2_and_bert_lack():
    from scratchformer.interop.hf_models import HFExportError, check_exportable

    with pytest.raises(HFExportError, match="norm_type='rmsnorm'.*qk_norm=true"):
        check_exportable(GPT(tiny("gpt", norm_type="rmsnorm", qk_norm=True)))
    with pytest.raises(HFExportError, match="activation='relu2'"):
        check_exportable(GPT(tiny("gpt", activation="relu2")))
    check_exportable(GPT(tiny("gpt", init="zero_out")))  # only how the weights started: it exports


@pytest.mark.parametrize("setting,needle", [(dict(norm_type="rmsnorm"), "norm_type='rmsnorm'"),
                                            (dict(qk_norm=True), "qk_norm=True"),
                                            (dict(activation="relu2"), "activation='relu2'")])
def test_the_torch_nn_conversions_refuse_what_torch_nn_lacks(setting, needle):
    from scratchformer.interop.torch_nn import encoder_layer_to_torch, mha_to_torch
    from scratchformer.nn import EncoderLayer

    cfg = tiny("encoder", **setting)
    with pytest.raises(ValueError, match=needle):
        encoder_layer_to_torch(EncoderLayer(cfg), cfg)
    if "qk_norm" in setting:
        with pytest.raises(ValueError, match="qk_norm has no counterpart"):
            mha_to_torch(EncoderLayer(cfg).self_attn)
    assert encoder_layer_to_torch(EncoderLayer(tiny("encoder", init="zero_out")), tiny("encoder")) is not None


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["gpt", "seq2seq", "encoder"])
def test_onnx_export_of_a_modern_model_matches_pytorch(tmp_path, arch):
    """RMSNorm, QK-norm and ReLU² are plain tensor arithmetic: the exported graph computes the same numbers."""
    pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
    pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")
    from scratchformer.interop import export_onnx, verify_onnx

    model = build_model(tiny(arch, positional="rotary" if arch == "gpt" else "sinusoidal", **MODERN)).eval()
    with torch.no_grad():
        for p in model.parameters():  # norms' gains away from 1, so that a dropped norm would show
            p.add_(torch.randn_like(p) * 0.1)
    ids, mask = rand_ids(3, 7), torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False  # a padded row
    inputs = {"gpt": dict(input_ids=ids), "encoder": dict(input_ids=ids, mask=mask),
              "seq2seq": dict(src=ids, tgt=rand_ids(3, 5), src_padding_mask=mask)}[arch]
    path = export_onnx(model, tmp_path / f"{arch}.onnx")
    assert verify_onnx(model, path, **inputs) < 1e-4


@pytest.mark.slow
def test_a_modern_run_through_the_commands(tmp_path, shared_file, capsys):
    """Trained with every setting and Muon: ``generate`` and ``evaluate`` load it, its settings are in the
    checkpoint, ONNX and TorchScript export it, and the Hugging Face export refuses it in one line."""
    from scratchformer.app.cli import main

    text = shared_file("text.txt")  # the shared ``lm``'s run, with every modern setting
    out = tmp_path / "run"
    assert main(["train", "task=lm", "--data", str(text), *TINY, "max_len=32", "max_steps=30", "batch_size=8",
                 "eval_every=30", "eval_batches=1",
                 "norm_type=rmsnorm", "qk_norm=true", "activation=relu2", "init=zero_out", "tie_embeddings=false",
                 "optimizer=muon", "--out", str(out), "--quiet"]) == 0
    saved = load_checkpoint(out / "last").model_config
    assert (saved.norm_type, saved.qk_norm, saved.activation, saved.init, saved.tie_embeddings) == \
        ("rmsnorm", True, "relu2", "zero_out", False)
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(out), "--prompt", "to be", "--max-new-tokens", "12", "--seed", "0"]) == 0
    first = capsys.readouterr().out
    assert main(["generate", "--ckpt", str(out), "--prompt", "to be", "--max-new-tokens", "12", "--seed", "0"]) == 0
    assert capsys.readouterr().out == first and first.startswith("to be")
    assert main(["evaluate", "--ckpt", str(out), "--data", str(text)]) == 0
    assert "loss" in capsys.readouterr().out
    assert main(["export", "--ckpt", str(out), "--format", "torchscript", "--out", str(tmp_path / "m.pt")]) == 0
    capsys.readouterr()
    assert main(["export", "--ckpt", str(out), "--format", "hf", "--out", str(tmp_path / "hf")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rmsnorm" in err and "Traceback" not in err
    assert not (tmp_path / "hf").exists()
