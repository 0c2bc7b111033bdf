"""Weights between the library's models and the one-file model of ``scratchformer/paper.py``, both directions.

The library's models hold the paper's model when built with the paper's settings (``PAPER_SETTINGS``: post-LN,
ReLU, sinusoidal positions, embeddings x sqrt(C), tied, LayerNorm with bias, nothing added since 2017);
``to_paper`` refuses any other in one line naming the fields. The two name their weights differently, and the
library stacks W^Q, W^K and W^V as the three row blocks of one ``in_proj`` matrix where ``paper.py`` keeps
three ``w_q``, ``w_k``, ``w_v`` layers: ``paper_state_dict`` and ``library_state_dict`` rename and split or
join them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer import paper
from scratchformer.families import FAMILIES, family
from scratchformer.models import build_model
from scratchformer.nn.config import ModelConfig

# Every field the one-file model fixes, at its value there.
PAPER_SETTINGS = dict(norm="post", activation="relu", positional="sinusoidal", scale_embeddings=True, bias=True,
                      norm_type="layernorm", qk_norm=False, attention="softmax", attention_window=0,
                      attention_dropout=0.0, embedding_norm=False, layer_norm_eps=1e-5)

# (paper name, library name) by prefix inside one layer, for the layers of each stack
_ATTENTION = {"w_o.": "out_proj."}  # w_q, w_k, w_v: the three row blocks of in_proj (below)
_FFN = {"ffn.w_1.": "ffn.linear1.", "ffn.w_2.": "ffn.linear2."}
_ENCODER_LAYER = {"add_norm_1.": "attn_block.", "add_norm_2.": "ffn_block."}
_DECODER_LAYER = {"add_norm_1.": "self_attn_block.", "add_norm_2.": "cross_attn_block.", "add_norm_3.": "ffn_block."}
_GPT_LAYER = {"add_norm_1.": "self_attn_block.", "add_norm_2.": "ffn_block."}
# (paper stack, library stack, the layer's names) and the embedding, for each model of paper.py (the family
# registry's ``paper`` names which a family equals)
_STACKS = {
    "make_model": ([("encoder.layers.", "encoder.layers.", _ENCODER_LAYER), ("decoder.layers.", "decoder.layers.",
                                                                             _DECODER_LAYER)], "src_embed.token."),
    "GPT": ([("blocks.layers.", "decoder.layers.", _GPT_LAYER)], "embed.token."),
    "Classifier": ([("encoder.layers.", "encoder.layers.", _ENCODER_LAYER)], "embed.token."),
}
_QKV = {"w_q.": 0, "w_k.": 1, "w_v.": 2}


def check_paper_settings(config: ModelConfig) -> None:
    """Raise ``ValueError`` unless ``config`` describes a model that ``paper.py`` can hold."""
    wrong = [f"{k}={getattr(config, k)!r} (the paper: {v!r})" for k, v in PAPER_SETTINGS.items()
             if getattr(config, k) != v]
    entry = family(config.arch)
    if not entry.paper:
        has = ", ".join(f.name for f in FAMILIES.values() if f.paper)
        wrong.insert(0, f"arch={config.arch!r} (paper.py has {has})")
    if entry.predicts_tokens and not (config.tie_embeddings and config.shared_vocab):
        wrong.append("separate embeddings (the paper shares one matrix: tie_embeddings=true, no tgt_vocab_size)")
    if entry.two_stacks and config.n_encoder_layers != config.n_decoder_layers:
        wrong.append(f"n_encoder_layers={config.n_encoder_layers} != n_decoder_layers={config.n_decoder_layers}")
    if entry.classifies and config.pooling != "mean":
        wrong.append(f"pooling={config.pooling!r} (paper.py's classifier takes the mean)")
    if wrong:
        raise ValueError("not the paper's model: " + "; ".join(wrong))


def paper_model(config: ModelConfig) -> nn.Module:
    """An untrained ``paper.py`` model of the family and sizes of ``config`` (checked by ``check_paper_settings``)."""
    check_paper_settings(config)
    entry = family(config.arch)
    sizes = dict(n_layers=config.n_encoder_layers if entry.two_stacks else config.n_layers,
                 d_model=config.d_model, d_ff=config.d_ff, n_heads=config.n_heads, dropout=config.dropout,
                 max_len=config.max_len, pad_id=config.pad_id)
    classes = (config.n_classes,) if entry.classifies else ()  # paper.Classifier(vocab, n_classes, ...)
    return getattr(paper, entry.paper)(config.vocab_size, *classes, **sizes)


def _library_name(arch: str, name: str, d_model: int) -> tuple[str, slice | None]:
    """A ``paper.py`` parameter's library name, and the rows of it that hold this parameter (W^Q, W^K, W^V)."""
    stacks, embedding = _STACKS[family(arch).paper]
    if name.startswith("embed.table."):
        return embedding + name.removeprefix("embed.table."), None
    for ours, theirs, layer_names in stacks:
        if name.startswith(ours):
            index, rest = name.removeprefix(ours).split(".", 1)
            for a, b in {**layer_names, **_FFN}.items():
                if rest.startswith(a):
                    return f"{theirs}{index}.{b}{rest.removeprefix(a)}", None
            attn, proj, param = rest.split(".")  # self_attn.w_q.weight
            if proj + "." in _QKV:
                i = _QKV[proj + "."]
                return f"{theirs}{index}.{attn}.in_proj.{param}", slice(i * d_model, (i + 1) * d_model)
            return f"{theirs}{index}.{attn}.{_ATTENTION[proj + '.']}{param}", None
    return name, None  # the classifier's head: the same name in both


def paper_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """A library model's weights under ``paper.py``'s names (W^Q, W^K, W^V split out of ``in_proj``)."""
    config: ModelConfig = model.config  # type: ignore[assignment]
    check_paper_settings(config)
    library = model.state_dict()
    names = paper_model(config).state_dict().keys()
    out = {}
    for name in names:
        theirs, rows = _library_name(config.arch, name, config.d_model)
        out[name] = library[theirs] if rows is None else library[theirs][rows]
    return out


def library_state_dict(model: nn.Module, config: ModelConfig) -> dict[str, Tensor]:
    """A ``paper.py`` model's weights under the names of the library's model for ``config`` (W^Q, W^K, W^V
    stacked into ``in_proj``; a tied embedding under every name the library gives it)."""
    check_paper_settings(config)
    target = build_model(config).state_dict()
    out = {k: v.clone() for k, v in target.items()}
    for name, value in model.state_dict().items():
        theirs, rows = _library_name(config.arch, name, config.d_model)
        if rows is None:
            out[theirs] = value
        else:
            out[theirs][rows] = value
    if family(config.arch).two_stacks:  # one matrix: the library names it twice
        out["tgt_embed.token.weight"] = out["src_embed.token.weight"]
    return out


def to_paper(model: nn.Module) -> nn.Module:
    """The one-file model (``paper.py``) holding a library model's weights, in the same train/eval mode."""
    out = paper_model(model.config)  # type: ignore[arg-type]
    out.load_state_dict(paper_state_dict(model))
    return out.train(model.training)


def from_paper(model: nn.Module, config: ModelConfig) -> nn.Module:
    """The library's model for ``config`` holding a ``paper.py`` model's weights, in the same train/eval mode."""
    out = build_model(config)
    with torch.no_grad():
        out.load_state_dict(library_state_dict(model, config))
    return out.train(model.training)
