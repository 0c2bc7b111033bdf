"""ONNX graphs with the KV cache as inputs and outputs, so that decoding outside PyTorch costs one token per step.

``export_onnx_cached(model, folder)`` writes a folder that ``onnx_decode.py`` (numpy + onnxruntime, no PyTorch)
decodes from:

    GPT                 decoder.onnx   input_ids (B, T), attention_mask (B, P + T), past_key_i / past_value_i
                                       (B, H, P, D) for each layer i  ->  logits (B, V) of the last position,
                                       present_key_i / present_value_i (B, H, P + T, D)
    Seq2SeqTransformer  encoder.onnx   src (B, S), src_mask (B, S)  ->  cross_key_i / cross_value_i (B, H, S, D):
                                       the encoder runs once, and each decoder layer's cross-attention keys and
                                       values are projected once per sentence
                        decoder.onnx   input_ids (B, T), src_mask (B, S), past_key_i / past_value_i,
                                       cross_key_i / cross_value_i  ->  logits (B, V), present_key_i / present_value_i
    both                manifest.json  the shapes and ids the loop needs (every end-of-generation id; a character
                                       vocabulary, if any)
                        tokenizer.json the tokenizer as the ``tokenizers`` library reads it, with tokenizer_config.json
                                       and special_tokens_map.json (its special tokens, its chat template: the files
                                       of a Hugging Face export, ``interop/hf_tokenizers.py``), given a tokenizer

One decoder graph serves the prompt and every later step: the first call passes a past of length P = 0.
Every axis but H and D is dynamic (batch, prompt, past, source). Masks are int64, 1 = real token (left padding
for batched GPT prompts): positions count real tokens only, as ``GPT.hidden_states`` numbers them, so a padded
prompt decodes as it would alone. Only the last position's logits come out: a step needs nothing else (the
single-pass graph of ``formats.export_onnx``, ``--format onnx-single``, returns every position's).

The graphs are the model's own modules (``Embeddings``, ``Decoder``, ``Encoder``) traced with a cache that
concatenates (``_PastKV``): the same attention code as PyTorch's cached decoding, so the logits agree to
float32 rounding. Linear attention (a recurrent state, not keys and values) is refused: use ``onnx-single``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import Tensor, nn

from scratchformer.atomic import publish_dir
from scratchformer.extras import require
from scratchformer.interop.traced import ExportError, _atomic_dir, _quiet
from scratchformer.models import (
    GPT,
    Seq2SeqTransformer,
    eval_mode,  # no dropout in an exported graph
)
from scratchformer.nn.kv_cache import DecoderCache, KVCache
from scratchformer.nn.masks import padding_mask
from scratchformer.tokenizers import Tokenizer

MANIFEST = "manifest.json"
FORMAT = "scratchformer-onnx-cache"


class _PastKV(KVCache):
    """A layer's cache as graph values: ``update`` returns the past keys/values with this step's appended."""

    def __init__(self, keys: Tensor, values: Tensor) -> None:  # no preallocation: the graph concatenates
        self.keys, self.values, self.length = keys, values, keys.size(2)

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.keys, self.values = torch.cat([self.keys, k], 2), torch.cat([self.values, v], 2)  # (B, H, P + T, D)
        return self.keys, self.values


def _step(model: GPT | Seq2SeqTransformer, input_ids: Tensor, key_mask: Tensor, past: tuple[Tensor, ...],
          memory_kv: list[tuple[Tensor, Tensor]] | None, memory_mask: Tensor | None) -> tuple[Tensor, ...]:
    """One decoder call on ``input_ids (B, T)`` after a past of P positions; ``key_mask (B, P + T)`` bool."""
    T = input_ids.size(1)
    caches = [_PastKV(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
    positions = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]  # (B, T): real tokens counted
    embed = model.embed if isinstance(model, GPT) else model.tgt_embed
    x = embed(input_ids, positions)  # (B, T, C)
    cache = DecoderCache(caches, list(memory_kv) if memory_kv is not None else [None] * len(caches))
    h = model.decoder(x, key_mask=key_mask, memory_key_mask=memory_mask, positions=positions, cache=cache)
    logits = model.output_logits(h[:, -1])  # (B, V): the last position only
    return (logits, *[t for c in caches for t in (c.keys, c.values)])


class _GPTStep(nn.Module):
    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Tensor, attention_mask: Tensor, *past: Tensor) -> tuple[Tensor, ...]:
        return _step(self.model, input_ids, attention_mask.bool(), past, None, None)


class _Seq2SeqEncoder(nn.Module):
    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        memory = self.model.encode(src, src_mask.bool())  # (B, S, C)
        return tuple(t for layer in self.model.decoder.layers for t in layer.cross_attn.project_kv(memory))


class _Seq2SeqStep(nn.Module):
    def __init__(self, model: Seq2SeqTransformer) -> None:
        super().__init__()
        self.model, self.n_layers = model, len(model.decoder.layers)

    def forward(self, input_ids: Tensor, src_mask: Tensor, *kv: Tensor) -> tuple[Tensor, ...]:
        past, cross = kv[:2 * self.n_layers], kv[2 * self.n_layers:]
        B, T, P = input_ids.size(0), input_ids.size(1), past[0].size(2)
        # every target token is real; an explicit mask keeps one attention path for the prompt and the steps
        key_mask = torch.ones(B, P + T, dtype=torch.bool, device=input_ids.device)
        memory_kv = [(cross[2 * i], cross[2 * i + 1]) for i in range(self.n_layers)]
        return _step(self.model, input_ids, key_mask, past, memory_kv, src_mask.bool())


def _kv_names(prefix: str, n_layers: int) -> list[str]:
    return [f"{prefix}_{kind}_{i}" for i in range(n_layers) for kind in ("key", "value")]


def _export(module: nn.Module, args: tuple[Tensor, ...], names: list[str], outputs: list[str], path: Path,
            opset: int | None) -> None:
    """``module(*args)`` to ``path``; every axis marked dynamic is inferred (``Dim.AUTO``): the exporter finds
    that the mask is P + T long and that all past tensors share P."""
    auto = torch.export.Dim.AUTO
    dims = [{0: auto, 1: auto} if a.dim() == 2 else {0: auto, 2: auto} for a in args]
    dynamic = (*dims[:2], tuple(dims[2:])) if len(dims) > 2 else tuple(dims)  # forward(first, second, *rest)
    with _quiet():
        program = torch.onnx.export(module, args, None, input_names=names, output_names=outputs,
                                    dynamic_shapes=dynamic, opset_version=opset, dynamo=True, verbose=False)
    program.save(path)


def _check(model: nn.Module) -> GPT | Seq2SeqTransformer:
    if not isinstance(model, (GPT, Seq2SeqTransformer)):
        raise ExportError(f"--format onnx (with the KV cache) exports a GPT or an encoder-decoder, not "
                          f"{type(model).__name__}: use --format onnx-single")
    if model.config.attention == "linear":
        raise ExportError("attention=linear keeps a recurrent state, not keys and values: the cached ONNX export "
                          "does not apply; use --format onnx-single")
    if model.config.max_len < 8:  # the example traced: a past of 5 and 3 new tokens, a source of 7
        raise ExportError(f"max_len={model.config.max_len} is too short to trace the cached graphs (at least 8)")
    return model


def manifest_of(model: GPT | Seq2SeqTransformer, tokenizer: Tokenizer | None = None) -> dict:
    """What ``onnx_decode.py`` reads: the graph files, the cache shapes, the special ids, the vocabulary."""
    cfg = model.config
    gpt = isinstance(model, GPT)
    info = {"format": FORMAT, "version": 1, "arch": cfg.arch, "decoder_only": gpt, "dtype": "float32",
            "graphs": {"decoder": "decoder.onnx"} if gpt else {"encoder": "encoder.onnx", "decoder": "decoder.onnx"},
            # "n_heads": the heads of the cache (n_kv_heads, with grouped-query attention)
            "n_layers": len(model.decoder.layers), "n_heads": cfg.kv_heads, "head_dim": cfg.head_dim,
            "max_len": cfg.max_len, "vocab_size": cfg.target_vocab_size, "pad_id": cfg.pad_id,
            "bos_id": 1, "eos_id": 2, "eos_ids": [2], "tokenizer": None}
    if tokenizer is not None:
        info["bos_id"], info["eos_id"] = tokenizer.bos_id, tokenizer.eos_id
        info["eos_ids"] = list(tokenizer.eos_ids)  # where a generation stops: every id (Llama 3.1 has three)
        # text in and out: tokenizer.json, through the tokenizers library; a scratchformer tokenizer reads text that
        # spells "<eos>" as characters (split_special_tokens), a pretrained one as its token
        info["tokenizer"] = {"kind": tokenizer.kind, "file": "tokenizer.json",
                             "split_special_tokens": not tokenizer.parsed_specials}
        if tokenizer.per_character:  # small enough to carry: text in, text out with numpy alone
            info["tokenizer"] |= {"tokens": [tokenizer.id_to_token(i) for i in range(tokenizer.vocab_size)],
                                  "n_special": len(tokenizer.specials), "unk_id": tokenizer.unk_id}
    return info


def export_onnx_cached(model: nn.Module, folder: str | os.PathLike, *, tokenizer: object | None = None,
                       opset: int | None = None, chat_template: str | None = None) -> Path:
    """Write ``folder`` (which must not exist): the cached graphs, ``manifest.json``, a copy of the torch-free
    decoding loop (``onnx_decode.py``) and, given a tokenizer, its files (``tokenizer.json`` as the ``tokenizers``
    library reads it, ``tokenizer_config.json`` with ``chat_template``, default the tokenizer's own). Returns the
    folder."""
    model = _check(model)
    require("onnxscript", "onnx")
    folder = Path(folder)
    if folder.exists():
        raise ExportError(f"{folder} exists; choose another output folder")
    parent = folder.parent if str(folder.parent) else Path(".")
    if not parent.is_dir():
        raise ExportError(f"cannot write {folder}: directory {parent} does not exist")
    cfg, L = model.config, len(model.decoder.layers)
    gen = torch.Generator().manual_seed(0)
    ids = lambda n, v: torch.randint(1, max(v, 2), (2, n), generator=gen)  # noqa: E731
    kv = lambda n: torch.randn(2, cfg.kv_heads, n, cfg.head_dim, generator=gen)  # noqa: E731  # the cache's heads
    # distinct example sizes (batch 2, prompt 3, past 5, source 7): equal sizes would be taken for one axis
    past = tuple(kv(5) for _ in range(2 * L))
    with eval_mode(model), _atomic_dir(folder) as tmp:
        if isinstance(model, GPT):
            mask = torch.ones(2, 8, dtype=torch.long)
            _export(_GPTStep(model).eval(), (ids(3, cfg.vocab_size), mask, *past),
                    ["input_ids", "attention_mask", *_kv_names("past", L)],
                    ["logits", *_kv_names("present", L)], tmp / "decoder.onnx", opset)
        else:
            src = ids(7, cfg.vocab_size)
            src_mask = padding_mask(src, cfg.pad_id).long()
            _export(_Seq2SeqEncoder(model).eval(), (src, src_mask), ["src", "src_mask"], _kv_names("cross", L),
                    tmp / "encoder.onnx", opset)
            cross = tuple(kv(7) for _ in range(2 * L))
            _export(_Seq2SeqStep(model).eval(), (ids(3, cfg.target_vocab_size), src_mask, *past, *cross),
                    ["input_ids", "src_mask", *_kv_names("past", L), *_kv_names("cross", L)],
                    ["logits", *_kv_names("present", L)], tmp / "decoder.onnx", opset)
        info = manifest_of(model, tokenizer)
        (tmp / MANIFEST).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        loop = Path(__file__).with_name("onnx_decode.py")
        (tmp / "onnx_decode.py").write_bytes(loop.read_bytes())
        if tokenizer is not None:
            from scratchformer.interop.hf_tokenizers import hf_tokenizer_files

            for name, text in hf_tokenizer_files(tokenizer, cfg, chat_template).items():
                (tmp / name).write_text(text, encoding="utf-8")
        publish_dir(tmp, folder)  # the whole folder appears at once
    return folder
