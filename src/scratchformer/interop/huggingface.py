"""Hugging Face GPT-2 and BERT weights loaded into scratchformer's models, without ``transformers``; each name plan
written once, here, and read both ways (``hf_models.py`` writes the same names back).

``hf_folder.gpt2_from_pretrained`` and ``bert_from_pretrained`` read a directory as ``save_pretrained`` writes it
(``config.json`` + ``model.safetensors``, or its shards), without executing code from the files: a pickled
``pytorch_model.bin`` is refused, as in every reader (``safetensors_files.py``). Differences handled here, at load
time, so the model code has no special cases:

- GPT-2 stores its projections as ``Conv1D`` weights ``(in, out)``: transposed to ``nn.Linear``'s
  ``(out, in)``. Its "gelu_new" activation is ``activation="gelu_tanh"``.
- BERT keeps Q, K, V in three matrices (stacked into ``in_proj``), normalises the embeddings
  (``embedding_norm=True``), and adds a token-type embedding: for single-segment input (type 0) that row
  is a constant, so it is folded into the position table.

GPT-2, name by name (``gpt2_plan``; theirs under ``transformer.``; ``i`` is the layer; read by ``hf_folder.py``'s
loader)::

    embed.token.weight                                  wte.weight (and lm_head.weight, when tied)
    embed.position_embedding.weight                     wpe.weight
    decoder.layers.i.self_attn_block.norm.{weight,bias} h.i.ln_1.{weight,bias}
    decoder.layers.i.self_attn.in_proj.{weight,bias}    h.i.attn.c_attn.{weight^T,bias}
    decoder.layers.i.self_attn.out_proj.{weight,bias}   h.i.attn.c_proj.{weight^T,bias}
    decoder.layers.i.ffn_block.norm.{weight,bias}       h.i.ln_2.{weight,bias}
    decoder.layers.i.ffn.linear1.{weight,bias}          h.i.mlp.c_fc.{weight^T,bias}
    decoder.layers.i.ffn.linear2.{weight,bias}          h.i.mlp.c_proj.{weight^T,bias}
    decoder.norm.{weight,bias}                          ln_f.{weight,bias}
    lm_head.weight (untied)                             lm_head.weight (outside transformer.)

BERT, name by name (``bert_plan``; theirs under ``bert.``, except ``classifier``; ``BertModel``: the same names without
``bert.``)::

    embed.token.weight                               embeddings.word_embeddings.weight
    embed.position_embedding.weight                  embeddings.position_embeddings.weight
    (none)                                           embeddings.token_type_embeddings.weight: one row of zeros
    embed.norm.{weight,bias}                         embeddings.LayerNorm.{weight,bias}
    encoder.layers.i.self_attn.in_proj rows 0:C      encoder.layer.i.attention.self.query
                                       rows C:2C     encoder.layer.i.attention.self.key
                                       rows 2C:3C    encoder.layer.i.attention.self.value
    encoder.layers.i.self_attn.out_proj              encoder.layer.i.attention.output.dense
    encoder.layers.i.attn_block.norm                 encoder.layer.i.attention.output.LayerNorm
    encoder.layers.i.ffn.linear1                     encoder.layer.i.intermediate.dense
    encoder.layers.i.ffn.linear2                     encoder.layer.i.output.dense
    encoder.layers.i.ffn_block.norm                  encoder.layer.i.output.LayerNorm
    pooler                                           pooler.dense (BertModel of a model without one: zeros)
    head                                             classifier

The reverse direction (a scratchformer model as a ``transformers`` one) is ``hf_models.py``; Llama and Qwen3
folders are read by ``hf_folder.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.interop.torch_nn import load_exact
from scratchformer.models import EncoderClassifier
from scratchformer.nn.config import ModelConfig

_HF_ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


def gpt2_config(hf: dict[str, Any], model_dir: str | Path = "the folder") -> ModelConfig:
    """The ``ModelConfig`` of a GPT-2 ``config.json``; ``ValueError`` for an option it does not hold."""
    if hf.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"{model_dir} holds a {hf.get('model_type')!r} model, not gpt2")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if hf.get(flag):
            raise ValueError(f"GPT-2 option {flag}=True is not supported")
    if hf.get("activation_function", "gelu_new") not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported activation_function={hf.get('activation_function')!r}")
    C = hf["n_embd"]
    pad = hf.get("pad_token_id")
    return ModelConfig(
        arch="gpt", vocab_size=hf["vocab_size"], d_model=C, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * C, max_len=hf["n_positions"], dropout=hf.get("resid_pdrop", 0.1),
        attention_dropout=hf.get("attn_pdrop", 0.1), norm="pre",
        activation=_HF_ACTIVATIONS[hf.get("activation_function", "gelu_new")], positional="learned",
        scale_embeddings=False, tie_embeddings=hf.get("tie_word_embeddings", True),
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5), bias=True,
        pad_id=pad if isinstance(pad, int) and 0 <= pad < hf["vocab_size"] else 0,
    )


def gpt2_plan(cfg: ModelConfig) -> list[tuple[str, list[str], bool]]:
    """Where each of our tensors comes from in a GPT-2 folder (names without ``transformer.``): (ours, [theirs],
    transposed). Conv1D weights are ``(in, out)``; ``nn.Linear`` wants ``(out, in)``."""
    plan = [("embed.token.weight", ["wte.weight"], False), ("embed.position_embedding.weight", ["wpe.weight"], False),
            ("decoder.norm.weight", ["ln_f.weight"], False), ("decoder.norm.bias", ["ln_f.bias"], False)]
    for i in range(cfg.n_layers):
        h, o = f"h.{i}.", f"decoder.layers.{i}."
        for ours, theirs, conv in (("self_attn_block.norm", "ln_1", False), ("self_attn.in_proj", "attn.c_attn", True),
                                   ("self_attn.out_proj", "attn.c_proj", True), ("ffn_block.norm", "ln_2", False),
                                   ("ffn.linear1", "mlp.c_fc", True), ("ffn.linear2", "mlp.c_proj", True)):
            plan += [(o + ours + ".weight", [h + theirs + ".weight"], conv),
                     (o + ours + ".bias", [h + theirs + ".bias"], False)]
    if not cfg.tie_embeddings:
        plan.append(("lm_head.weight", ["lm_head.weight"], False))
    return plan


Plan = list[tuple[str, list[str], bool]]  # (our name, their names stacked in this order, transposed)


def bert_plan(cfg: ModelConfig, prefix: str = "bert.") -> Plan:
    """Where each of our encoder's tensors is in a BERT folder (``prefix``: ``bert.`` for a classifier's,
    nothing for ``BertModel``'s): W^Q, W^K and W^V stacked into ``in_proj``; the pooler and head are not in it."""
    e = prefix + "embeddings."
    plan: Plan = [("embed.token.weight", [e + "word_embeddings.weight"], False),
                  ("embed.position_embedding.weight", [e + "position_embeddings.weight"], False),
                  ("embed.norm.weight", [e + "LayerNorm.weight"], False),
                  ("embed.norm.bias", [e + "LayerNorm.bias"], False)]
    for i in range(cfg.n_layers):
        b, o = f"{prefix}encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            plan.append((o + f"self_attn.in_proj.{kind}", [b + f"attention.self.{n}.{kind}"
                                                           for n in ("query", "key", "value")], False))
            plan += [(o + f"{ours}.{kind}", [b + f"{theirs}.{kind}"], False) for ours, theirs in (
                ("self_attn.out_proj", "attention.output.dense"), ("attn_block.norm", "attention.output.LayerNorm"),
                ("ffn.linear1", "intermediate.dense"), ("ffn.linear2", "output.dense"),
                ("ffn_block.norm", "output.LayerNorm"))]
    return plan


def bert_config(hf: dict[str, Any], n_classes: int = 2, pooling: str = "mean") -> ModelConfig:
    """The ``ModelConfig`` of a BERT ``config.json``, with a new head of ``n_classes`` pooled by ``pooling``;
    ``ValueError`` for an option it does not hold."""
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"the folder holds a {hf.get('model_type')!r} model, not bert")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"unsupported position_embedding_type={hf['position_embedding_type']!r}")
    if hf.get("hidden_act", "gelu") not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act={hf.get('hidden_act')!r}")
    return ModelConfig(
        arch="encoder", vocab_size=hf["vocab_size"], d_model=hf["hidden_size"], n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
        dropout=hf.get("hidden_dropout_prob", 0.1), attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        norm="post", activation=_HF_ACTIVATIONS[hf.get("hidden_act", "gelu")], positional="learned",
        scale_embeddings=False, tie_embeddings=False, embedding_norm=True,
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12), pad_id=hf.get("pad_token_id") or 0,
        n_classes=n_classes, pooling=pooling,  # type: ignore[arg-type]
    )


def bert_from_pretrained(model_dir: str | Path, n_classes: int = 2, pooling: str = "mean",
                         dtype: torch.dtype = torch.float32) -> EncoderClassifier:
    """Load a Hugging Face BERT directory (``config.json`` + ``model.safetensors``) into an
    ``EncoderClassifier``. ``.encode(input_ids, attention_mask)`` then returns ``BertModel``'s
    ``last_hidden_state``; the classification head (``n_classes``) is freshly initialised. With
    ``pooling="pooler"`` the file's pooler (``pooler.dense``) is loaded too, if it has one.
    """
    from scratchformer.interop.safetensors_files import WeightsError, reader, weight_map

    folder = Path(model_dir)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json (expected a Hugging Face save_pretrained directory)")
    cfg = bert_config(json.loads((folder / "config.json").read_text(encoding="utf-8")), n_classes, pooling)
    try:
        files = weight_map(folder)
    except WeightsError as err:
        raise ValueError(str(err)) from None
    prefix = "bert." if any(n.startswith("bert.") for n in files) else ""
    e = prefix + "embeddings."
    ours: dict[str, Tensor] = {}
    with reader(files) as read:
        for mine, theirs, _ in bert_plan(cfg, prefix):
            ours[mine] = torch.cat([read(n) for n in theirs]) if len(theirs) > 1 else read(theirs[0])
        if e + "token_type_embeddings.weight" in files:  # segment 0 adds the same vector at every position
            ours["embed.position_embedding.weight"] = (ours["embed.position_embedding.weight"]
                                                       + read(e + "token_type_embeddings.weight")[0])
        if pooling == "pooler" and prefix + "pooler.dense.weight" in files:  # BERT's pretrained pooler
            ours.update({"pooler.weight": read(prefix + "pooler.dense.weight"),
                         "pooler.bias": read(prefix + "pooler.dense.bias")})
    model = EncoderClassifier(cfg)
    fresh = {k: v for k, v in model.state_dict().items() if k.startswith(("head.", "pooler.")) and k not in ours}
    load_exact(model, {**{k: v.float().contiguous() for k, v in ours.items()}, **fresh})
    return model.to(dtype).eval()
