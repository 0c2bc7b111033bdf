"""Hugging Face GPT-2 and BERT weights loaded into scratchformer's models, without ``transformers``.

``gpt2_from_pretrained`` and ``bert_from_pretrained`` read a directory as ``save_pretrained`` writes it
(``config.json`` + ``model.safetensors``), without executing code from the files. Differences handled here,
at load time, so the model code has no special cases:

- GPT-2 stores its projections as ``Conv1D`` weights ``(in, out)``: transposed to ``nn.Linear``'s
  ``(out, in)``. Its "gelu_new" activation is ``activation="gelu_tanh"``.
- BERT keeps Q, K, V in three matrices (stacked into ``in_proj``), normalises the embeddings
  (``embedding_norm=True``), and adds a token-type embedding: for single-segment input (type 0) that row
  is a constant, so it is folded into the position table.

GPT-2, name by name (``gpt2_plan``; theirs under ``transformer.``; ``i`` is the layer)::

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

BERT, name by name (theirs under ``bert.``, except ``classifier``; ``BertModel``: the same names without
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
from scratchformer.models import GPT, EncoderClassifier
from scratchformer.nn.config import ModelConfig


def _read_hf_dir(model_dir: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """``config.json`` and the weights (``model.safetensors``, else ``pytorch_model.bin``) of a directory."""
    model_dir = Path(model_dir)
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{model_dir} has no config.json (expected a Hugging Face save_pretrained directory)")
    hf_config = json.loads(config_path.read_text())
    if (model_dir / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(model_dir / "model.safetensors"))
    elif (model_dir / "pytorch_model.bin").is_file():
        state = torch.load(model_dir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{model_dir} has neither model.safetensors nor pytorch_model.bin")
    return hf_config, state


def _strip_prefix(state: dict[str, Tensor], prefix: str) -> dict[str, Tensor]:
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}


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


def gpt2_from_pretrained(model_dir: str | Path, dtype: torch.dtype = torch.float32) -> GPT:
    """Load a Hugging Face GPT-2 directory (``GPT2LMHeadModel.save_pretrained``) into ``GPT``."""
    hf, state = _read_hf_dir(model_dir)
    cfg = gpt2_config(hf, model_dir)
    state = _strip_prefix(state, "transformer.")
    ours = {mine: state[theirs[0]].t() if conv else state[theirs[0]] for mine, theirs, conv in gpt2_plan(cfg)}
    model = GPT(cfg)
    load_exact(model, {k: v.contiguous() for k, v in ours.items()})
    return model.to(dtype).eval()


def bert_from_pretrained(model_dir: str | Path, n_classes: int = 2, pooling: str = "mean",
                         dtype: torch.dtype = torch.float32) -> EncoderClassifier:
    """Load a Hugging Face BERT directory (``config.json`` + ``model.safetensors``) into an
    ``EncoderClassifier``. ``.encode(input_ids, attention_mask)`` then returns ``BertModel``'s
    ``last_hidden_state``; the classification head (``n_classes``) is freshly initialised. With
    ``pooling="pooler"`` the file's pooler (``pooler.dense``) is loaded too, if it has one.
    """
    hf, state = _read_hf_dir(model_dir)
    if hf.get("model_type", "bert") != "bert":
        raise ValueError(f"{model_dir} holds a {hf.get('model_type')!r} model, not bert")
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"unsupported position_embedding_type={hf['position_embedding_type']!r}")
    if hf.get("hidden_act", "gelu") not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act={hf.get('hidden_act')!r}")
    C = hf["hidden_size"]
    cfg = ModelConfig(
        arch="encoder", vocab_size=hf["vocab_size"], d_model=C, n_heads=hf["num_attention_heads"],
        n_layers=hf["num_hidden_layers"], d_ff=hf["intermediate_size"], max_len=hf["max_position_embeddings"],
        dropout=hf.get("hidden_dropout_prob", 0.1), attention_dropout=hf.get("attention_probs_dropout_prob", 0.1),
        norm="post", activation=_HF_ACTIVATIONS[hf.get("hidden_act", "gelu")], positional="learned",
        scale_embeddings=False, tie_embeddings=False, embedding_norm=True,
        layer_norm_eps=hf.get("layer_norm_eps", 1e-12), pad_id=hf.get("pad_token_id") or 0,
        n_classes=n_classes, pooling=pooling,  # type: ignore[arg-type]
    )
    state = _strip_prefix(state, "bert.")
    e = "embeddings."
    positions = state[e + "position_embeddings.weight"]
    if e + "token_type_embeddings.weight" in state:  # segment 0 adds the same vector at every position
        positions = positions + state[e + "token_type_embeddings.weight"][0]
    ours: dict[str, Tensor] = {
        "embed.token.weight": state[e + "word_embeddings.weight"],
        "embed.position_embedding.weight": positions,
        "embed.norm.weight": state[e + "LayerNorm.weight"],
        "embed.norm.bias": state[e + "LayerNorm.bias"],
    }
    for i in range(cfg.n_layers):
        b, o = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        qkv = [b + f"attention.self.{n}" for n in ("query", "key", "value")]
        ours.update({
            o + "self_attn.in_proj.weight": torch.cat([state[n + ".weight"] for n in qkv]),
            o + "self_attn.in_proj.bias": torch.cat([state[n + ".bias"] for n in qkv]),
            o + "self_attn.out_proj.weight": state[b + "attention.output.dense.weight"],
            o + "self_attn.out_proj.bias": state[b + "attention.output.dense.bias"],
            o + "attn_block.norm.weight": state[b + "attention.output.LayerNorm.weight"],
            o + "attn_block.norm.bias": state[b + "attention.output.LayerNorm.bias"],
            o + "ffn.linear1.weight": state[b + "intermediate.dense.weight"],
            o + "ffn.linear1.bias": state[b + "intermediate.dense.bias"],
            o + "ffn.linear2.weight": state[b + "output.dense.weight"],
            o + "ffn.linear2.bias": state[b + "output.dense.bias"],
            o + "ffn_block.norm.weight": state[b + "output.LayerNorm.weight"],
            o + "ffn_block.norm.bias": state[b + "output.LayerNorm.bias"],
        })
    if pooling == "pooler" and "pooler.dense.weight" in state:  # BERT's pretrained pooler, when the file has it
        ours.update({"pooler.weight": state["pooler.dense.weight"], "pooler.bias": state["pooler.dense.bias"]})
    model = EncoderClassifier(cfg)
    fresh = {k: v for k, v in model.state_dict().items() if k.startswith(("head.", "pooler.")) and k not in ours}
    load_exact(model, {**{k: v.contiguous() for k, v in ours.items()}, **fresh})
    return model.to(dtype).eval()
