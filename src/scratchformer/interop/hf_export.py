"""Hugging Face export: a checkpoint as a ``transformers`` model directory that gives the same outputs.

    scratchformer export --format hf --ckpt RUN --out DIR
    AutoModelForCausalLM.from_pretrained(DIR)                 # a GPT
    AutoModelForSequenceClassification.from_pretrained(DIR)   # a classifier with pooling="pooler"
    AutoModel.from_pretrained(DIR)                            # an encoder alone (--hf-class BertModel)
    AutoTokenizer.from_pretrained(DIR)

The reverse of ``interop.gpt2_from_pretrained`` and ``interop.bert_from_pretrained``. Three targets:

- ``GPT`` -> ``GPT2LMHeadModel``;
- ``EncoderClassifier`` with ``pooling="pooler"`` -> ``BertForSequenceClassification``;
- the encoder of any ``EncoderClassifier`` (a ``task=mlm`` run's, or a mean-pooled classifier's) -> ``BertModel``.

``Seq2SeqTransformer`` is refused: no target architecture was chosen for it (ONNX and TorchScript export it).

GPT -> GPT2LMHeadModel, name by name (theirs under ``transformer.``; ``i`` is the layer)::

    embed.token.weight                                  wte.weight (and lm_head.weight, when tied)
    embed.positions                                     wpe.weight
    decoder.layers.i.self_attn_block.norm.{weight,bias} h.i.ln_1.{weight,bias}
    decoder.layers.i.self_attn.in_proj.{weight,bias}    h.i.attn.c_attn.{weight^T,bias}
    decoder.layers.i.self_attn.out_proj.{weight,bias}   h.i.attn.c_proj.{weight^T,bias}
    decoder.layers.i.ffn_block.norm.{weight,bias}       h.i.ln_2.{weight,bias}
    decoder.layers.i.ffn.linear1.{weight,bias}          h.i.mlp.c_fc.{weight^T,bias}
    decoder.layers.i.ffn.linear2.{weight,bias}          h.i.mlp.c_proj.{weight^T,bias}
    decoder.norm.{weight,bias}                          ln_f.{weight,bias}
    lm_head.weight (untied)                             lm_head.weight (outside transformer.)

GPT-2's projections are ``Conv1D`` layers that store ``(in, out)``, hence the transposes (^T).
``activation`` relu, gelu (erf) and gelu_tanh become ``activation_function`` relu, gelu and
gelu_pytorch_tanh, the same functions.

EncoderClassifier -> BertForSequenceClassification (theirs under ``bert.``, except ``classifier``; BertModel:
the same names without ``bert.``)::

    embed.token.weight                               embeddings.word_embeddings.weight
    embed.positions                                  embeddings.position_embeddings.weight
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
  the embeddings), ``scale_embeddings`` with tied embeddings.
- BERT: ``norm="pre"`` (BERT is post-LN, without a final LayerNorm), ``embedding_norm=false`` (BERT always
  normalises its embeddings), ``activation="swiglu"``, ``positional="rotary"``, ``attention_window > 0``
  (BERT attends to every token).
- BertForSequenceClassification: ``pooling`` other than ``"pooler"``. Its classifier reads BERT's pooler,
  tanh(dense(first token)); no choice of its weights turns that into a mean, a max or the first token
  itself (tanh is bounded), so anything else would only be approximately equal. The encoder can still be
  exported alone, as ``BertModel``.

The tokenizer is written as ``tokenizer.json`` (Hugging Face ``tokenizers``) with ``tokenizer_config.json``
and ``special_tokens_map.json`` declaring ``<pad> <bos> <eos> <unk>`` (ids 0-3); ``AutoTokenizer`` gives
``PreTrainedTokenizerFast``. Characters become a BPE model with no merges (each character one token, an
unseen one ``<unk>``); byte-level BPE and pretrained (WordPiece) tokenizers are copied as they are. As in
scratchformer, text that spells a special token is text (``split_special_tokens``), except for a pretrained
tokenizer, which keeps its own behaviour (``[SEP]`` in text is the separator, as scratchformer treats it).

Where the two still differ in use: GPT-2 has no positions past ``max_len``, so transformers' ``generate``
stops there while scratchformer's slides a window; called directly on a left-padded batch, GPT-2 needs
``position_ids`` counted over real tokens (its ``generate`` passes them); an input longer than ``max_len``
is cut by scratchformer at ``max_len`` ids, by transformers' ``truncation=True`` with a pretrained
tokenizer's final ``[SEP]`` kept. A GPT's model card says the first two.

Every export is checked before it is published: the directory is loaded back with ``from_pretrained`` and
its logits compared with the checkpoint's on random inputs, padded ones included (within 1e-5 of the
largest logit's size), and the tokenizer's ids with scratchformer's on sample texts. It is written to a
temporary directory beside ``DIR`` and renamed into place, so a failed or interrupted export leaves nothing
half-written, and an existing ``DIR`` is replaced only with ``force=True`` (``--force``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.models import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import SPECIAL_TOKENS, BPETokenizer, CharTokenizer, PretrainedTokenizer, Tokenizer

__all__ = ["HF_CLASSES", "HFExport", "HFExportError", "check_exportable", "export_hf", "hf_tokenizer_files",
           "to_hugging_face"]

GPT2_LM, BERT_CLASSIFIER, BERT_ENCODER = "GPT2LMHeadModel", "BertForSequenceClassification", "BertModel"
HF_CLASSES = (GPT2_LM, BERT_CLASSIFIER, BERT_ENCODER)
INSTALL_HINT = 'pip install "scratchformer[hf]"'
# Logits may differ by float32 rounding only: this fraction of the largest logit's magnitude (at least 1).
TOLERANCE = 1e-5
SAMPLE_TEXTS = [
    "To be, or not to be, that is the question:",
    "A man walks his dog in the park.\nEin Mann geht mit seinem Hund im Park spazieren.",
    "  two  spaces, a\ttab and  trailing space ",
    "Café, naïve, Straße; 3.14 + 2 = 5.14!",
    "text that spells <eos> or <pad> is text",
    "",
]
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}


class HFExportError(ValueError):
    """A checkpoint that cannot be exported to the Hugging Face class asked for, or a failed export."""


@dataclass
class HFExport:
    path: Path
    hf_class: str
    max_abs_diff: float  # the largest |logit difference| found by the check at export
    logit_scale: float  # the largest |logit| in that check, for scale


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise HFExportError(f"Hugging Face export needs the transformers package: {INSTALL_HINT}") from None
    return transformers


# ====================================================================================== what exports


def default_hf_class(model: nn.Module, task: str | None = None) -> str:
    """The class a model becomes unless told otherwise; a ``task=mlm`` encoder's head is untrained, so
    its encoder alone (``BertModel``)."""
    if isinstance(model, GPT):
        return GPT2_LM
    if isinstance(model, EncoderClassifier):
        return BERT_ENCODER if task == "mlm" else BERT_CLASSIFIER
    if isinstance(model, Seq2SeqTransformer):
        raise HFExportError("a Seq2SeqTransformer has no Hugging Face export here (it exports a GPT as "
                            f"{GPT2_LM} and an encoder classifier as {BERT_CLASSIFIER} or {BERT_ENCODER}); "
                            "use --format onnx or torchscript")
    raise HFExportError(f"cannot export {type(model).__name__} to Hugging Face: expected a GPT or an EncoderClassifier")


def _gpt2_problems(cfg: ModelConfig) -> list[str]:
    problems = []
    if cfg.norm != "pre":
        problems.append(f"norm={cfg.norm!r} (GPT-2 is pre-LN, with a final LayerNorm)")
    if cfg.activation not in _ACTIVATIONS:
        problems.append(f"activation={cfg.activation!r} (GPT-2's feed-forward has no gate: relu, gelu and "
                        "gelu_tanh export)")
    if cfg.positional == "rotary":
        problems.append("positional='rotary' (GPT-2 adds a position table to the embeddings and does not rotate "
                        "queries and keys)")
    if cfg.embedding_norm:
        problems.append("embedding_norm=true (GPT-2 has no LayerNorm after its embeddings)")
    if cfg.scale_embeddings and cfg.tie_embeddings:
        problems.append("scale_embeddings=true with tie_embeddings=true (GPT-2 uses one unscaled token matrix for "
                        "input and output)")
    return problems


def _bert_problems(cfg: ModelConfig, hf_class: str) -> list[str]:
    problems = []
    if cfg.norm != "post":
        problems.append(f"norm={cfg.norm!r} (BERT is post-LN, without a final LayerNorm)")
    if not cfg.embedding_norm:
        problems.append("embedding_norm=false (BERT always applies a LayerNorm to its embeddings)")
    if cfg.activation not in _ACTIVATIONS:
        problems.append(f"activation={cfg.activation!r} (BERT's feed-forward has no gate: relu, gelu and "
                        "gelu_tanh export)")
    if cfg.positional == "rotary":
        problems.append("positional='rotary' (BERT adds a position table to the embeddings)")
    if cfg.attention_window:
        problems.append(f"attention_window={cfg.attention_window} (BERT's self-attention sees every token)")
    if hf_class == BERT_CLASSIFIER and cfg.pooling != "pooler":
        problems.append(f"pooling={cfg.pooling!r} ({BERT_CLASSIFIER} classifies BERT's pooler output, "
                        f"tanh(dense(first token)), which only pooling='pooler' computes: export the encoder alone "
                        f"with --hf-class {BERT_ENCODER}, or train with pooling=pooler)")
    return problems


def check_exportable(model: nn.Module, hf_class: str | None = None, task: str | None = None) -> str:
    """The Hugging Face class ``model`` exports to (``hf_class``, or the default for its family); raises
    ``HFExportError`` in one line naming every setting the class cannot express."""
    hf_class = hf_class or default_hf_class(model, task)
    if hf_class not in HF_CLASSES:
        raise HFExportError(f"unknown Hugging Face class {hf_class!r}; choose from {', '.join(HF_CLASSES)}")
    family = GPT if hf_class == GPT2_LM else EncoderClassifier
    if not isinstance(model, family):
        default_hf_class(model)  # a seq2seq model gets its own message
        raise HFExportError(f"a {type(model).__name__} cannot become {hf_class}; it exports as "
                            f"{' or '.join(c for c in HF_CLASSES if (c == GPT2_LM) == isinstance(model, GPT))}")
    cfg: ModelConfig = model.config  # type: ignore[assignment]
    problems = _gpt2_problems(cfg) if hf_class == GPT2_LM else _bert_problems(cfg, hf_class)
    if problems:
        raise HFExportError(f"cannot export as {hf_class}: " + "; ".join(problems))
    return hf_class


# ====================================================================================== weights


def _position_table(model: GPT | EncoderClassifier) -> Tensor:
    """The ``(max_len, C)`` numbers added to the token embeddings at each position."""
    cfg, positions = model.config, model.embed.positions
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


def _put(state: dict[str, Tensor], name: str, module: nn.Linear | nn.LayerNorm, transpose: bool = False) -> None:
    """``name.weight`` and ``name.bias`` of ``module``; zeros for the bias where it has none (``bias=false``)."""
    state[name + ".weight"] = module.weight.t() if transpose else module.weight
    size = module.out_features if isinstance(module, nn.Linear) else module.normalized_shape[0]
    state[name + ".bias"] = module.bias if module.bias is not None else torch.zeros(size)


def _gpt2_state(model: GPT) -> dict[str, Tensor]:
    t = "transformer."
    state = {t + "wte.weight": _token_table(model), t + "wpe.weight": _position_table(model),
             "lm_head.weight": model.output_weight()}  # the token table itself when tied
    _put(state, t + "ln_f", model.decoder.norm)
    for i, layer in enumerate(model.decoder.layers):
        h = f"{t}h.{i}."
        _put(state, h + "ln_1", layer.self_attn_block.norm)
        _put(state, h + "attn.c_attn", layer.self_attn.in_proj, transpose=True)  # Conv1D stores (in, out)
        _put(state, h + "attn.c_proj", layer.self_attn.out_proj, transpose=True)
        _put(state, h + "ln_2", layer.ffn_block.norm)
        _put(state, h + "mlp.c_fc", layer.ffn.linear1, transpose=True)
        _put(state, h + "mlp.c_proj", layer.ffn.linear2, transpose=True)
    return state


def _bert_state(model: EncoderClassifier, hf_class: str) -> dict[str, Tensor]:
    C = model.config.d_model
    b = "bert." if hf_class == BERT_CLASSIFIER else ""
    e = b + "embeddings."
    assert model.embed.norm is not None  # checked: embedding_norm=true
    state = {e + "word_embeddings.weight": _token_table(model),
             e + "position_embeddings.weight": _position_table(model),
             e + "token_type_embeddings.weight": torch.zeros(1, C)}
    _put(state, e + "LayerNorm", model.embed.norm)
    for i, layer in enumerate(model.encoder.layers):
        o = f"{b}encoder.layer.{i}."
        qkv: dict[str, Tensor] = {}
        _put(qkv, "in_proj", layer.self_attn.in_proj)
        for j, name in enumerate(("query", "key", "value")):  # in_proj stacks W^Q, W^K, W^V: (3C, C)
            for part in ("weight", "bias"):
                state[o + f"attention.self.{name}.{part}"] = qkv[f"in_proj.{part}"][j * C:(j + 1) * C]
        _put(state, o + "attention.output.dense", layer.self_attn.out_proj)
        _put(state, o + "attention.output.LayerNorm", layer.attn_block.norm)
        _put(state, o + "intermediate.dense", layer.ffn.linear1)
        _put(state, o + "output.dense", layer.ffn.linear2)
        _put(state, o + "output.LayerNorm", layer.ffn_block.norm)
    if model.pooler is not None:
        _put(state, b + "pooler.dense", model.pooler)
    else:  # BertModel always has a pooler: zeros make its pooler_output plainly empty (tanh(0) = 0)
        state[b + "pooler.dense.weight"], state[b + "pooler.dense.bias"] = torch.zeros(C, C), torch.zeros(C)
    if hf_class == BERT_CLASSIFIER:
        _put(state, "classifier", model.head)
    return state


def _hf_config(model: GPT | EncoderClassifier, hf_class: str, labels: list[str] | None) -> Any:
    transformers = _transformers()
    cfg = model.config
    common = dict(vocab_size=cfg.vocab_size, pad_token_id=cfg.pad_id, architectures=[hf_class])
    if hf_class == GPT2_LM:
        return transformers.GPT2Config(
            n_positions=cfg.max_len, n_embd=cfg.d_model, n_layer=cfg.n_layers, n_head=cfg.n_heads, n_inner=cfg.d_ff,
            activation_function=_ACTIVATIONS[cfg.activation], resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,  # type: ignore[index]
            attn_pdrop=cfg.attention_dropout, layer_norm_epsilon=cfg.layer_norm_eps,
            tie_word_embeddings=cfg.tie_embeddings, bos_token_id=SPECIAL_TOKENS.index("<bos>"),
            eos_token_id=SPECIAL_TOKENS.index("<eos>"), **common)
    labels = labels or [str(i) for i in range(cfg.n_classes)]
    return transformers.BertConfig(
        hidden_size=cfg.d_model, num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
        intermediate_size=cfg.d_ff, hidden_act=_ACTIVATIONS[cfg.activation], hidden_dropout_prob=cfg.dropout,  # type: ignore[index]
        attention_probs_dropout_prob=cfg.attention_dropout, max_position_embeddings=cfg.max_len, type_vocab_size=1,
        layer_norm_eps=cfg.layer_norm_eps, position_embedding_type="absolute", tie_word_embeddings=False,
        num_labels=cfg.n_classes, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)},
        **common)


def to_hugging_face(model: nn.Module, hf_class: str | None = None, *, labels: list[str] | None = None) -> Any:
    """``model`` as a ``transformers`` model (eval mode) with the same weights: ``GPT2LMHeadModel`` for a
    GPT, ``BertForSequenceClassification`` (or, with ``hf_class="BertModel"``, ``BertModel``) for an
    encoder classifier. ``labels``: the class names, for ``id2label``. Raises ``HFExportError`` for a
    setting the class cannot express (see the module docstring)."""
    hf_class = check_exportable(model, hf_class)
    transformers = _transformers()
    config = _hf_config(model, hf_class, labels)  # type: ignore[arg-type]
    if hf_class == GPT2_LM:
        state = _gpt2_state(model)  # type: ignore[arg-type]
    else:
        state = _bert_state(model, hf_class)  # type: ignore[arg-type]
    hf = getattr(transformers, hf_class)(config)
    with torch.no_grad():
        hf.load_state_dict({k: v.detach().float().cpu().contiguous() for k, v in state.items()}, strict=True)
    return hf.eval()


# ====================================================================================== tokenizer


def _char_backend(tokenizer: CharTokenizer) -> Any:
    """Characters as a Hugging Face ``tokenizers.Tokenizer``: a BPE model without merges splits text into
    characters and looks each up (an unseen one is ``<unk>``, one per character, as ``CharTokenizer``)."""
    from tokenizers import AddedToken, decoders, models
    from tokenizers import Tokenizer as Backend

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + tokenizer.chars)}
    backend = Backend(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS[3], fuse_unk=False))
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.decoder = decoders.Fuse()  # join the characters (the default decoder puts spaces between tokens)
    return backend


# special-token roles of transformers' tokenizers, by the token's text
_ROLES = {"<pad>": "pad_token", "<bos>": "bos_token", "<eos>": "eos_token", "<unk>": "unk_token",
          "[PAD]": "pad_token", "[UNK]": "unk_token", "[CLS]": "cls_token", "[SEP]": "sep_token",
          "[MASK]": "mask_token"}


def hf_tokenizer_files(tokenizer: Tokenizer, model_config: ModelConfig) -> dict[str, str]:
    """The files (name -> text) that make ``AutoTokenizer.from_pretrained`` give ``tokenizer``'s ids:
    ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``."""
    from tokenizers import Tokenizer as Backend

    if isinstance(tokenizer, CharTokenizer):
        backend = _char_backend(tokenizer)
    elif isinstance(tokenizer, (BPETokenizer, PretrainedTokenizer)):
        backend = Backend.from_str(tokenizer.hf.to_str())  # a copy: padding and truncation are off in it
    else:
        raise HFExportError(f"cannot export a {type(tokenizer).__name__} to Hugging Face")
    specials = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    roles = {role: token for token, role in _ROLES.items() if token in specials}
    pretrained = isinstance(tokenizer, PretrainedTokenizer)
    config = {
        # PreTrainedTokenizerFast reads tokenizer.json as it is, in transformers 4 and 5 alike
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_config.max_len,
        # GPT batches of prompts are left-padded, as scratchformer pads them for generation
        "padding_side": "left" if model_config.arch == "gpt" else "right",
        "clean_up_tokenization_spaces": False,
        # scratchformer's own tokenizers read "<eos>" in text as characters; a pretrained one as its token
        "split_special_tokens": not pretrained,
        # GPT-2 would add token_type_ids to its input embeddings (through wte): never hand them over
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"] if pretrained
        else ["input_ids", "attention_mask"],
        **roles,
    }
    return {"tokenizer.json": backend.to_str(pretty=True),
            "tokenizer_config.json": json.dumps(config, indent=2, ensure_ascii=False) + "\n",
            "special_tokens_map.json": json.dumps(roles, indent=2, ensure_ascii=False) + "\n"}


# ====================================================================================== checks


def _check_inputs(cfg: ModelConfig, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Random ids ``(3, T)`` and a real-token mask: row 0 full, rows 1 and 2 padded (left for a GPT, the
    way prompts are batched; right for an encoder), row 2 down to one token."""
    gen = torch.Generator().manual_seed(seed)
    T = min(cfg.max_len, 24)
    ids = torch.randint(len(SPECIAL_TOKENS), max(cfg.vocab_size, len(SPECIAL_TOKENS) + 1), (3, T), generator=gen)
    ids = ids.clamp(max=cfg.vocab_size - 1)
    lengths = torch.tensor([T, max(1, T // 2), 1])
    positions = torch.arange(T)[None, :]
    mask = positions >= T - lengths[:, None] if cfg.arch == "gpt" else positions < lengths[:, None]  # (3, T)
    return ids.masked_fill(~mask, cfg.pad_id), mask


def compare_logits(model: nn.Module, hf_model: Any, hf_class: str, ids: Tensor, mask: Tensor) -> tuple[float, float]:
    """``(max |difference|, max |logit|)`` between ``model`` and ``hf_model`` on ``ids (B, T)`` with the
    real-token ``mask (B, T)``, over the outputs that mean something: every real position's logits for
    a GPT (positions counted from the first real token, as ``generate`` does), the class logits of a
    classifier, the real positions' hidden states (and the pooler's output, if the model has one) of an
    encoder."""
    model.eval()
    hf_mask = mask.long()
    with torch.no_grad():
        if hf_class == GPT2_LM:
            position_ids = (hf_mask.cumsum(-1) - 1).clamp(min=0)
            ours = model(ids, mask)[mask]
            theirs = hf_model(input_ids=ids, attention_mask=hf_mask, position_ids=position_ids).logits[mask]
        elif hf_class == BERT_CLASSIFIER:
            ours, theirs = model(ids, mask), hf_model(input_ids=ids, attention_mask=hf_mask).logits
        else:
            out = hf_model(input_ids=ids, attention_mask=hf_mask)
            hidden = model.encode(ids, mask)
            ours, theirs = hidden[mask], out.last_hidden_state[mask]
            if model.pooler is not None:
                ours = torch.cat([ours, model.pool(hidden, mask)])
                theirs = torch.cat([theirs, out.pooler_output])
    ours, theirs = ours.float(), theirs.float()
    return (ours - theirs).abs().max().item(), ours.abs().max().item()


def _check_tokenizer(tokenizer: Tokenizer, directory: Path) -> int:
    """Compare ``AutoTokenizer.from_pretrained(directory)`` with ``tokenizer`` on the sample texts (and,
    for characters, on the whole alphabet); returns how many texts agreed, raises on the first that differs."""
    transformers = _transformers()
    hf = transformers.AutoTokenizer.from_pretrained(str(directory))
    texts = list(SAMPLE_TEXTS)
    if isinstance(tokenizer, CharTokenizer):
        texts.append("".join(tokenizer.chars))
    for text in texts:
        ours, theirs = tokenizer.encode(text), hf(text)["input_ids"]
        if ours != theirs:
            raise HFExportError(f"the exported tokenizer encodes {text[:30]!r} as {theirs[:12]}..., scratchformer "
                                f"as {ours[:12]}...; nothing was written")
    return len(texts)


# ====================================================================================== model card


def _run_dir(ckpt_dir: Path) -> Path | None:
    """The training run a checkpoint belongs to: the directory with its ``metrics.jsonl``."""
    for candidate in (ckpt_dir, ckpt_dir.parent):
        if (candidate / "metrics.jsonl").is_file():
            return candidate
    return None


def _metrics_table(run: Path | None, step: int) -> list[str]:
    from scratchformer.train.logger import read_metrics

    if run is None:
        return ["No `metrics.jsonl` was found beside the checkpoint, so no metrics are recorded here."]
    records = read_metrics(run)
    rows = []
    for split in ("train", "val", "test"):
        of_split = [r for r in records if r.get("split") == split]
        if not of_split:
            continue
        at_step = [r for r in of_split if r.get("step") == step]
        record = (at_step or of_split)[-1]
        values = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()
                           if k not in ("step", "split", "lr", "grad_norm", "tokens_per_s", "time_s"))
        rows.append(f"| {split} | {record['step']} | {values} |")
    if not rows:
        return ["The run's `metrics.jsonl` holds no metrics yet."]
    return ["| split | step | metrics |", "|---|---|---|", *rows, "",
            f"From the run's `metrics.jsonl`: for each split, the record at the exported checkpoint's step ({step}) "
            "where there is one, else the latest."]


def _settings_table(settings: dict[str, Any]) -> list[str]:
    return ["| setting | value |", "|---|---|",
            *(f"| `{k}` | `{json.dumps(v, ensure_ascii=False)}` |" for k, v in settings.items())]


_USAGE = {
    GPT2_LM: ("text-generation", "AutoModelForCausalLM",
              'ids = tokenizer("Once upon a time", return_tensors="pt")\n'
              "out = model.generate(**ids, max_new_tokens=40, do_sample=True, top_k=50)\n"
              "print(tokenizer.decode(out[0], skip_special_tokens=True))"),
    BERT_CLASSIFIER: ("text-classification", "AutoModelForSequenceClassification",
                      'batch = tokenizer(["a gripping, funny film", "dull"], padding=True, return_tensors="pt")\n'
                      "probs = model(**batch).logits.softmax(-1)\n"
                      "print([model.config.id2label[int(i)] for i in probs.argmax(-1)])"),
    BERT_ENCODER: ("feature-extraction", "AutoModel",
                   'batch = tokenizer(["a sentence", "another one"], padding=True, return_tensors="pt")\n'
                   "hidden = model(**batch).last_hidden_state  # (B, T, C)"),
}


def model_card(ckpt_dir: Path, meta: dict[str, Any], hf_class: str, result: HFExport, exact_notes: list[str]) -> str:
    """The ``README.md`` of an export: what it is, how to load it, the check it passed, settings and metrics."""
    pipeline, auto, snippet = _USAGE[hf_class]
    model_cfg, train_cfg, step = meta["model"], meta.get("train", {}), int(meta.get("step", 0))
    run = _run_dir(ckpt_dir)
    data = meta.get("data") or (json.loads((run / "config.json").read_text()).get("data") if run and
                                (run / "config.json").is_file() else None)
    from scratchformer.data.sources import DataFiles

    files = DataFiles.from_dict(data)
    names = [f"{Path(p).name} ({role})" for role, paths in (("train", files.train), ("val", files.val),
                                                            ("test", files.test)) for p in paths]
    source = train_cfg.get("dataset") or ", ".join(names) or "not recorded"
    lines = [
        "---", "library_name: transformers", f"pipeline_tag: {pipeline}", "tags:", "- scratchformer", "---", "",
        f"# {ckpt_dir.resolve().parent.name if ckpt_dir.name in ('best', 'last') else ckpt_dir.name}", "",
        f"A `{hf_class}` exported by scratchformer from a checkpoint trained for {step} steps "
        f"(task `{train_cfg.get('task', '?')}`, data: {source}).", "",
        "## Use", "", "```python", f"from transformers import AutoTokenizer, {auto}", "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH/TO/THIS/FOLDER")',
        f'model = {auto}.from_pretrained("PATH/TO/THIS/FOLDER")', snippet, "```", "",
    ]
    if hf_class == GPT2_LM:
        lines += [f"GPT-2 has positions for {model_cfg['max_len']} tokens only: keep the prompt and the new tokens "
                  "within that (scratchformer's own `generate` slides a window past it). Batches of prompts are "
                  "padded on the left; called directly on a padded batch, the model needs "
                  "`position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)`, as `generate` passes, so that "
                  "positions count real tokens (scratchformer computes them that way).", ""]
    if hf_class == BERT_ENCODER and model_cfg.get("pooling") != "pooler":
        lines += [f"The encoder alone: scratchformer's `{model_cfg.get('pooling')}` pooling and classification "
                  "head are not part of `BertModel`; its `pooler_output` is zeros (the pooler's weights are zero). "
                  "Use `last_hidden_state`.", ""]
    lines += ["## Checked at export", "",
              f"Loaded back with `from_pretrained`, this model's outputs differ from scratchformer's by at most "
              f"{result.max_abs_diff:.2e} (largest output magnitude {result.logit_scale:.3g}) on random inputs with "
              "padding; the tokenizer gives scratchformer's ids on sample texts.", ""]
    if exact_notes:
        lines += ["Settings held exactly by the target although it is built differently:", "",
                  *(f"- {n}" for n in exact_notes), ""]
    lines += ["## Metrics", "", *_metrics_table(run, step), "",
              "## Model settings (scratchformer `ModelConfig`)", "", *_settings_table(model_cfg), "",
              "## Training settings (scratchformer `TrainConfig`)", "", *_settings_table(train_cfg), ""]
    return "\n".join(lines)


def _exact_notes(cfg: ModelConfig, hf_class: str) -> list[str]:
    notes = []
    table = "`wpe`" if hf_class == GPT2_LM else "`position_embeddings`"
    if cfg.positional == "sinusoidal":
        notes.append(f"`positional=sinusoidal`: the paper's sinusoid table is stored in {table} (trainable here).")
    if cfg.positional == "none":
        notes.append(f"`positional=none`: {table} is zeros (trainable here).")
    if not cfg.bias:
        notes.append("`bias=false`: every bias is zero (trainable here).")
    if cfg.scale_embeddings:
        notes.append("`scale_embeddings=true`: the token table is stored multiplied by sqrt(d_model).")
    return notes


# ====================================================================================== export


def export_hf(ckpt: str | os.PathLike, out: str | os.PathLike, *, hf_class: str | None = None,
              force: bool = False) -> HFExport:
    """Export the checkpoint (or run directory) ``ckpt`` to the directory ``out``: weights and
    ``config.json``, the tokenizer files and a model card ``README.md``; checked, then published
    atomically (see the module docstring). ``hf_class``: one of ``HF_CLASSES`` (default: by family)."""
    from scratchformer.checkpoint import load_checkpoint, read_meta, resolve

    out = Path(out)
    if out.exists() and not force:
        raise HFExportError(f"{out} exists; choose another --out or add --force")
    loaded = load_checkpoint(ckpt)
    model = loaded.model
    hf_class = check_exportable(model, hf_class, loaded.train_config.task)
    transformers = _transformers()
    ckpt_dir = resolve(ckpt)
    labels = loaded.extra.get("labels")

    out.parent.mkdir(parents=True, exist_ok=True)
    with _staging(out) as tmp, _quiet(transformers):
        to_hugging_face(model, hf_class, labels=labels).save_pretrained(str(tmp), safe_serialization=True)
        for name, text in hf_tokenizer_files(loaded.tokenizer, loaded.model_config).items():
            (tmp / name).write_text(text, encoding="utf-8")

        reloaded = getattr(transformers, hf_class).from_pretrained(str(tmp)).eval()
        ids, mask = _check_inputs(loaded.model_config)
        diff, scale = compare_logits(model, reloaded, hf_class, ids, mask)
        if not diff <= TOLERANCE * max(1.0, scale):  # also catches NaN
            raise HFExportError(f"the exported {hf_class} differs from the checkpoint by {diff:.2e} (largest output "
                                f"{scale:.3g}); nothing was written")
        _check_tokenizer(loaded.tokenizer, tmp)
        result = HFExport(out, hf_class, diff, scale)
        card = model_card(ckpt_dir, read_meta(ckpt_dir), hf_class, result, _exact_notes(loaded.model_config, hf_class))
        (tmp / "README.md").write_text(card, encoding="utf-8")
        _publish(tmp, out, force)
    return result


@contextlib.contextmanager
def _staging(out: Path) -> Iterator[Path]:
    """A fresh directory beside ``out`` (same file system, so the final rename is atomic), removed
    afterwards whatever happens."""
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _publish(tmp: Path, out: Path, force: bool) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` (only with ``force``) is moved aside first and removed
    once the new one is in place."""
    if out.exists() or out.is_symlink():
        if not force:  # it appeared while we were exporting
            raise HFExportError(f"{out} exists; choose another --out or add --force")
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    else:
        os.replace(tmp, out)


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """No progress bars or info lines from transformers while it writes and reads the export."""
    logging = transformers.utils.logging
    bars, level = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bars:
            logging.enable_progress_bar()
