"""Weights to and from PyTorch's own Transformer modules: ``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer``,
``nn.TransformerDecoderLayer`` and ``nn.Transformer``, both directions (the parity tests use them).

PyTorch's boolean masks mean *True = may NOT attend*, the opposite of scratchformer's; ``to_torch_mask``
converts, here and nowhere else. ``nn.Transformer`` puts a final LayerNorm on both stacks even when post-LN;
the paper's post-LN model has none: ``to_torch_transformer`` sets them to ``None``; ``load_torch_transformer``
refuses a post-LN ``nn.Transformer`` that has them.
"""

from __future__ import annotations

from torch import Tensor, nn

from scratchformer.models import Seq2SeqTransformer
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


def load_exact(module: nn.Module, state: dict[str, Tensor]) -> None:
    """``load_state_dict`` that also insists on matching shapes and no missing or extra keys."""
    own = module.state_dict()
    for key, value in state.items():
        if key in own and own[key].shape != value.shape:
            raise ValueError(f"shape mismatch for {key}: {tuple(value.shape)} vs {tuple(own[key].shape)}")
    module.load_state_dict(state, strict=True)


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``batch_first`` ``nn.MultiheadAttention`` with the same weights."""
    if mha.kind != "softmax":
        raise ValueError(f"nn.MultiheadAttention computes softmax attention only, not {mha.kind!r}")
    if mha.q_norm is not None:
        raise ValueError("nn.MultiheadAttention does not normalise queries and keys: qk_norm has no counterpart there")
    t = nn.MultiheadAttention(mha.d_model, mha.n_heads, dropout=mha.dropout, bias=mha.in_proj.bias is not None,
                              batch_first=True)
    load_exact(t, _rename(mha.state_dict(), _MHA_NAMES))
    return t


def mha_from_torch(t: nn.MultiheadAttention) -> MultiHeadAttention:
    """A ``MultiHeadAttention`` with the weights of ``t`` (which must use one in-projection)."""
    if not t._qkv_same_embed_dim or t.bias_k is not None:
        raise ValueError("only nn.MultiheadAttention with kdim == vdim == embed_dim and no bias_k/bias_v is supported")
    mha = MultiHeadAttention(t.embed_dim, t.num_heads, bias=t.in_proj_bias is not None, dropout=t.dropout)
    load_exact(mha, _rename(t.state_dict(), _MHA_NAMES, reverse=True))
    return mha


def encoder_layer_to_torch(layer: EncoderLayer, cfg: ModelConfig) -> nn.TransformerEncoderLayer:
    t = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=cfg.dropout,
                                   activation=_torch_activation(cfg), layer_norm_eps=cfg.layer_norm_eps,
                                   batch_first=True, norm_first=cfg.norm == "pre", bias=cfg.bias)
    load_exact(t, _rename(layer.state_dict(), _ENCODER_LAYER_NAMES))
    return t


def encoder_layer_from_torch(t: nn.TransformerEncoderLayer, cfg: ModelConfig) -> EncoderLayer:
    """An ``EncoderLayer`` built from ``cfg`` (which must describe ``t``) holding ``t``'s weights."""
    layer = EncoderLayer(cfg)
    load_exact(layer, _rename(t.state_dict(), _ENCODER_LAYER_NAMES, reverse=True))
    return layer


def decoder_layer_from_torch(t: nn.TransformerDecoderLayer, cfg: ModelConfig) -> DecoderLayer:
    layer = DecoderLayer(cfg, cross_attention=True)
    load_exact(layer, _rename(t.state_dict(), _DECODER_LAYER_NAMES, reverse=True))
    return layer


def _torch_activation(cfg: ModelConfig) -> str:
    if cfg.attention != "softmax":
        raise ValueError(f"torch.nn.Transformer computes softmax attention only: attention={cfg.attention!r} "
                         "has no counterpart there")
    if cfg.norm_type != "layernorm" or cfg.qk_norm:
        raise ValueError("torch.nn.Transformer normalises with LayerNorm only, and not queries and keys: "
                         f"norm_type={cfg.norm_type!r}, qk_norm={cfg.qk_norm} have no counterpart there")
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
    load_exact(t, _rename(_stacks_state(model), _transformer_names(cfg)))
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
