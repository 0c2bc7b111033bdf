"""Typed model configuration: one dataclass for every Transformer family.

``ModelConfig`` describes *what* network to build. ``arch`` names the family, an entry of the family registry
(``families.py``: what it reads, its stacks, its output, its defaults): ``"seq2seq"`` (the paper's encoder-decoder,
§3.1), ``"gpt"`` (a decoder-only language model), ``"gpt-classifier"`` (a GPT's body classifying from each text's
last real token; older runs wrote ``arch="gpt"`` with ``pooling="last"``), ``"encoder"`` (an encoder-only
classifier, BERT-like) and ``"vit"`` (the Vision Transformer: pixels in, so ``image_size``, ``patch_size`` and
``channels`` describe its input, and ``max_len`` follows from them: the patches and the class token).

Architecture choices are single fields with a small set of named values. Fields left as ``None`` take the family's
default in ``__post_init__`` (``FAMILY_DEFAULTS``, the registry's). The JSON written with a checkpoint is then complete:
what stays ``None`` (``n_kv_heads``, ``head_size``, ``tgt_vocab_size``, ``expert_d_ff``) follows from other fields.
Impossible configurations raise ``ConfigError`` (a ``ValueError``) with a message naming the fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, Family, family, saved_family
from scratchformer.nn.expert_settings import check_experts
from scratchformer.nn.image_settings import check_pixels
from scratchformer.nn.model_presets import PRESETS
from scratchformer.nn.rope_scaling import check_rope_scaling
from scratchformer.nn.window_settings import check_windows

# Each choice field's allowed values, written once: the blocks check against these types too (``choices``).
Norm = Literal["post", "pre"]
NormType = Literal["layernorm", "rmsnorm"]
Activation = Literal["relu", "gelu", "gelu_tanh", "swiglu", "geglu_tanh", "relu2"]
Positional = Literal["sinusoidal", "learned", "rotary", "none"]
Pooling = Literal["mean", "max", "cls", "pooler", "last"]
# softmax: the paper's equation 1; linear: Katharopoulos et al. (2020), "Transformers are RNNs" (linear_attention.py)
AttentionKind = Literal["softmax", "linear"]
Init = Literal["default", "zero_out"]


def choices(kind: Any) -> tuple[str, ...]:
    """The allowed values of a choice type (``choices(Norm) == ("post", "pre")``)."""
    return get_args(kind)


CHOICES: dict[str, tuple[str, ...]] = {"arch": tuple(FAMILIES), "norm": choices(Norm),
                                       "norm_type": choices(NormType), "activation": choices(Activation),
                                       "positional": choices(Positional), "pooling": choices(Pooling),
                                       "init": choices(Init), "attention": choices(AttentionKind)}

# The defaults of each family for the fields that default to None (the registry's entries hold them).
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {name: entry.defaults for name, entry in FAMILIES.items()}
# How each way to pool reads a text (or an image), for the message that refuses one a family lacks.
POOLING_WORDS = {"mean": "the mean of its real tokens", "max": "each feature's largest value over its real tokens",
                 "cls": "its first token ([CLS], or a class token)", "pooler": "BERT's pooler on its first token",
                 "last": "its last real token"}
# The vocabulary fields of a family that reads pixels (a ViT): fixed, so its config.json never suggests a vocabulary.
VIT_NO_VOCAB = dict(vocab_size=1, pad_id=0)


@dataclass
class ModelConfig:
    """Hyper-parameters of a Transformer. Defaults are the paper's base model (Table 3)."""

    arch: str = "seq2seq"  # a family of the registry (families.py)
    vocab_size: int = 37000
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 2048
    max_len: int = 512
    dropout: float = 0.1
    # seq2seq only: depths of the two stacks (None = n_layers), a target vocabulary (None = shared, as in the paper)
    n_encoder_layers: int | None = None
    n_decoder_layers: int | None = None
    tgt_vocab_size: int | None = None
    # Architecture choices; None = the family default (FAMILY_DEFAULTS).
    norm: Norm | None = None
    activation: Activation | None = None
    positional: Positional | None = None
    scale_embeddings: bool | None = None
    tie_embeddings: bool | None = None
    bias: bool = True
    # Changes made since 2017, each off by default (the paper's model); see "What changed since 2017":
    norm_type: NormType = "layernorm"  # rmsnorm: x / RMS(x) * g, no centring and no bias (nn/norms.py)
    # normalise each head's queries and keys over D before their dot product, with the model's norm_type: a LayerNorm
    # with gain and bias by default (as Dehghani et al. 2023), RMSNorm with norm_type="rmsnorm" (the NanoGPT speedrun)
    qk_norm: bool = False
    init: Init = "default"  # zero_out: the projections that write into the residual stream start at zero
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    embedding_norm: bool = False  # LayerNorm right after the embeddings (BERT); not in the paper
    rope_base: float = 10000.0
    # Llama 3's rotary scaling as its config.json writes it: {"rope_type": "llama3", "factor": 8.0, ...}
    rope_scaling: dict[str, Any] | None = None
    # grouped-query attention (Ainslie et al. 2023): n_heads query heads share n_kv_heads heads of keys and values
    # (1 = multi-query); the KV cache shrinks by n_heads / n_kv_heads. None = n_heads (the paper)
    n_kv_heads: int | None = None
    # D, the size of one head; None = d_model // n_heads (the paper). Qwen3 sets it apart (1,024 / 16 heads, D 128)
    head_size: int | None = None
    pad_id: int = 0
    # > 0: encoder self-attention to tokens at most this far away (Longformer's local attention). 0 = to every token
    attention_window: int = 0
    # "softmax" (the paper) or "linear": softmax(q . k) replaced by phi(q) . phi(k) with phi(x) = elu(x) + 1, in
    # every attention of the model (encoder, decoder self- and cross-attention); no new parameters. Causal
    # linear attention decodes with a fixed-size recurrent state instead of a KV cache (nn/linear_attention.py)
    attention: AttentionKind = "softmax"
    # classifiers: the classes, and how the stack's states make one vector (the family's own way where it has one:
    # a ViT's class token "cls", a GPT classifier's last real token "last")
    n_classes: int = 2
    pooling: Pooling = "mean"
    # vit only: square images of image_size^2 pixels, `channels` channels (3 RGB, 1 grey), patches of patch_size^2
    image_size: int = 32
    patch_size: int = 4
    channels: int = 3
    # a mixture of experts (nn/experts.py; Qwen3-MoE) in each decoder layer not in dense_layers: a router sends each
    # token to experts_top_k of n_experts feed-forwards of width expert_d_ff (None = d_ff), their weights renormalised
    # over the k with experts_norm_topk; router_aux_coef x the load-balancing loss joins the training loss. 0 = dense
    n_experts: int = 0
    experts_top_k: int = 2
    expert_d_ff: int | None = None
    dense_layers: list[int] = dataclasses.field(default_factory=list)
    experts_norm_topk: bool = True
    router_aux_coef: float = 0.001
    # Gemma's and Mistral's changes (nn/sliding_window.py, nn/norms.py), each off by default. The causal self-attention
    # of the layers in sliding_layers (None: every layer) sees only the last sliding_window positions, itself included
    # (0: every earlier one), and rotates by local_rope_base (None: rope_base); the other layers are global
    sliding_window: int = 0
    sliding_layers: list[int] | None = None
    local_rope_base: float | None = None
    attention_scale: float | None = None  # what the scores q . k are multiplied by (None: 1 / sqrt(D), the paper's)
    attention_softcap: float = 0.0  # > 0: each score s becomes c tanh(s / c) (Gemma 2); logit_softcap: the logits
    logit_softcap: float = 0.0
    norm_plus_one: bool = False  # RMSNorm's gain is 1 + w, w starting at 0 (Gemma)
    sandwich_norm: bool = False  # pre-norm and a norm on each sub-layer's output too, before the sum (Gemma 2, 3)

    def __post_init__(self) -> None:
        self.arch = saved_family({"arch": self.arch, "pooling": self.pooling}) or self.arch  # an older form
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if name != "arch" and value is None:
                continue
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        entry = family(self.arch)
        for name, value in entry.defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if entry.reads_pixels:
            check_pixels(self, VIT_NO_VOCAB)
        if entry.two_stacks:
            self.n_encoder_layers = self.n_layers if self.n_encoder_layers is None else self.n_encoder_layers
            self.n_decoder_layers = self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers
        for name in ("n_encoder_layers", "n_decoder_layers", "tgt_vocab_size"):
            if getattr(self, name) is not None and not entry.two_stacks:
                raise ConfigError(f"{name} applies to an encoder-decoder only, not arch={self.arch!r}")
        self._pooling(entry)
        self._validate(entry)
        self._heads(entry)
        check_experts(self, entry.decoder_only)
        check_windows(self, entry.decoder_only)

    def _pooling(self, entry: Family) -> None:
        """``pooling`` checked against the family's ways to pool; the field's default ("mean") becomes the family's
        own (a ViT's class token, a GPT classifier's last real token). A family that does not pool leaves it."""
        if self.pooling == "mean" and entry.poolings and "mean" not in entry.poolings:  # "mean": set or not, unknown
            self.pooling = entry.poolings[0]
        if self.pooling != "mean" and self.pooling not in entry.poolings:
            ways = " or ".join(f"{POOLING_WORDS[p]} (pooling={p!r})" for p in entry.poolings)
            raise ConfigError(f"pooling={self.pooling!r} does not fit arch={self.arch!r}: "
                              + (f"it classifies from {ways}" if ways else "it does not classify"))

    def _validate(self, entry: Family) -> None:
        ints = ["vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "n_classes", "pad_id",
                "attention_window"]
        ints += [n for n in ("n_encoder_layers", "n_decoder_layers", "tgt_vocab_size") if getattr(self, n) is not None]
        for name in ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name}={value!r} must be an integer")
        for name in ("norm", "norm_type", "activation", "positional", "init", "attention"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a string")
        for name in ("bias", "embedding_norm", "scale_embeddings", "tie_embeddings", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false")
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len", "tgt_vocab_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("n_layers", "n_encoder_layers", "n_decoder_layers", "attention_window"):
            if (getattr(self, name) or 0) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
        if self.attention_window and not entry.self_attending_encoder:
            raise ConfigError(f"attention_window applies to an encoder's self-attention; arch={self.arch!r} has no "
                              "encoder")
        if self.attention == "linear" and self.attention_window:
            raise ConfigError(f"attention_window={self.attention_window} needs attention='softmax': linear attention "
                              "sums over every earlier key and has no window")
        if self.attention == "linear" and self.attention_dropout:
            raise ConfigError(f"attention_dropout={self.attention_dropout} needs attention='softmax': linear attention "
                              "never forms the attention weights it would drop")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"positional='sinusoidal' needs an even d_model, got d_model={self.d_model}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"{name}={value!r} must be a number in [0, 1)")
        if not self.layer_norm_eps > 0:
            raise ConfigError(f"layer_norm_eps={self.layer_norm_eps} must be > 0")
        if not 0 <= self.pad_id < min(self.vocab_size, self.tgt_vocab_size or self.vocab_size):
            raise ConfigError(f"pad_id={self.pad_id} is outside the vocabulary (vocab_size={self.vocab_size})")
        if entry.classifies and self.n_classes < 1:
            raise ConfigError(f"n_classes={self.n_classes} must be >= 1")

    def _heads(self, entry: Family) -> None:
        """The head fields: sizes that divide, grouped-query attention that fits, rotary settings that apply."""
        for name in ("n_kv_heads", "head_size"):
            if getattr(self, name) is not None and (type(getattr(self, name)) is not int or getattr(self, name) < 1):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be an integer >= 1 (or left out)")
        if self.head_size is None and self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_heads % self.kv_heads:
            raise ConfigError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}: each group "
                              "of queries shares one head of keys and values")
        if self.kv_heads != self.n_heads and (self.attention == "linear" or not entry.decoder_only):
            raise ConfigError(f"n_kv_heads={self.n_kv_heads} needs a decoder-only family (arch='gpt') and "
                              "attention='softmax' (grouped keys and values are written for those), not "
                              f"{self.arch!r} and {self.attention!r}")
        if self.positional == "rotary" and self.head_dim % 2:
            raise ConfigError(f"positional='rotary' needs an even head size, but the head size is {self.head_dim} "
                              f"(d_model={self.d_model} / n_heads={self.n_heads}, or head_size)")
        if self.rope_scaling is not None:
            check_rope_scaling(self.rope_scaling, self.positional)

    # ----------------------------------------------------------------- derived values
    @property
    def head_dim(self) -> int:
        """D, one head's size: ``head_size``, or ``d_model // n_heads`` when it is left out (the paper)."""
        return self.head_size if self.head_size is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """The heads of keys and values: ``n_kv_heads``, or ``n_heads`` when it is left out."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def n_patches(self) -> int:
        """A ViT's patches per image: (image_size / patch_size)^2."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def target_vocab_size(self) -> int:
        """Size of the output vocabulary (the target one for seq2seq)."""
        return self.tgt_vocab_size if self.tgt_vocab_size is not None else self.vocab_size

    @property
    def shared_vocab(self) -> bool:
        return self.tgt_vocab_size is None

    # ----------------------------------------------------------------- (de)serialization
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown model config key(s): {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        return cls.from_dict(json.loads(text))

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (validated again)."""
        return self.from_dict({**self.to_dict(), **changes})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """A named configuration from ``PRESETS``, with optional field overrides."""
        if name not in PRESETS:
            raise ConfigError(f"unknown model preset {name!r}; choose from {', '.join(sorted(PRESETS))}")
        return cls.from_dict({**PRESETS[name], **overrides})
