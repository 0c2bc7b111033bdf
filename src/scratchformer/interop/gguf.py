"""GGUF files for llama.cpp (and Ollama on top of it): ``export_gguf(model, path, tokenizer=..., gguf_type=...)``.

llama.cpp runs a fixed set of architectures; a GPT maps onto one of three when every setting is one it computes:

    gpt2    norm=pre, norm_type=layernorm, positional=learned (or none: a zero table), activation=gelu_tanh
            (or gelu, see below), scale_embeddings=false, embedding_norm=false, qk_norm=false, softmax attention.
            The fused ``in_proj`` is llama.cpp's ``attn_qkv`` as it stands; bias=false writes zero biases.
    llama   norm=pre, norm_type=rmsnorm, positional=rotary, activation=swiglu, the same three off; biases are
            optional there. Our rotary embedding rotates dimension pairs (j, j + D/2) (GPT-NeoX's layout) and
            llama.cpp's llama rotates (2j, 2j + 1): the rows of W^Q and W^K are permuted head by head so that pair
            j lands on (2j, 2j + 1). Scores q . k are unchanged by a permutation applied to both. Grouped-query
            attention writes ``head_count_kv`` (W^K's rows permuted per head of keys), a head size apart from C / H
            its key and value lengths, and Llama 3's rotary scaling the ``rope_freqs`` tensor llama.cpp divides
            each pair's frequency by. A Llama trained further from a folder carries its own byte-level tokenizer.
    qwen3   llama's settings with qk_norm=true (Qwen3's RMSNorm over D on each head's queries and keys, written as
            ``attn_q_norm`` and ``attn_k_norm``); llama.cpp rotates qwen3's pairs (j, j + D/2), so no permutation.
    qwen3moe qwen3's settings with experts in every layer, their top-k weights renormalised (``gguf_moe.py``).
    gemma3  Gemma's blocks (``gguf_gemma.py``). A sliding window elsewhere is refused if shorter than the context.

Anything else (post-LN, ReLU, sinusoidal positions, the paper's sqrt(C) embedding scale, linear attention, ...)
is refused in one line naming the settings, as are encoder-decoders and classifiers.

GELU: llama.cpp's gpt2 computes GELU's tanh approximation, and ``activation=gelu`` (the exact erf) is written as it:
the export command first checks that both decode the same greedy tokens (``app/export/gguf_gelu.py``).

Types (``gguf_type``): ``f32``; ``f16``; ``q8_0`` (8-bit, blocks of 32 values with one scale). The 2-D weight
matrices take the type; norms and biases stay float32; a matrix whose rows are not a multiple of 32 long stays
float16 in a ``q8_0`` file (Q8_0 blocks are 32 wide), as llama.cpp's own converter does.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from scratchformer.extras import require
from scratchformer.interop import gguf_gemma
from scratchformer.interop.gguf_gemma import NOT_GEMMA, add_gemma_keys, gemma_problems, gemma_tensors
from scratchformer.interop.gguf_moe import add_expert_keys, expert_tensors, moe_problems
from scratchformer.interop.gguf_vocab import GGUFVocab, gguf_vocab, pre_tokenizer
from scratchformer.interop.hf_folder import LLAMA_SETTINGS
from scratchformer.interop.hf_gemma import GEMMA_SETTINGS, is_gemma
from scratchformer.interop.traced import ExportError, _atomic_dir, _destination
from scratchformer.models import GPT

GGUF_TYPES = ("f32", "f16", "q8_0")


@dataclass(frozen=True)
class CppArch:
    """A llama.cpp architecture a GPT maps onto: the settings it computes (each the values it takes) and how its
    tensors and keys are laid out (the module docstring)."""

    name: str
    needs: dict[str, tuple]
    layernorm: bool = False  # gpt2: LayerNorms with biases, the fused attn_qkv as in_proj stands
    rotate_pairs: bool = False  # llama: rotary pairs (2j, 2j + 1), so the rows of W^Q and W^K are permuted
    experts: bool = False  # qwen3moe: a mixture of experts in every layer
    gemma: bool = False  # gemma3: norms after the sub-layers too, each written as 1 + w (gguf_gemma.py)


_LLAMA = {k: (v,) for k, v in LLAMA_SETTINGS.items()} | NOT_GEMMA  # the reader's own (interop/hf_folder.py)
CPP_ARCHS = (
    CppArch("gpt2", dict(norm=("pre",), scale_embeddings=(False,), embedding_norm=(False,), attention=("softmax",),
                         norm_type=("layernorm",), positional=("learned", "none"), activation=("gelu_tanh", "gelu"),
                         qk_norm=(False,), **NOT_GEMMA), layernorm=True),
    CppArch("llama", dict(_LLAMA, qk_norm=(False,)), rotate_pairs=True),
    CppArch("qwen3", dict(_LLAMA, qk_norm=(True,))),
)
MOE_ARCH = CppArch("qwen3moe", dict(_LLAMA, qk_norm=(True,), bias=(False,)), experts=True)
GEMMA_ARCH = CppArch("gemma3", {k: (v,) for k, v in (LLAMA_SETTINGS | GEMMA_SETTINGS).items()}, gemma=True)


@dataclass(frozen=True)
class GGUFExport:
    path: Path
    arch: str
    summary: str


def gguf_arch(model: torch.nn.Module) -> CppArch:
    """The llama.cpp architecture (gpt2, llama or qwen3) that computes ``model``; else ``ExportError`` naming the
    settings that neither gpt2 nor llama computes."""
    if not isinstance(model, GPT):
        raise ExportError(f"GGUF export is for a GPT (llama.cpp runs decoder-only models), not {type(model).__name__}")
    cfg = model.config
    if cfg.n_experts or is_gemma(cfg):
        return _one_arch(cfg, *((MOE_ARCH, moe_problems(cfg)) if cfg.n_experts else (GEMMA_ARCH, gemma_problems(cfg))))
    misses = {}
    for target in CPP_ARCHS:
        bad = [f"{name}={getattr(cfg, name)}" for name, values in target.needs.items()
               if getattr(cfg, name) not in values]
        if not bad:
            return _one_arch(cfg, target, [])  # its sliding window, if any, checked
        misses[target.name] = bad
    raise ExportError(f"llama.cpp cannot compute this GPT: {', '.join(misses['gpt2'])} (its gpt2 architecture) or "
                      f"{', '.join(misses['llama'])} (its llama architecture)")


def _one_arch(cfg, target: CppArch, problems: list[str]) -> CppArch:
    """``target`` (qwen3moe: a GPT with experts; gemma3: Gemma's) if llama.cpp reads it; else one line saying why."""
    bad = [f"{name}={getattr(cfg, name)}" for name, ok in target.needs.items() if getattr(cfg, name) not in ok]
    if bad := bad + problems + ([] if target.gemma else gguf_gemma.window_problems(cfg)):
        raise ExportError(f"llama.cpp's {target.name} cannot compute this GPT: {', '.join(bad)}")
    return target


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _zeros_if_none(t: torch.Tensor | None, n: int) -> np.ndarray:
    return np.zeros(n, np.float32) if t is None else _np(t)


def _gpt2_tensors(model: GPT) -> dict[str, np.ndarray]:
    cfg, C = model.config, model.config.d_model
    pos = model.embed.position_embedding
    out = {"token_embd.weight": _np(model.embed.token.weight),
           "position_embd.weight": np.zeros((cfg.max_len, C), np.float32) if pos is None else _np(pos.weight)}
    for i, layer in enumerate(model.decoder.layers):
        attn, ffn = layer.self_attn, layer.ffn
        norms = {"attn_norm": layer.self_attn_block.norm, "ffn_norm": layer.ffn_block.norm}
        for name, norm in norms.items():
            out[f"blk.{i}.{name}.weight"], out[f"blk.{i}.{name}.bias"] = _np(norm.weight), _zeros_if_none(norm.bias, C)
        for name, lin, n in (("attn_qkv", attn.in_proj, 3 * C), ("attn_output", attn.out_proj, C),
                             ("ffn_up", ffn.linear1, cfg.d_ff), ("ffn_down", ffn.linear2, C)):
            out[f"blk.{i}.{name}.weight"], out[f"blk.{i}.{name}.bias"] = _np(lin.weight), _zeros_if_none(lin.bias, n)
    norm = model.decoder.norm
    out["output_norm.weight"], out["output_norm.bias"] = _np(norm.weight), _zeros_if_none(norm.bias, C)
    out["output.weight"] = _np(model.output_weight())  # llama.cpp's gpt2 wants it even when tied
    return out


def _rope_rows(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Rows of W^Q or W^K (or a bias) reordered per head from pairs (j, j + D/2) to pairs (2j, 2j + 1)."""
    D = w.shape[0] // n_heads
    order = np.arange(D).reshape(2, D // 2).T.reshape(-1)  # 0, D/2, 1, D/2 + 1, ...
    return w.reshape(n_heads, D, *w.shape[1:])[:, order].reshape(w.shape)


def _rope_factors(cfg) -> np.ndarray:
    """Llama 3's rotary scaling as llama.cpp reads it (``rope_freqs``): each pair's frequency divided by it."""
    from scratchformer.nn.embedding import rotary_frequencies

    plain, scaled = (rotary_frequencies(cfg.head_dim, cfg.rope_base, s) for s in (None, cfg.rope_scaling))
    return (plain / scaled).float().numpy()


def _llama_tensors(model: GPT, rotate_pairs: bool) -> dict[str, np.ndarray]:
    """llama's tensors (W^Q, W^K rows permuted to its rotary pairs), or qwen3's: the same names, the rows as they
    are (llama.cpp rotates qwen3's pairs (j, j + D/2), as we do) and each layer's query and key norms."""
    cfg = model.config
    out = {"token_embd.weight": _np(model.embed.token.weight)}
    if cfg.rope_scaling is not None:
        out["rope_freqs.weight"] = _rope_factors(cfg)
    q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim  # in_proj's rows: [W^Q; W^K; W^V]
    for i, layer in enumerate(model.decoder.layers):
        attn, ffn = layer.self_attn, layer.ffn
        out[f"blk.{i}.attn_norm.weight"] = _np(layer.self_attn_block.norm.weight)
        out[f"blk.{i}.ffn_norm.weight"] = _np(layer.ffn_block.norm.weight)
        w = _np(attn.in_proj.weight)
        b = None if attn.in_proj.bias is None else _np(attn.in_proj.bias)
        for name, start, size, heads in (("attn_q", 0, q, cfg.n_heads), ("attn_k", q, kv, cfg.kv_heads),
                                         ("attn_v", q + kv, kv, 0)):
            rows = slice(start, start + size)
            fix = (lambda x, h=heads: _rope_rows(x, h)) if heads and rotate_pairs else (lambda x: x)
            out[f"blk.{i}.{name}.weight"] = fix(w[rows])
            if b is not None:
                out[f"blk.{i}.{name}.bias"] = fix(b[rows])
        linears = [("attn_output", attn.out_proj)]
        if hasattr(ffn, "experts"):  # qwen3moe
            out.update(expert_tensors(i, ffn))
        else:
            linears += [("ffn_gate", ffn.linear1), ("ffn_up", ffn.linear3), ("ffn_down", ffn.linear2)]
        for name, lin in linears:
            out[f"blk.{i}.{name}.weight"] = _np(lin.weight)
            if lin.bias is not None:
                out[f"blk.{i}.{name}.bias"] = _np(lin.bias)
        if attn.q_norm is not None and attn.k_norm is not None:  # qwen3: one RMSNorm over D for a layer's heads
            out[f"blk.{i}.attn_q_norm.weight"], out[f"blk.{i}.attn_k_norm.weight"] = (_np(attn.q_norm.weight),
                                                                                      _np(attn.k_norm.weight))
    out["output_norm.weight"] = _np(model.decoder.norm.weight)
    if model.lm_head is not None:  # tied: llama.cpp reuses token_embd
        out["output.weight"] = _np(model.lm_head.weight)
    return out


def _keys(writer, target: CppArch, model: GPT) -> None:
    cfg = model.config
    writer.add_context_length(cfg.max_len)
    writer.add_embedding_length(cfg.d_model)
    writer.add_block_count(len(model.decoder.layers))
    writer.add_feed_forward_length(cfg.d_ff)
    writer.add_head_count(cfg.n_heads)
    if target.layernorm:
        writer.add_layer_norm_eps(cfg.layer_norm_eps)
    else:
        writer.add_head_count_kv(cfg.kv_heads)
        if cfg.head_dim * cfg.n_heads != cfg.d_model:
            writer.add_key_length(cfg.head_dim)
            writer.add_value_length(cfg.head_dim)
        writer.add_layer_norm_rms_eps(cfg.layer_norm_eps)
        writer.add_rope_dimension_count(cfg.head_dim)
        writer.add_rope_freq_base(cfg.rope_base)
        writer.add_vocab_size(cfg.vocab_size)
    (add_expert_keys if target.experts else add_gemma_keys if target.gemma else lambda *_: None)(writer, cfg)


def _tokenizer_keys(writer, tokenizer: object, vocab_size: int, chat_template: str | None) -> GGUFVocab:
    vocab = gguf_vocab(tokenizer)
    if vocab_size > len(vocab.tokens):  # a model's output rows past its tokenizer (Qwen3's)
        unused = range(len(vocab.tokens), vocab_size)
        vocab.tokens += [f"[PAD{i}]" for i in unused]
        vocab.types += [5] * len(unused)  # llama.cpp's UNUSED, as its own converter writes them
    if len(vocab.tokens) != vocab_size:
        raise ExportError(f"the tokenizer has {len(vocab.tokens)} tokens but the model {vocab_size} outputs")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre_tokenizer(tokenizer))
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    # llama.cpp's gpt2 tokenizer needs the key, and the gguf package writes no empty array: a character vocabulary
    # without merges gets one that never applies ("ĠĠ" would come only from a merge "Ġ Ġ", which is not there)
    writer.add_token_merges(vocab.merges or ["ĠĠ ĠĠ"])
    keys = {"bos": writer.add_bos_token_id, "eos": writer.add_eos_token_id, "unk": writer.add_unk_token_id,
            "pad": writer.add_pad_token_id, "eot": writer.add_eot_token_id, "eom": writer.add_eom_token_id}
    for name, add in keys.items():
        if name in vocab.specials:  # a pretrained byte-level tokenizer has no <unk>, often no pad
            add(vocab.specials[name])
    writer.add_add_bos_token(vocab.add_bos)  # a prompt starts as the tokenizer starts it (Llama 3: with bos)
    writer.add_add_eos_token(False)
    if chat_template:
        writer.add_chat_template(chat_template)
    return vocab


def _add_tensor(writer, name: str, data: np.ndarray, gguf_type: str) -> str:
    """Write one tensor in the file's type (norms, biases and other 1-D tensors in float32); returns its type."""
    import gguf

    if data.ndim == 1 or gguf_type == "f32" or name.endswith("ffn_gate_inp.weight"):
        writer.add_tensor(name, data.astype(np.float32))
        return "f32"
    if gguf_type == "q8_0" and data.shape[-1] % 32 == 0:
        q = gguf.quants.quantize(data.astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
        writer.add_tensor(name, q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        return "q8_0"
    writer.add_tensor(name, data.astype(np.float16))
    return "f16"


def check_gguf(model: torch.nn.Module, tokenizer: object | None) -> CppArch:
    """The llama.cpp architecture of ``model``, once its tokenizer is known to map too and the ``gguf`` package is
    there; else one line (``ExportError``, ``MissingExtra``), before any work."""
    target = gguf_arch(model)
    if tokenizer is None:
        raise ExportError("a GGUF file carries the model's tokenizer, and none was given (tokenizer=None): pass the "
                          "checkpoint's (load_checkpoint(path).tokenizer)")
    gguf_vocab(tokenizer)
    require("gguf", "gguf")
    return target


def export_gguf(model: torch.nn.Module, path: str | os.PathLike, *, tokenizer: object | None,
                gguf_type: str = "f32", chat_template: str | None = None, notes: Sequence[str] = ()) -> GGUFExport:
    """Write ``model`` (a GPT) and ``tokenizer`` to the GGUF file ``path`` (atomically); see the module docstring.
    ``chat_template``: the chat template to carry (default: the tokenizer's); ``notes``: what the caller checked."""
    if gguf_type not in GGUF_TYPES:
        raise ExportError(f"gguf_type={gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    target = check_gguf(model, tokenizer)
    import gguf

    path = _destination(path)
    notes = [target.name, gguf_type, *notes]
    template = chat_template or getattr(tokenizer, "chat_template", None)
    tensors = (_gpt2_tensors(model) if target.layernorm else gemma_tensors(model) if target.gemma
               else _llama_tensors(model, target.rotate_pairs))
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[gguf_type]
    with _atomic_dir(path) as tmp:
        writer = gguf.GGUFWriter(str(tmp / path.name), target.name)
        writer.add_name("scratchformer")
        writer.add_file_type(file_type)
        _keys(writer, target, model)
        vocab = _tokenizer_keys(writer, tokenizer, model.config.vocab_size, template)
        kinds = [_add_tensor(writer, name, data, gguf_type) for name, data in tensors.items()]
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp / path.name, path)
    if gguf_type == "q8_0" and "f16" in kinds:
        notes.append(f"{kinds.count('f16')} matrices with rows not a multiple of 32 kept as f16")
    notes += vocab.notes() + (["chat template"] if template else [])
    return GGUFExport(path, target.name, "; ".join(notes))
