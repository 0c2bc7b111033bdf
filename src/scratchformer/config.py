"""Typed model configuration: one dataclass for all three Transformer families.

``ModelConfig`` describes *what* network to build. ``arch`` picks the family:

- ``"seq2seq"``  encoder-decoder (the paper, §3.1): translation and other sequence-to-sequence tasks;
- ``"gpt"``      decoder-only language model (masked self-attention, no cross-attention);
- ``"encoder"``  encoder-only classifier (BERT-like).

Architecture choices are single fields with a small set of named values. Fields left as ``None`` take
the family's default in ``__post_init__`` (see ``FAMILY_DEFAULTS``): the paper's choices for
``seq2seq`` and ``encoder`` (post-LN, ReLU, sinusoidal positions, embeddings x sqrt(d_model)), GPT-2's
for ``gpt`` (pre-LN, GELU, learned positions, no embedding scaling). After construction every field
holds a concrete value, so the JSON written with a checkpoint is complete.

Impossible configurations raise ``ConfigError`` (a ``ValueError``) with a message naming the fields.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass, fields
from typing import Any, Literal

Arch = Literal["seq2seq", "gpt", "encoder"]
Norm = Literal["post", "pre"]
Activation = Literal["relu", "gelu", "gelu_tanh", "swiglu"]
Positional = Literal["sinusoidal", "learned", "rotary", "none"]
Pooling = Literal["mean", "max", "cls", "pooler"]

CHOICES: dict[str, tuple[str, ...]] = {
    "arch": ("seq2seq", "gpt", "encoder"),
    "norm": ("post", "pre"),
    "activation": ("relu", "gelu", "gelu_tanh", "swiglu"),
    "positional": ("sinusoidal", "learned", "rotary", "none"),
    "pooling": ("mean", "max", "cls", "pooler"),
}

# The defaults of each family for the fields that default to None.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    # "Attention Is All You Need": post-LN, ReLU, sinusoidal, shared + scaled embeddings.
    "seq2seq": dict(norm="post", activation="relu", positional="sinusoidal",
                    scale_embeddings=True, tie_embeddings=True),
    # GPT-2: pre-LN with a final LayerNorm, GELU, learned positions, tied unscaled embeddings.
    "gpt": dict(norm="pre", activation="gelu", positional="learned",
                scale_embeddings=False, tie_embeddings=True),
    # The paper's encoder stack with a classification head.
    "encoder": dict(norm="post", activation="relu", positional="sinusoidal",
                    scale_embeddings=True, tie_embeddings=False),
}


class ConfigError(ValueError):
    """A configuration that cannot describe a working model."""


@dataclass
class ModelConfig:
    """Hyper-parameters of a Transformer. Defaults are the paper's base model (Table 3)."""

    arch: Arch = "seq2seq"
    vocab_size: int = 37000
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 2048
    max_len: int = 512
    dropout: float = 0.1
    # seq2seq only: depths of the two stacks (None = n_layers) and a separate target vocabulary
    # (None = one vocabulary shared by source and target, as in the paper).
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
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    embedding_norm: bool = False  # LayerNorm right after the embeddings (BERT); not in the paper
    rope_base: float = 10000.0
    pad_id: int = 0
    # > 0: in the encoder's self-attention, each token attends only to tokens at most this many positions
    # away (a sliding window, as Longformer's local attention); not in the paper. 0 = to every token
    attention_window: int = 0
    # encoder (classifier) only
    n_classes: int = 2
    pooling: Pooling = "mean"

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if name != "arch" and value is None:
                continue
            if value not in allowed:
                raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        for name, value in FAMILY_DEFAULTS[self.arch].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.arch == "seq2seq":
            self.n_encoder_layers = self.n_layers if self.n_encoder_layers is None else self.n_encoder_layers
            self.n_decoder_layers = self.n_layers if self.n_decoder_layers is None else self.n_decoder_layers
        else:
            for name in ("n_encoder_layers", "n_decoder_layers", "tgt_vocab_size"):
                if getattr(self, name) is not None:
                    raise ConfigError(f"{name} applies to arch='seq2seq' only, not arch={self.arch!r}")
        self._validate()

    def _validate(self) -> None:
        ints = ["vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len", "n_classes", "pad_id",
                "attention_window"]
        ints += [n for n in ("n_encoder_layers", "n_decoder_layers", "tgt_vocab_size") if getattr(self, n) is not None]
        for name in ints:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"{name}={value!r} must be an integer")
        for name in ("norm", "activation", "positional"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be a string")
        for name in ("bias", "embedding_norm", "scale_embeddings", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r} must be true or false")
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("n_layers", "n_encoder_layers", "n_decoder_layers", "attention_window"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name}={value} must be >= 0")
        if self.attention_window and self.arch == "gpt":
            raise ConfigError("attention_window applies to an encoder's self-attention; arch='gpt' has no encoder")
        if self.tgt_vocab_size is not None and self.tgt_vocab_size < 1:
            raise ConfigError(f"tgt_vocab_size={self.tgt_vocab_size} must be >= 1")
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "rotary" and self.head_dim % 2:
            raise ConfigError(
                f"positional='rotary' needs an even head size, but d_model={self.d_model} / "
                f"n_heads={self.n_heads} = {self.head_dim}")
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
        if self.arch == "encoder" and self.n_classes < 1:
            raise ConfigError(f"n_classes={self.n_classes} must be >= 1")

    # ----------------------------------------------------------------- derived values
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

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


# Named configurations. The two paper models use a 37,000-token shared BPE vocabulary (§5.1).
PRESETS: dict[str, dict[str, Any]] = {
    # Table 3, "base": 65M parameters in the paper.
    "paper-base": dict(arch="seq2seq", vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                       dropout=0.1),
    # Table 3, "big": 213M parameters in the paper.
    "paper-big": dict(arch="seq2seq", vocab_size=37000, d_model=1024, n_heads=16, n_layers=6, d_ff=4096,
                      dropout=0.3),
    # GPT-2 small (124M): the architecture Hugging Face's GPT2LMHeadModel implements.
    "gpt2-small": dict(arch="gpt", vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072,
                       max_len=1024, dropout=0.1, activation="gelu_tanh"),
    # nanoGPT's CPU Tiny Shakespeare model (block 64, 4 layers, 4 heads, d 128).
    "gpt-char-small": dict(arch="gpt", vocab_size=65, d_model=128, n_heads=4, n_layers=4, d_ff=512,
                           max_len=64, dropout=0.0),
    # A small sentence classifier.
    "encoder-small": dict(arch="encoder", vocab_size=8000, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                          max_len=128, dropout=0.1),
}


def count_parameters_formula(cfg: ModelConfig) -> int:
    """The number of trainable parameters of the model ``cfg`` builds, derived on paper.

    Notation: C = d_model, F = d_ff, V = vocabulary, L = layers, b = 1 if biases else 0.

    - attention block: Q, K, V, O projections  ->  4 (C^2 + b C)
    - feed-forward:  relu/gelu: C F + b F + F C + b C;   swiglu adds a gate: + C F + b F
    - LayerNorm:  C weights + b C biases
    - encoder layer = attention + FFN + 2 LayerNorms; decoder layer = 2 attention + FFN + 3 LayerNorms;
      a decoder-only (GPT) layer has no cross-attention: attention + FFN + 2 LayerNorms
    - pre-LN adds one final LayerNorm per stack; ``embedding_norm`` one LayerNorm after the embeddings
    - embeddings: V C per table (tables shared when tied); learned positions: max_len C;
      sinusoidal and rotary positions have no parameters
    - output projection: V C with no bias, unless tied to the target embedding (then 0)
    - classifier head: C n_classes + n_classes; ``pooling="pooler"`` adds BERT's pooler: C^2 + b C
    """
    c, f, b = cfg.d_model, cfg.d_ff, int(cfg.bias)
    attn = 4 * (c * c + b * c)
    ffn = 2 * c * f + b * (f + c) + (c * f + b * f if cfg.activation == "swiglu" else 0)
    ln = c + b * c
    final_ln = ln if cfg.norm == "pre" else 0
    positions = cfg.max_len * c if cfg.positional == "learned" else 0
    emb_ln = ln if cfg.embedding_norm else 0

    if cfg.arch == "gpt":
        layers = cfg.n_layers * (attn + ffn + 2 * ln) + final_ln
        head = 0 if cfg.tie_embeddings else cfg.vocab_size * c
        return cfg.vocab_size * c + positions + emb_ln + layers + head
    if cfg.arch == "encoder":
        layers = cfg.n_layers * (attn + ffn + 2 * ln) + final_ln
        pooler = c * c + b * c if cfg.pooling == "pooler" else 0
        return cfg.vocab_size * c + positions + emb_ln + layers + pooler + c * cfg.n_classes + cfg.n_classes

    assert cfg.n_encoder_layers is not None and cfg.n_decoder_layers is not None
    encoder = cfg.n_encoder_layers * (attn + ffn + 2 * ln) + final_ln
    decoder = cfg.n_decoder_layers * (2 * attn + ffn + 3 * ln) + final_ln
    src_v, tgt_v = cfg.vocab_size, cfg.target_vocab_size
    if cfg.shared_vocab and cfg.tie_embeddings:
        embeddings = src_v * c  # one matrix for source, target and output (§3.4)
    elif cfg.tie_embeddings:
        embeddings = src_v * c + tgt_v * c  # target embedding doubles as the output projection
    else:
        embeddings = src_v * c + 2 * tgt_v * c
    # each stack has its own learned positions and its own embedding LayerNorm
    return embeddings + 2 * (positions + emb_ln) + encoder + decoder


# ====================================================================================== training

Task = Literal["copy", "reverse", "sort", "lm", "translate", "classify", "mlm"]
TASK_ARCH: dict[str, str] = {"copy": "seq2seq", "reverse": "seq2seq", "sort": "seq2seq", "translate": "seq2seq",
                             "lm": "gpt", "classify": "encoder", "mlm": "encoder"}
# What each task's evaluation reports besides loss and perplexity (exact_match, bleu: with eval_decode > 0).
TASK_METRICS: dict[str, tuple[str, ...]] = {"copy": ("exact_match",), "reverse": ("exact_match",),
                                            "sort": ("exact_match",), "translate": ("bleu",), "lm": (),
                                            "classify": ("accuracy", "f1"), "mlm": ("accuracy",)}
LOWER_IS_BETTER = ("loss", "perplexity")
TRAIN_CHOICES: dict[str, tuple[str, ...]] = {
    "task": tuple(TASK_ARCH),
    "tokenizer": ("char", "bpe"),
    "schedule": ("inverse_sqrt", "cosine", "constant"),
    "truncate": ("warn", "error"),
    "device": ("auto", "cpu", "cuda"),
}


@dataclass
class TrainConfig:
    """Everything about a training run that is not the network: task, data, optimisation, bookkeeping.

    ``batch_size`` is the *global* batch (sequences per optimizer step), whatever ``grad_accum`` and the
    number of processes: each micro-batch / rank takes its share, so the run computes the same thing.
    """

    task: Task = "copy"
    dataset: str | None = None  # a named dataset: tinyshakespeare | multi30k | sst2
    data_dir: str | None = None
    # tokenization
    tokenizer: Literal["char", "bpe"] = "char"
    bpe_vocab_size: int = 8000
    lowercase: bool = False
    # fine-tuning (task=classify): start from a pretrained BERT encoder, e.g. "all-MiniLM-L6-v2", or a
    # folder with config.json + model.safetensors + tokenizer.json, or a scratchformer run or checkpoint
    # directory (a task=mlm run, say); its architecture and tokenizer are used
    init_from: str | None = None
    # masked-token pretraining (task=mlm): the fraction of tokens chosen for prediction (BERT: 0.15)
    mask_prob: float = 0.15
    # built-in synthetic tasks (copy, reverse, sort)
    n_symbols: int = 10
    min_seq_len: int = 4
    max_seq_len: int = 16
    n_test: int = 1000
    train_limit: int = 0  # use only the first N training examples (characters of text for lm); 0 = all
    eval_limit: int = 0  # evaluate on only the first N examples of each held-out split; 0 = all
    # sequences longer than the model's max_len: "warn" = truncate and say how many, "error" = refuse
    truncate: Literal["warn", "error"] = "warn"
    # the share of the training rows (or, for lm, of the text) held out for validation when no
    # validation file is given: a seeded random sample of rows (stratified by label for classify), or for
    # language modelling the last part of the text
    val_fraction: float = 0.1
    # optimisation. The run ends at max_steps, or when max_time (e.g. "90s", "10m", "1.5h") has passed;
    # max_steps = 0 with max_time: the number of steps is estimated from the first steps' speed
    max_steps: int = 1000
    max_time: str | None = None
    batch_size: int = 64
    max_tokens: int = 0  # > 0: seq2seq/classify batches hold at most this many padded tokens instead
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr: float = 0.0
    schedule: Literal["inverse_sqrt", "cosine", "constant"] = "cosine"
    warmup_steps: int = 100
    warmup_fraction: float | None = None  # warm-up as a share of max_steps (replaces warmup_steps when set)
    # cosine: the learning rate stays at lr after the warm-up until the last decay_fraction of the run, then
    # decays to min_lr along a half cosine (1.0: decay right after the warm-up)
    decay_fraction: float = 1.0
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.0
    word_dropout: float = 0.0  # classify: drop each input token of a training example with this probability
    grad_clip: float = 1.0  # max global gradient norm; 0 = off
    # > 0: evaluate and save a moving average of the weights over about 1 / (1 - ema_decay) steps (0.999,
    # say) instead of the last weights (Polyak averaging; see train/averaging.py); 0 = off
    ema_decay: float = 0.0
    # bookkeeping
    seed: int = 0
    eval_every: int = 200
    eval_batches: int = 20  # language modelling: batches per evaluation
    eval_decode: int = 200  # seq2seq: sentences decoded per evaluation (exact match / BLEU); 0 = none
    save_every: int = 0  # 0 = at every evaluation
    log_every: int = 50
    patience: int = 0  # early stopping: evaluations without a better validation metric; 0 = off
    # the validation metric that picks best/ and drives early stopping: loss or perplexity (lower is
    # better), or one the task reports (higher is better): accuracy, f1, exact_match, bleu
    select_by: str = "loss"
    # at the end, measure the kept checkpoint on the task's test split, if it has one; false keeps the test
    # split unseen while tuning (`scratchformer evaluate --ckpt RUN` measures it once you have chosen)
    test_at_end: bool = True
    bf16: bool = False
    compile: bool = False
    device: Literal["auto", "cpu", "cuda"] = "auto"
    num_threads: int = 0  # 0 = torch's default

    def __post_init__(self) -> None:
        for name, allowed in TRAIN_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not one of {', '.join(allowed)}")
        positive = ["batch_size", "grad_accum", "eval_every", "log_every", "n_symbols", "min_seq_len",
                    "max_seq_len", "n_test", "bpe_vocab_size"]
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        for name in ("max_steps", "max_tokens", "warmup_steps", "save_every", "patience", "eval_decode", "num_threads",
                     "eval_batches", "train_limit", "eval_limit"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 0")
        if self.max_time is not None:
            self.max_time_s  # noqa: B018 - parses, or raises ConfigError
        if self.max_steps == 0 and self.max_time is None:
            raise ConfigError("max_steps=0 needs max_time (the run's length is then its time budget)")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"val_fraction={self.val_fraction} must be between 0 and 1")
        if self.warmup_fraction is not None and not 0 <= self.warmup_fraction < 1:
            raise ConfigError(f"warmup_fraction={self.warmup_fraction} must be in [0, 1)")
        if not 0 < self.decay_fraction <= 1:
            raise ConfigError(f"decay_fraction={self.decay_fraction} must be in (0, 1]")
        if not self.lr > 0:
            raise ConfigError(f"lr={self.lr} must be > 0")
        if not 0 <= self.min_lr <= self.lr:
            raise ConfigError(f"min_lr={self.min_lr} must be between 0 and lr={self.lr}")
        if not 0 < self.mask_prob < 1:
            raise ConfigError(f"mask_prob={self.mask_prob} must be between 0 and 1")
        if not 0 <= self.word_dropout < 1:
            raise ConfigError(f"word_dropout={self.word_dropout} must be in [0, 1)")
        if self.word_dropout and self.task != "classify":
            raise ConfigError(f"word_dropout works with task=classify, not task={self.task}")
        metrics = LOWER_IS_BETTER + TASK_METRICS[self.task]
        if self.select_by not in metrics:
            raise ConfigError(f"select_by={self.select_by!r} is not a validation metric of task={self.task} "
                              f"(choose from {', '.join(metrics)})")
        if self.select_by in ("exact_match", "bleu") and not self.eval_decode:
            raise ConfigError(f"select_by={self.select_by} needs eval_decode > 0 (sentences decoded per evaluation)")
        if not 0 <= self.ema_decay < 1:
            raise ConfigError(f"ema_decay={self.ema_decay} must be in [0, 1)")
        if not 0 <= self.label_smoothing < 1:
            raise ConfigError(f"label_smoothing={self.label_smoothing} must be in [0, 1)")
        if self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size={self.batch_size} is not divisible by grad_accum={self.grad_accum}")
        if self.min_seq_len > self.max_seq_len:
            raise ConfigError(f"min_seq_len={self.min_seq_len} is larger than max_seq_len={self.max_seq_len}")
        if self.init_from is not None and self.task != "classify":
            raise ConfigError(f"init_from works with task=classify (a pretrained BERT encoder), not task={self.task}")
        if self.n_symbols > 36:
            raise ConfigError(f"n_symbols={self.n_symbols} must be <= 36")

    @property
    def arch(self) -> str:
        return TASK_ARCH[self.task]

    @property
    def max_time_s(self) -> float | None:
        """``max_time`` in seconds (None: no time budget)."""
        return None if self.max_time is None else parse_duration("max_time", self.max_time)


def parse_duration(name: str, text: str) -> float:
    """``"90"``, ``"90s"``, ``"10m"``, ``"1.5h"``, ``"1h30m"`` -> seconds."""
    import re

    parts = re.fullmatch(r"\s*(?:(\d+(?:\.\d*)?)h)?\s*(?:(\d+(?:\.\d*)?)m)?\s*(?:(\d+(?:\.\d*)?)s?)?\s*", str(text))
    if not str(text).strip() or parts is None or not any(parts.groups()):
        raise ConfigError(f"{name}={text!r} is not a duration (e.g. 90s, 10m, 1.5h, 1h30m)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in parts.groups())
    total = 3600 * hours + 60 * minutes + seconds
    if total <= 0:
        raise ConfigError(f"{name}={text!r} must be a positive duration")
    return total


def field_types(cls: type) -> dict[str, Any]:
    """The declared type of each field of a config dataclass."""
    import typing

    return typing.get_type_hints(cls)


def coerce(name: str, value: Any, annotation: Any) -> Any:
    """Check (and, for strings from the command line, convert) ``value`` against a field's type."""
    import types
    import typing

    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        # "none" means "unset" unless it is one of the field's own choices (positional="none")
        own_choice = typing.get_origin(inner[0]) is Literal and value in typing.get_args(inner[0])
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null") and not own_choice):
            if type(None) in args:
                return None
        return coerce(name, value, inner[0])
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(str, args))}")
        return value
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(f"{name}={value!r} must be true or false")
    if annotation in (int, float):
        kind = "an integer" if annotation is int else "a number"
        numeric = (int,) if annotation is int else (int, float)
        if isinstance(value, numeric) and not isinstance(value, bool):
            return annotation(value)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # a string that does not parse falls through to the error
                return annotation(value)
        raise ConfigError(f"{name}={value!r} must be {kind}")
    if annotation is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name}={value!r} must be a string")
    return value
