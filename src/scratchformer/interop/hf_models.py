"""Hugging Face models from scratchformer's: the name-by-name mapping, and what cannot be mapped.

    scratchformer export --format hf --ckpt RUN --out DIR
    AutoModelForCausalLM.from_pretrained(DIR)                 # a GPT
    AutoModelForSequenceClassification.from_pretrained(DIR)   # a classifier with pooling="pooler"
    AutoModel.from_pretrained(DIR)                            # an encoder alone (--hf-class BertModel)
    AutoTokenizer.from_pretrained(DIR)

The reverse of ``interop.gpt2_from_pretrained`` and ``interop.bert_from_pretrained``: their name plans
(``gpt2_plan``, ``bert_plan``, ``hf_folder.llama_plan``) read the other way, each written once. The targets:
``GPT`` -> ``GPT2LMHeadModel`` (or Llama, Qwen3); ``EncoderClassifier`` with ``pooling="pooler"`` ->
``BertForSequenceClassification``; the encoder of any ``EncoderClassifier`` (a ``task=mlm`` run's, or a mean-pooled
classifier's) -> ``BertModel``. ``Seq2SeqTransformer`` is refused: no target architecture was chosen for it (ONNX and
TorchScript export it).

GPT -> GPT2LMHeadModel, name by name: ``huggingface.gpt2_plan`` read the other way (theirs under ``transformer.``;
GPT-2's projections are ``Conv1D`` layers that store ``(in, out)``, hence transposed). ``activation`` relu, gelu
(erf) and gelu_tanh become ``activation_function`` relu, gelu and gelu_pytorch_tanh, the same functions. A GPT with
today's settings (RMSNorm, SwiGLU, rotary positions) becomes ``LlamaForCausalLM``, or ``Qwen3ForCausalLM`` with
QK-norm (``hf_llama.py``).

EncoderClassifier -> BertForSequenceClassification, name by name: ``huggingface.bert_plan`` read the other
way (theirs under ``bert.``, except ``classifier``; ``BertModel``: the same names without ``bert.``). A GPT that fits
neither GPT-2 nor Llama/Qwen3 is refused naming what each target lacks.

Settings that the target holds exactly, although it is built differently:

- ``positional="sinusoidal"`` or ``"none"``: the sinusoid table (or zeros) is written into the learned
  position table; the same numbers are added to the same embeddings. The table is trainable there.
- ``bias=false``: the target's biases are zeros (adding zero changes nothing).
- ``scale_embeddings=true``: the token table is stored multiplied by sqrt(C), where the table is only an
  input (BERT; a GPT with untied output). A tied GPT is refused: GPT-2 uses one unscaled matrix for both.
- BERT's token-type (segment) embedding has one row (``type_vocab_size=1``) of zeros: these models know one
  segment; a second segment would be an error rather than a silent change.

Refused, in one line that names every such setting and why (``HFExportError``):

- GPT-2: ``norm="post"`` (GPT-2 is pre-LN with a final LayerNorm), ``activation="swiglu"`` (no gate),
  ``positional="rotary"`` (GPT-2 only adds a position table), ``embedding_norm=true`` (no LayerNorm after
  the embeddings), ``scale_embeddings`` with tied embeddings, ``attention="linear"`` (GPT-2's is softmax).
- BERT: ``norm="pre"`` (BERT is post-LN, without a final LayerNorm), ``embedding_norm=false`` (BERT always
  normalises its embeddings), ``activation="swiglu"``, ``positional="rotary"``, ``attention_window > 0``
  (BERT attends to every token), ``attention="linear"`` (BERT's is softmax).
- BertForSequenceClassification: ``pooling`` other than ``"pooler"``. Its classifier reads BERT's pooler,
  tanh(dense(first token)); no choice of its weights turns that into a mean, a max or the first token
  itself (tanh is bounded), so anything else would only be approximately equal. The encoder can still be
  exported alone, as ``BertModel``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.extras import require
from scratchformer.interop import hf_llama
from scratchformer.interop.hf_llama import LLAMA_CLASSES
from scratchformer.interop.hf_moe import as_in_memory
from scratchformer.interop.huggingface import bert_plan, gpt2_plan
from scratchformer.models import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.nn.config import ModelConfig
from scratchformer.registry import pretrains
from scratchformer.tokenizers import SPECIAL_TOKENS

__all__ = ["BERT_CLASSIFIER", "BERT_ENCODER", "GPT2_LM", "GPT_CLASSES", "HF_CLASSES", "HFExportError",
           "check_exportable", "default_hf_class", "to_hugging_face"]

GPT2_LM, BERT_CLASSIFIER, BERT_ENCODER = "GPT2LMHeadModel", "BertForSequenceClassification", "BertModel"
HF_CLASSES = (GPT2_LM, *LLAMA_CLASSES, BERT_CLASSIFIER, BERT_ENCODER)
GPT_CLASSES = (GPT2_LM, *LLAMA_CLASSES)
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}


class HFExportError(ValueError):
    """A checkpoint that cannot be exported to the Hugging Face class asked for, or a failed export."""


def transformers_module() -> Any:
    require("transformers", "hf")
    import transformers

    return transformers


# ====================================================================================== what exports


def default_hf_class(model: nn.Module, task: str | None = None) -> str:
    """The class a model becomes unless told otherwise; a ``task=mlm`` encoder's head is untrained, so
    its encoder alone (``BertModel``)."""
    if isinstance(model, GPT):
        return hf_llama.default_llama_class(model.config) if hf_llama.is_llama_like(model.config) else GPT2_LM
    if isinstance(model, EncoderClassifier):
        return BERT_ENCODER if pretrains(task) else BERT_CLASSIFIER
    if isinstance(model, Seq2SeqTransformer):
        raise HFExportError("a Seq2SeqTransformer has no Hugging Face export here (it exports a GPT as "
                            f"{GPT2_LM} and an encoder classifier as {BERT_CLASSIFIER} or {BERT_ENCODER}); "
                            "use --format onnx or torchscript")
    raise HFExportError(f"cannot export {type(model).__name__} to Hugging Face: expected a GPT or an EncoderClassifier")


def _common_problems(cfg: ModelConfig, name: str) -> list[str]:
    """The settings since 2017 that neither GPT-2 nor BERT has (``init`` only starts the weights: it exports)."""
    problems = []
    if cfg.norm_type != "layernorm":
        problems.append(f"norm_type={cfg.norm_type!r} ({name} normalises with LayerNorm)")
    if cfg.qk_norm:
        problems.append(f"qk_norm=true ({name} does not normalise queries and keys)")
    return problems


def _gpt2_problems(cfg: ModelConfig) -> list[str]:
    problems = _common_problems(cfg, "GPT-2")
    if cfg.norm != "pre":
        problems.append(f"norm={cfg.norm!r} (GPT-2 is pre-LN, with a final LayerNorm)")
    if cfg.activation not in _ACTIVATIONS:
        problems.append(f"activation={cfg.activation!r} (GPT-2's feed-forward: relu, gelu and gelu_tanh export)")
    if cfg.positional == "rotary":
        problems.append("positional='rotary' (GPT-2 adds a position table to the embeddings and does not rotate "
                        "queries and keys)")
    if cfg.embedding_norm or cfg.n_experts:
        problems.append("embedding_norm=true (GPT-2 has no LayerNorm after its embeddings)" if cfg.embedding_norm else
                        f"n_experts={cfg.n_experts} (GPT-2 has one feed-forward a layer)")
    if cfg.attention != "softmax":
        problems.append(f"attention={cfg.attention!r} (GPT-2's attention is softmax(QK^T / sqrt(d_k)))")
    if cfg.scale_embeddings and cfg.tie_embeddings:
        problems.append("scale_embeddings=true with tie_embeddings=true (GPT-2 uses one unscaled token matrix for "
                        "input and output)")
    return problems


def _bert_problems(cfg: ModelConfig, hf_class: str) -> list[str]:
    problems = _common_problems(cfg, "BERT")
    if cfg.norm != "post":
        problems.append(f"norm={cfg.norm!r} (BERT is post-LN, without a final LayerNorm)")
    if not cfg.embedding_norm:
        problems.append("embedding_norm=false (BERT always applies a LayerNorm to its embeddings)")
    if cfg.activation not in _ACTIVATIONS:
        problems.append(f"activation={cfg.activation!r} (BERT's feed-forward: relu, gelu and gelu_tanh export)")
    if cfg.positional == "rotary":
        problems.append("positional='rotary' (BERT adds a position table to the embeddings)")
    if cfg.attention_window:
        problems.append(f"attention_window={cfg.attention_window} (BERT's self-attention sees every token)")
    if cfg.attention != "softmax":
        problems.append(f"attention={cfg.attention!r} (BERT's attention is softmax(QK^T / sqrt(d_k)))")
    if hf_class == BERT_CLASSIFIER and cfg.pooling != "pooler":
        problems.append(f"pooling={cfg.pooling!r} ({BERT_CLASSIFIER} classifies BERT's pooler output, "
                        f"tanh(dense(first token)), which only pooling='pooler' computes: export the encoder alone "
                        f"with --hf-class {BERT_ENCODER}, or train with pooling=pooler)")
    return problems


def check_exportable(model: nn.Module, hf_class: str | None = None, task: str | None = None) -> str:
    """The Hugging Face class ``model`` exports to (``hf_class``, or the default for its family); raises
    ``HFExportError`` in one line naming every setting the class cannot express."""
    chosen, hf_class = hf_class, hf_class or default_hf_class(model, task)
    if hf_class not in HF_CLASSES:
        raise HFExportError(f"unknown Hugging Face class {hf_class!r}; choose from {', '.join(HF_CLASSES)}")
    family = GPT if hf_class in GPT_CLASSES else EncoderClassifier
    if not isinstance(model, family):
        default_hf_class(model)  # a seq2seq model gets its own message
        raise HFExportError(f"a {type(model).__name__} cannot become {hf_class}; it exports as "
                            f"{' or '.join(c for c in HF_CLASSES if (c in GPT_CLASSES) == isinstance(model, GPT))}")
    problems = _problems(model.config, hf_class)  # type: ignore[arg-type]
    if problems and chosen is None and hf_class in GPT_CLASSES:  # a GPT fits neither: say what each target lacks
        other = GPT2_LM if hf_class != GPT2_LM else hf_llama.default_llama_class(model.config)  # type: ignore[arg-type]
        problems += [f"nor as {other}: " + "; ".join(_problems(model.config, other))]  # type: ignore[arg-type]
    if problems:
        raise HFExportError(f"cannot export as {hf_class}: " + "; ".join(problems))
    return hf_class


def _problems(cfg: ModelConfig, hf_class: str) -> list[str]:
    if hf_class in GPT_CLASSES:
        return _gpt2_problems(cfg) if hf_class == GPT2_LM else hf_llama.llama_problems(cfg, hf_class)
    return _bert_problems(cfg, hf_class)


# ====================================================================================== weights


def _position_table(model: GPT | EncoderClassifier) -> Tensor:
    """The ``(max_len, C)`` numbers added to the token embeddings at each position."""
    cfg, positions = model.config, model.embed.position_embedding
    if cfg.positional == "learned":
        return positions.weight  # type: ignore[union-attr]
    if cfg.positional == "sinusoidal":
        return positions.table  # type: ignore[union-attr]
    return torch.zeros(cfg.max_len, cfg.d_model)  # "none"


def _token_table(model: GPT | EncoderClassifier) -> Tensor:
    """The token table as the target adds it: times sqrt(C) with ``scale_embeddings`` (the same
    multiplication the model does after the lookup, done once to the table)."""
    scale = model.embed.scale
    weight = model.embed.token.weight
    return weight * scale if scale != 1.0 else weight


def _with_zeros(model: GPT | EncoderClassifier, plan: list[tuple[str, list[str], bool]]) -> dict[str, Tensor]:
    """``model``'s weights by our names, with what the target holds differently filled in: the token table as it
    adds it, the position table (a sinusoid, or zeros), zeros for each bias the model has not (``bias=false``)."""
    own = dict(model.state_dict())
    own["embed.token.weight"], own["embed.position_embedding.weight"] = _token_table(model), _position_table(model)
    for ours, _, _ in plan:
        if ours not in own and ours.endswith(".bias"):  # a bias the model has not: the weight's rows of zeros
            own[ours] = torch.zeros(own[ours.removesuffix(".bias") + ".weight"].shape[0])
    return own


def _by_plan(own: dict[str, Tensor], plan: list[tuple[str, list[str], bool]], prefix: str = "",
             rows: list[int] | None = None) -> dict[str, Tensor]:
    """Their names -> our tensors, by the loader's ``plan`` read the other way (``prefix``: where theirs live; a
    stacked ``in_proj`` split back into ``rows``)."""
    state: dict[str, Tensor] = {}
    for ours, theirs, transpose in plan:
        parts = own[ours].split(rows) if len(theirs) == 3 and rows else [own[ours]]
        for name, tensor in zip(theirs, parts):
            state[("" if name.startswith("lm_head.") else prefix) + name] = tensor.t() if transpose else tensor
    return state


def _gpt2_state(model: GPT) -> dict[str, Tensor]:
    plan = gpt2_plan(model.config)
    state = _by_plan(_with_zeros(model, plan), plan, "transformer.")
    state["lm_head.weight"] = model.output_weight()  # the token table itself when tied: transformers holds both
    return state


def _bert_state(model: EncoderClassifier, hf_class: str) -> dict[str, Tensor]:
    C = model.config.d_model
    b = "bert." if hf_class == BERT_CLASSIFIER else ""
    plan = bert_plan(model.config, b)
    state = _by_plan(_with_zeros(model, plan), plan, rows=[C, C, C])  # in_proj stacks W^Q, W^K, W^V: (3C, C)
    state[b + "embeddings.token_type_embeddings.weight"] = torch.zeros(1, C)  # one segment, adding nothing
    if model.pooler is not None:
        bias = model.pooler.bias if model.pooler.bias is not None else torch.zeros(C)
        state[b + "pooler.dense.weight"], state[b + "pooler.dense.bias"] = model.pooler.weight, bias
    else:  # BertModel always has a pooler: zeros make its pooler_output plainly empty (tanh(0) = 0)
        state[b + "pooler.dense.weight"], state[b + "pooler.dense.bias"] = torch.zeros(C, C), torch.zeros(C)
    if hf_class == BERT_CLASSIFIER:
        state["classifier.weight"], state["classifier.bias"] = model.head.weight, model.head.bias
    return state


def _hf_config(model: GPT | EncoderClassifier, hf_class: str, labels: list[str] | None, ids: dict[str, Any]) -> Any:
    transformers = transformers_module()
    cfg = model.config
    common = dict(vocab_size=cfg.vocab_size, pad_token_id=ids.get("pad_token_id", cfg.pad_id), architectures=[hf_class])
    if hf_class == GPT2_LM:
        return transformers.GPT2Config(
            n_positions=cfg.max_len, n_embd=cfg.d_model, n_layer=cfg.n_layers, n_head=cfg.n_heads, n_inner=cfg.d_ff,
            activation_function=_ACTIVATIONS[cfg.activation], resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,  # type: ignore[index]
            attn_pdrop=cfg.attention_dropout, layer_norm_epsilon=cfg.layer_norm_eps,
            tie_word_embeddings=cfg.tie_embeddings, bos_token_id=ids.get("bos_token_id"),
            eos_token_id=ids.get("eos_token_id"), **common)
    labels = labels or [str(i) for i in range(cfg.n_classes)]
    return transformers.BertConfig(
        hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff, hidden_act=_ACTIVATIONS[cfg.activation], hidden_dropout_prob=cfg.dropout,  # type: ignore[index]
        attention_probs_dropout_prob=cfg.attention_dropout, max_position_embeddings=cfg.max_len, type_vocab_size=1,
        layer_norm_eps=cfg.layer_norm_eps, position_embedding_type="absolute", tie_word_embeddings=False,
        num_labels=cfg.n_classes, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
        **common)


def to_hugging_face(model: nn.Module, hf_class: str | None = None, *, labels: list[str] | None = None,
                    special_ids: dict[str, Any] | None = None) -> Any:
    """``model`` as a ``transformers`` model (eval mode) with the same weights: ``GPT2LMHeadModel`` for a
    GPT (``LlamaForCausalLM`` or ``Qwen3ForCausalLM`` for one with their settings, ``hf_llama.py``),
    ``BertForSequenceClassification`` (or, with ``hf_class="BertModel"``, ``BertModel``) for an encoder
    classifier. ``labels``: the class names, for ``id2label``; ``special_ids``: the tokenizer's ``bos_token_id``,
    ``eos_token_id`` (one, or every end-of-generation id) and ``pad_token_id`` (``hf_tokenizers.generation_ids``;
    default: scratchformer's own ``<bos>``, ``<eos>``, ``<pad>``), written into the config and, for a GPT, its
    ``generation_config``. Raises ``HFExportError`` for a setting the class cannot express (module docstring)."""
    hf_class = check_exportable(model, hf_class)
    transformers = transformers_module()
    ids = special_ids if special_ids is not None else {
        "bos_token_id": SPECIAL_TOKENS.index("<bos>"), "eos_token_id": SPECIAL_TOKENS.index("<eos>"),
        "pad_token_id": model.config.pad_id}
    if hf_class in LLAMA_CLASSES:
        config = hf_llama.llama_config(model, hf_class, transformers, ids)  # type: ignore[arg-type]
        state = hf_llama.llama_state(model)  # type: ignore[arg-type]
    elif hf_class == GPT2_LM:
        config, state = _hf_config(model, hf_class, labels, ids), _gpt2_state(model)  # type: ignore[arg-type]
    else:
        config, state = _hf_config(model, hf_class, labels, ids), _bert_state(model, hf_class)  # type: ignore[arg-type]
    hf = getattr(transformers, hf_class)(config)
    with torch.no_grad():
        state = as_in_memory(state, hf.state_dict().keys())  # transformers 5 holds experts fused (hf_moe.py)
        hf.load_state_dict({k: v.detach().float().cpu().contiguous() for k, v in state.items()}, strict=True)
    if hf_class in GPT_CLASSES:  # where generate stops (every eos id), and what it pads with: a pad, else an eos
        eos = ids.get("eos_token_id")
        first = eos[0] if isinstance(eos, list) else eos
        pad = ids.get("pad_token_id") if ids.get("pad_token_id") is not None else first
        hf.generation_config = transformers.GenerationConfig(**{**ids, "pad_token_id": pad})
    return hf.eval()
