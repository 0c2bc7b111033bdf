"""GGUF export: which GPTs llama.cpp computes, the file's contents, and llama.cpp itself decoding as PyTorch does.

The tests marked ``llama`` run the file in llama.cpp (``llama-cpp-python``, the ``llama`` extra, built from source)
and skip, saying so, where it is not installed: the same greedy tokens as PyTorch for 64 new tokens from the same
prompt ids, float32 logits within ``F32_ATOL`` at every step, float16 and Q8_0 files close behind, and the
tokenizer's ids reproduced by llama.cpp's own tokenizer.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from conftest import tiny
from scratchformer import GPT, Seq2SeqTransformer, generate
from scratchformer.interop import ExportError
from scratchformer.tokenizers.bpe import BPETokenizer
from scratchformer.tokenizers.char import CharTokenizer

pytest.importorskip("gguf", reason="GGUF export needs the gguf package (pip install -e \".[gguf]\")")
from scratchformer.interop.gguf import _rope_rows, export_gguf, gguf_arch  # noqa: E402
from scratchformer.interop.gguf_vocab import bytes_to_unicode  # noqa: E402

# llama.cpp's GPT-2 GELU reads a float16 table, and its f32 matrix kernels sum in another order: measured 3e-5 here
F32_ATOL = 2e-4
needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama.cpp checks need llama-cpp-python (pip install -e \".[llama]\", "
                                        "built from source: about 11 minutes)")
TEXT = "to be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n"
GPT2 = dict(activation="gelu_tanh")
LLAMA = dict(norm_type="rmsnorm", positional="rotary", activation="swiglu", bias=False)


@pytest.fixture(scope="module")
def char_tok() -> CharTokenizer:
    return CharTokenizer.train([TEXT + "é"])


def _gpt(tok, seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    return GPT(tiny("gpt", vocab_size=tok.vocab_size, max_len=96, **kw)).eval()


def test_each_setting_maps_to_one_architecture_or_is_refused_by_name():
    assert gguf_arch(GPT(tiny("gpt", **GPT2))).name == "gpt2"
    assert gguf_arch(GPT(tiny("gpt"))).name == "gpt2"  # exact GELU: accepted if the tokens agree (checked at export)
    assert gguf_arch(GPT(tiny("gpt", positional="none", **GPT2))).name == "gpt2"
    assert gguf_arch(GPT(tiny("gpt", **LLAMA))).name == "llama"
    assert gguf_arch(GPT(tiny("gpt", **LLAMA, qk_norm=True))).name == "qwen3"  # Qwen3's per-head norms
    for kw, named in [(dict(norm="post"), "norm=post"), (dict(activation="relu"), "activation=relu"),
                      (dict(positional="sinusoidal"), "positional=sinusoidal"), (dict(qk_norm=True), "qk_norm=True"),
                      (dict(scale_embeddings=True), "scale_embeddings=True"),
                      (dict(attention="linear"), "attention=linear")]:
        with pytest.raises(ExportError) as err:
            gguf_arch(GPT(tiny("gpt", **kw)))
        assert named in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ExportError, match="for a GPT"):
        gguf_arch(Seq2SeqTransformer(tiny("seq2seq")))


def test_rotary_rows_are_permuted_to_llama_cpp_pairs():
    """Rotating the permuted rows by pairs (2j, 2j + 1) equals permuting rows rotated by pairs (j, j + D/2)."""
    from scratchformer.nn.embedding import RotaryEmbedding

    H, D, C = 2, 8, 16
    w, x = torch.randn(H * D, C), torch.randn(5, C)
    rope = RotaryEmbedding(D, 16)
    half = rope((x @ w.T).view(5, H, D).transpose(0, 1), torch.arange(5))  # (H, 5, D)
    q = torch.from_numpy(_rope_rows(w.numpy(), H)).float() @ x.T  # (H D, 5)
    q = q.T.reshape(5, H, D // 2, 2)
    cos, sin = rope.cos[:5, None, :], rope.sin[:5, None, :]
    inter = torch.stack([q[..., 0] * cos - q[..., 1] * sin, q[..., 0] * sin + q[..., 1] * cos], -1).reshape(5, H, D)
    expected = torch.from_numpy(_rope_rows(half.transpose(0, 1).reshape(5, H * D).T.numpy(), H)).T.reshape(5, H, D)
    assert torch.allclose(inter, expected, atol=1e-5)


def test_the_file_holds_the_weights_and_the_tokenizer(tmp_path, char_tok):
    import gguf

    model = _gpt(char_tok, **GPT2)
    path = export_gguf(model, tmp_path / "m.gguf", tokenizer=char_tok).path
    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 2 + 2 * 12 + 3
    emb = tensors["token_embd.weight"]
    assert np.array_equal(np.asarray(emb.data), model.embed.token.weight.detach().numpy())
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]).decode() for i in field.data]
    symbols = bytes_to_unicode()
    assert tokens[:4] == char_tok.specials and tokens[4 + char_tok.chars.index(" ")] == symbols[32]
    merges = reader.fields["tokenizer.ggml.merges"]
    assert [bytes(merges.parts[i]).decode() for i in merges.data] == ["Ã ©"]  # "é": its two UTF-8 bytes joined
    q8 = export_gguf(model, tmp_path / "q.gguf", tokenizer=char_tok, gguf_type="q8_0")
    f16 = export_gguf(model, tmp_path / "h.gguf", tokenizer=char_tok, gguf_type="f16")
    assert q8.path.stat().st_size < f16.path.stat().st_size < path.stat().st_size
    kinds = {t.name: t.tensor_type.name for t in gguf.GGUFReader(str(q8.path)).tensors}
    assert kinds["blk.0.attn_qkv.weight"] == "Q8_0" and kinds["blk.0.attn_qkv.bias"] == "F32"


def test_refusals_are_one_line_and_write_nothing(tmp_path, char_tok):
    with pytest.raises(ExportError, match="lower-casing"):
        export_gguf(_gpt(char_tok, **GPT2), tmp_path / "a.gguf",
                    tokenizer=BPETokenizer.train([TEXT] * 5, 300, lowercase=True))
    with pytest.raises(ExportError, match="norm=post"):
        export_gguf(GPT(tiny("gpt", norm="post")), tmp_path / "b.gguf", tokenizer=char_tok)
    with pytest.raises(ExportError, match="gguf_type"):
        export_gguf(_gpt(char_tok), tmp_path / "c.gguf", tokenizer=char_tok, gguf_type="q4_0")
    assert list(tmp_path.iterdir()) == []


def _compare(path, model, prompts, n=64):
    from scratchformer.interop.llamacpp import llama_generate

    expected = generate(model, torch.tensor(prompts), n)
    with torch.no_grad():
        reference = model(expected[:, :-1])[:, len(prompts[0]) - 1:].numpy()  # (B, n, V): each step's logits
    steps: list[np.ndarray] = []
    # llama.cpp gets the threads torch has (one a worker under xdist): two threads on a shared core spin for seconds
    got = np.array(llama_generate(path, prompts, n, threads=torch.get_num_threads(), step_logits=steps))
    return got, expected.numpy(), np.abs(np.stack(steps, 1) - reference).max()


@needs_llama
@pytest.mark.parametrize("arch", ["gpt2", "gpt2-exact-gelu", "llama"])
def test_llama_cpp_decodes_the_same_greedy_tokens_as_pytorch(tmp_path, char_tok, arch):
    kw = {"gpt2": GPT2, "gpt2-exact-gelu": {}, "llama": LLAMA}[arch]
    model = _gpt(char_tok, seed=1, **kw)
    prompts = torch.randint(4, char_tok.vocab_size, (3, 8), generator=torch.Generator().manual_seed(2)).tolist()
    for kind, atol in [("f32", F32_ATOL), ("f16", 2e-3), ("q8_0", 2e-2)]:
        path = export_gguf(model, tmp_path / f"{kind}.gguf", tokenizer=char_tok, gguf_type=kind).path
        got, expected, diff = _compare(path, model, prompts)
        assert np.array_equal(got, expected), kind
        assert diff < atol, (kind, diff)


@needs_llama
def test_llama_cpp_tokenizes_text_as_this_project_does(tmp_path, char_tok):
    from llama_cpp import Llama

    bpe = BPETokenizer.train([TEXT] * 20, 300)
    for tok in (char_tok, bpe):
        model = GPT(tiny("gpt", vocab_size=tok.vocab_size, **GPT2))
        path = export_gguf(model, tmp_path / f"{tok.kind}.gguf", tokenizer=tok).path
        llm = Llama(str(path), vocab_only=True, verbose=False)
        for text in (TEXT, "Whether 'tis é nobler\n\n  in the mind", "question."):
            ids = tok.encode(text)
            assert llm.tokenize(text.encode(), add_bos=False, special=False) == ids
            assert llm.detokenize(ids).decode() == text
