"""The family registry: everything the code asks about a model family, one entry per family, in one place.

A family is a kind of network: what it reads, the stacks of blocks it runs, and what it outputs. Its entry says
that, the class in ``models/`` that builds it, the config defaults it starts from, its parts by role (where a
tool finds its blocks, final norm and head), how it starts its weights, which exports it has and which Hugging
Face layouts its weights are read from and written to. ``ModelConfig.arch`` names the family.

    family          class               reads   stacks            output       exports (export --format)
    seq2seq         Seq2SeqTransformer  tokens  encoder, decoder  translation  onnx, onnx-single, torchscript
    gpt             GPT                 tokens  decoder           next-token   onnx, onnx-single, torchscript, hf, gguf
    encoder         EncoderClassifier   tokens  encoder           classes      onnx-single, torchscript, hf
    gpt-classifier  GPTClassifier       tokens  decoder           classes      onnx-single, torchscript
    vit             ViT                 pixels  encoder           classes      -

The logit lens reads every family: each layer's next token (a GPT's; an encoder-decoder's decoder's) or class
probabilities (a classifier's), through the parts the entry names and the model's own output layer.

A decoder is causal; it has cross-attention when an encoder runs before it. Masked-token pretraining (``task=mlm``)
is not a family: it trains an ``encoder`` through its masked-token path (``EncoderClassifier.predict_tokens``), the
same model and weights, its classification head left untrained (the task registry's ``pretrains``).

Adding a family is its model file in ``models/`` (a class that takes a ``ModelConfig``, imported in
``models/__init__.py``) and one entry here naming that class (``model``); the code asks the entry (``family(arch)``,
``parts(model)``) and its properties (``reads_pixels``, ``generates``, ``classifies``, ...) instead of comparing
names or fields as strings, and the tests of frozen
layers, LoRA, the lens and the exports iterate ``FAMILIES``. Only this module and the task registry compare a
family's name (``tests/test_code_shape.py``). Like the task registry, it imports nothing above it: classes are
named here and imported where models are built (``models.MODEL_CLASSES``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scratchformer.errors import ConfigError

__all__ = ["FAMILIES", "GPT2_DEFAULTS", "PAPER_DEFAULTS", "Family", "Parts", "check_built", "family", "family_names",
           "parts", "saved_family"]


@dataclass(frozen=True)
class Parts:
    """Where a model of the family keeps each part, as attribute paths (``model.get_submodule``)."""

    embeddings: str  # what the blocks below read first: the token (or patch) embeddings of that stack
    blocks: str  # the blocks in order (the last stack's: a decoder's, after the encoder): the lens reads their states
    final_norm: str  # the norm after the blocks (pre-LN); a post-LN model has none
    head: tuple[str, ...]  # the output layer: the first of these the model has (a tied one is the token embedding)
    pooler: str = ""  # BERT's pooler before the head, where the model has one
    earlier_blocks: tuple[str, ...] = ()  # the blocks of the stacks before ``blocks`` (an encoder-decoder's encoder)


@dataclass(frozen=True)
class Family:
    """One family: see the module docstring."""

    name: str  # the value of ModelConfig.arch
    title: str  # a model of it, in a sentence ("this checkpoint holds a language model (GPT)")
    structure: str  # what the network is, for the first line a run prints ("a decoder-only GPT")
    model: str  # the name of its class in models/ (models.MODEL_CLASSES maps each family to the class itself)
    reads: str  # "tokens" (ids from a tokenizer) or "pixels" (images: image_size, patch_size, channels)
    stacks: tuple[str, ...]  # "encoder" (bidirectional), "decoder" (causal; cross-attention after an encoder)
    output: str  # "next-token" (logits over the vocabulary at every position), "translation", "classes"
    defaults: dict[str, Any]  # the ModelConfig fields that default to None
    parts: Parts
    poolings: tuple[str, ...] = ()  # a classifier's ways to pool (the first: its default); () for none
    init: str = "xavier"  # "xavier": the paper's families (torch.nn.Transformer); "normal": GPT-2's N(0, 0.02)
    zero_head: bool = False  # the classification head starts at zero (the ViT paper's fine-tuning head)
    head_bias: bool = True  # a classification head with a bias (GPT-2's ``score`` has none)
    exports: tuple[str, ...] = ()  # export --format values it takes
    hf_plans: tuple[str, ...] = ()  # the Hugging Face model types its weights are read from and written to
    paper: str = ""  # the model of paper.py it equals (interop/paper.py), where there is one
    classifier: str = ""  # the family that classifies with this one's body (``arch=gpt`` on a task of classes)
    saved_as: dict[str, Any] = field(default_factory=dict)  # how older runs wrote it ({"arch": "gpt", ...})

    @property
    def decoder_only(self) -> bool:
        """A causal decoder without an encoder: it reads prompts, batched with padding on the left."""
        return self.stacks == ("decoder",)

    @property
    def two_stacks(self) -> bool:
        """An encoder and a decoder, each with its own depth (``n_encoder_layers``, ``n_decoder_layers``)."""
        return len(self.stacks) == 2

    @property
    def self_attending_encoder(self) -> bool:
        """Whether it has an encoder's (bidirectional) self-attention, which ``attention_window`` limits."""
        return "encoder" in self.stacks

    @property
    def reads_pixels(self) -> bool:
        """It reads images (``image_size``, ``patch_size``, ``channels``), not ids from a tokenizer."""
        return self.reads == "pixels"

    @property
    def reads_tokens(self) -> bool:
        """It reads ids from a tokenizer (it has a vocabulary, and a checkpoint of it a tokenizer)."""
        return self.reads == "tokens"

    @property
    def classifies(self) -> bool:
        return self.output == "classes"

    @property
    def classifies_text(self) -> bool:
        return self.classifies and self.reads_tokens

    @property
    def classifies_images(self) -> bool:
        return self.classifies and self.reads_pixels

    @property
    def generates(self) -> bool:
        """A language model: it continues a text (next-token logits at every position)."""
        return self.output == "next-token"

    @property
    def translates(self) -> bool:
        """An encoder-decoder: it writes a target for a source (``translate``, beam search)."""
        return self.output == "translation"

    @property
    def predicts_tokens(self) -> bool:
        """Its output is logits over a vocabulary at every position (a language model's, or a decoder's)."""
        return self.generates or self.translates

    @property
    def lens(self) -> str:
        """How the logit lens reads each layer (``models/lens.py``): ``tokens`` (the next token's distribution) or
        ``classes`` (the class probabilities, through the pooling and head)."""
        return "tokens" if self.predicts_tokens else "classes"


# The defaults of the paper's families (post-LN, ReLU, sinusoidal positions, embeddings x sqrt(C)) and of GPT-2's
# (pre-LN with a final LayerNorm, GELU, learned positions, tied unscaled embeddings)
PAPER_DEFAULTS = dict(norm="post", activation="relu", positional="sinusoidal", scale_embeddings=True)
GPT2_DEFAULTS = dict(norm="pre", activation="gelu", positional="learned", scale_embeddings=False, tie_embeddings=True)

FAMILIES: dict[str, Family] = {f.name: f for f in (
    # "Attention Is All You Need": one vocabulary, its matrix shared by both embeddings and the output layer
    Family(name="seq2seq", title="an encoder-decoder", structure="an encoder-decoder", model="Seq2SeqTransformer",
           reads="tokens", stacks=("encoder", "decoder"), output="translation",
           defaults=dict(PAPER_DEFAULTS, tie_embeddings=True),
           parts=Parts(embeddings="tgt_embed", blocks="decoder.layers", final_norm="decoder.norm",
                       head=("lm_head", "tgt_embed.token"), earlier_blocks=("encoder.layers",)),
           exports=("onnx", "onnx-single", "torchscript"), paper="make_model"),
    Family(name="gpt", title="a language model (GPT)", structure="a decoder-only GPT", model="GPT",
           reads="tokens", stacks=("decoder",), output="next-token", defaults=GPT2_DEFAULTS,
           parts=Parts(embeddings="embed", blocks="decoder.layers", final_norm="decoder.norm",
                       head=("lm_head", "embed.token")),
           init="normal", exports=("onnx", "onnx-single", "torchscript", "hf", "gguf"),
           hf_plans=("gpt2", "llama", "qwen3", "qwen3_moe", "mistral", "gemma3_text"), paper="GPT",
           classifier="gpt-classifier"),
    # the paper's encoder stack with a classification head (BERT's pooler optional)
    Family(name="encoder", title="a classifier", structure="an encoder", model="EncoderClassifier",
           reads="tokens", stacks=("encoder",), output="classes", defaults=dict(PAPER_DEFAULTS, tie_embeddings=False),
           parts=Parts(embeddings="embed", blocks="encoder.layers", final_norm="encoder.norm", head=("head",),
                       pooler="pooler"),
           poolings=("mean", "max", "cls", "pooler"), exports=("onnx-single", "torchscript", "hf"),
           hf_plans=("bert",), paper="Classifier"),
    # a GPT's body under a head that reads each text's last real token (GPT-2's GPT2ForSequenceClassification)
    Family(name="gpt-classifier", title="a classifier (a GPT reading its last real token)",
           structure="a decoder-only GPT reading its last real token", model="GPTClassifier",
           reads="tokens", stacks=("decoder",), output="classes", defaults=GPT2_DEFAULTS,
           parts=Parts(embeddings="embed", blocks="decoder.layers", final_norm="decoder.norm", head=("head",)),
           poolings=("last",), init="normal", head_bias=False, exports=("onnx-single", "torchscript"),
           saved_as={"arch": "gpt", "pooling": "last"}),
    # ViT (Dosovitskiy et al. 2021, §3.1): pre-LN with a final LayerNorm, GELU, learned positions; no token
    # embedding table, so nothing to scale or tie; the class token's state through a head that starts at zero
    Family(name="vit", title="an image classifier (ViT)", structure="a Vision Transformer", model="ViT",
           reads="pixels", stacks=("encoder",), output="classes",
           defaults=dict(norm="pre", activation="gelu", positional="learned", scale_embeddings=False,
                         tie_embeddings=False),
           parts=Parts(embeddings="embed", blocks="encoder.layers", final_norm="encoder.norm", head=("head",)),
           poolings=("cls",), zero_head=True),
)}


def family_names() -> tuple[str, ...]:
    return tuple(FAMILIES)


def family(name: str) -> Family:
    """The entry of family ``name`` (a ``ModelConfig.arch``); an unknown name is refused in one line."""
    if name not in FAMILIES:
        raise ConfigError(f"arch={name!r} is not one of {', '.join(FAMILIES)}")
    return FAMILIES[name]


def check_built(built: str, arch: str, pooling: str | None, task: str, why: str = "") -> None:
    """``built``, the family a model config makes (a pooling names its family: ``pooling="last"`` on a GPT makes a GPT
    classifier), must be ``arch``, the one ``task`` builds; else one line (``why`` ends it)."""
    if built != arch:
        raise ConfigError(f"pooling={pooling!r} makes {family(built).title}; task={task} builds {family(arch).title}"
                          + why)


def saved_family(fields: dict[str, Any]) -> str | None:
    """The family that a config in an older form names (``arch="gpt"`` with ``pooling="last"``: a GPT classifier,
    as runs were saved before it was a family of its own), else None."""
    for entry in FAMILIES.values():
        if entry.saved_as and all(fields.get(k) == v for k, v in entry.saved_as.items()):
            return entry.name
    return None


def parts(model: Any) -> _ModelParts:
    """The parts of ``model`` (any family's) by role, found where its entry says."""
    return _ModelParts(model, family(model.config.arch).parts)


class _ModelParts:
    """A model's parts by role: ``blocks`` (a ``ModuleList``), ``final_norm`` and ``pooler`` (None where it has
    none), ``head`` (the output layer: a module, or the tied embedding it reuses), ``embeddings``, and
    ``every_block`` (the blocks of every stack, an encoder's before a decoder's)."""

    def __init__(self, model: Any, where: Parts) -> None:
        self.embeddings = model.get_submodule(where.embeddings)
        self.blocks = model.get_submodule(where.blocks)
        self.final_norm = _optional(model, where.final_norm)
        self.pooler = _optional(model, where.pooler)
        self.head = next(m for m in (_optional(model, path) for path in where.head) if m is not None)
        # every block of every stack, in the order they run (what sharded training splits one by one)
        self.every_block = [b for path in (*where.earlier_blocks, where.blocks) for b in model.get_submodule(path)]

    def head_parameters(self) -> list[Any]:
        """The weights of the output layer and, where the model has one, of the pooler before it."""
        return [*self.head.parameters(), *(self.pooler.parameters() if self.pooler is not None else ())]


def _optional(model: Any, path: str) -> Any:
    """``model``'s submodule at ``path``, or None where the model has none there (an attribute set to None)."""
    if not path:
        return None
    target = model
    for name in path.split("."):
        target = getattr(target, name, None)
        if target is None:
            return None
    return target
