"""A model and its tokenizer written as a ``transformers`` model directory that gives the same outputs (``write_hf``;
``scratchformer export --format hf`` gathers a run's and its model card's rows: ``app/export/huggingface.py``).

    scratchformer export --format hf --ckpt RUN --out DIR
    AutoModelForCausalLM.from_pretrained(DIR)                 # a GPT
    AutoModelForSequenceClassification.from_pretrained(DIR)   # a classifier with pooling="pooler"
    AutoModel.from_pretrained(DIR)                            # an encoder alone (--hf-class BertModel)
    AutoTokenizer.from_pretrained(DIR)

What maps to what is ``interop.hf_models`` (the weights) and ``interop.hf_tokenizers`` (the tokenizer); this module
writes the directory, with a model card, and checks it. Every export is checked before it is published: the
directory is loaded back with ``from_pretrained`` and its logits compared with the checkpoint's on random inputs,
padded ones included (within 1e-5 of the largest logit's size), and the tokenizer's ids with scratchformer's on
sample texts. It is written beside ``DIR`` and renamed into place (nothing half-written is ever left), and an
existing ``DIR`` is replaced only with ``force=True`` (``--force``). Where the two still differ in use: GPT-2 has
no positions past ``max_len``, so transformers' ``generate`` stops there while scratchformer's slides a window;
called directly on a left-padded batch, GPT-2 needs ``position_ids`` counted over real tokens (its ``generate``
passes them); an input longer than ``max_len`` is cut by scratchformer at ``max_len`` ids, by transformers'
``truncation=True`` with a pretrained tokenizer's final ``[SEP]`` kept. A GPT's model card says the first two."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.atomic import publish_dir, staging_dir
from scratchformer.families import family
from scratchformer.interop.hf_models import (
    BERT_CLASSIFIER,
    BERT_ENCODER,
    GPT2_LM,
    GPT_CLASSES,
    HFExportError,
    check_exportable,
    to_hugging_face,
    transformers_module,
)
from scratchformer.interop.hf_tokenizers import check_tokenizer, generation_ids, hf_tokenizer_files
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import SPECIAL_TOKENS, Tokenizer

__all__ = ["CardRows", "HFExport", "compare_logits", "write_hf"]

# Logits may differ by float32 rounding only: this fraction of the largest logit's magnitude (at least 1).
TOLERANCE = 1e-5


@dataclass(frozen=True)
class CardRows:
    """What the caller knows of where the model came from, for the model card (``README.md``), written as given."""

    title: str  # the card's heading: the run's name
    origin: str  # follows "A `CLASS` exported by scratchformer ": "from a checkpoint trained for 800 steps (...)."
    metrics: list[str]  # the lines of its "Metrics" section (a table, or a sentence saying there is none)
    model_settings: dict[str, Any]  # its ModelConfig as saved
    train_settings: dict[str, Any]  # its training settings as saved


@dataclass
class HFExport:
    path: Path
    hf_class: str
    max_abs_diff: float  # the largest |logit difference| found by the check at export
    logit_scale: float  # the largest |logit| in that check, for scale


def _check_inputs(cfg: ModelConfig, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Random ids ``(3, T)`` and a real-token mask: row 0 full, rows 1 and 2 padded (left for a GPT, the
    way prompts are batched; right for an encoder), row 2 down to one token."""
    gen, T = torch.Generator().manual_seed(seed), min(cfg.max_len, 24)
    ids = torch.randint(len(SPECIAL_TOKENS), max(cfg.vocab_size, len(SPECIAL_TOKENS) + 1), (3, T), generator=gen)
    ids = ids.clamp(max=cfg.vocab_size - 1)
    lengths, positions = torch.tensor([T, max(1, T // 2), 1]), torch.arange(T)[None, :]
    mask = positions >= T - lengths[:, None] if family(cfg.arch).decoder_only else positions < lengths[:, None]
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
        if hf_class in GPT_CLASSES:
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


# ====================================================================================== model card


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


def model_card(card: CardRows, cfg: ModelConfig, hf_class: str, result: HFExport, exact_notes: list[str]) -> str:
    """The ``README.md`` of an export: what it is, how to load it, the check it passed, settings and metrics."""
    pipeline, auto, snippet = _USAGE[GPT2_LM if hf_class in GPT_CLASSES else hf_class]
    lines = [
        "---", "library_name: transformers", f"pipeline_tag: {pipeline}", "tags:", "- scratchformer", "---", "",
        f"# {card.title}", "", f"A `{hf_class}` exported by scratchformer {card.origin}", "",
        "## Use", "", "```python", f"from transformers import AutoTokenizer, {auto}", "",
        'tokenizer = AutoTokenizer.from_pretrained("PATH/TO/THIS/FOLDER")',
        f'model = {auto}.from_pretrained("PATH/TO/THIS/FOLDER")', snippet, "```", "",
    ]
    if hf_class == GPT2_LM:
        lines += [f"GPT-2 has positions for {cfg.max_len} tokens only: keep the prompt and the new tokens "
                  "within that (scratchformer's own `generate` slides a window past it). Batches of prompts are "
                  "padded on the left; called directly on a padded batch, the model needs "
                  "`position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)`, as `generate` passes, so that "
                  "positions count real tokens (scratchformer computes them that way).", ""]
    if hf_class == BERT_ENCODER and cfg.pooling != "pooler":
        lines += [f"The encoder alone: scratchformer's `{cfg.pooling}` pooling and classification "
                  "head are not part of `BertModel`; its `pooler_output` is zeros (the pooler's weights are zero). "
                  "Use `last_hidden_state`.", ""]
    lines += ["## Checked at export", "",
              f"Loaded back with `from_pretrained`, this model's outputs differ from scratchformer's by at most "
              f"{result.max_abs_diff:.2e} (largest output magnitude {result.logit_scale:.3g}) on random inputs with "
              "padding; the tokenizer gives scratchformer's ids on sample texts.", ""]
    if exact_notes:
        lines += ["Settings held exactly by the target although it is built differently:", "",
                  *(f"- {n}" for n in exact_notes), ""]
    lines += ["## Metrics", "", *card.metrics, "",
              "## Model settings (scratchformer `ModelConfig`)", "", *_settings_table(card.model_settings), "",
              "## Training settings (scratchformer `TrainConfig`)", "", *_settings_table(card.train_settings), ""]
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


def write_hf(model: nn.Module, cfg: ModelConfig, tokenizer: Tokenizer, out: str | os.PathLike, card: CardRows, *,
             hf_class: str | None = None, task: str = "", labels: list[str] | None = None,
             chat_template: str | None = None, force: bool = False) -> HFExport:
    """Write ``model`` (its config ``cfg``, trained for ``task``) and ``tokenizer`` to the directory ``out``: weights
    and ``config.json``, the tokenizer files (with ``chat_template``) and a model card ``README.md`` (``card``);
    checked, then published atomically (see the module docstring). ``hf_class``: one of ``HF_CLASSES`` (default:
    by family); ``labels``: a classifier's class names."""
    out = Path(out)
    if out.exists() and not force:
        raise HFExportError(f"{out} exists; choose another --out or add --force")
    hf_class = check_exportable(model, hf_class, task)
    transformers = transformers_module()
    out.parent.mkdir(parents=True, exist_ok=True)
    with staging_dir(out) as tmp, _quiet(transformers):
        ids = generation_ids(tokenizer) if hf_class in GPT_CLASSES else None  # bos, every eos, a pad
        to_hugging_face(model, hf_class, labels=labels, special_ids=ids).save_pretrained(str(tmp))
        for name, text in hf_tokenizer_files(tokenizer, cfg, chat_template).items():
            (tmp / name).write_text(text, encoding="utf-8")

        reloaded = getattr(transformers, hf_class).from_pretrained(str(tmp)).eval()
        ids, mask = _check_inputs(cfg)
        diff, scale = compare_logits(model, reloaded, hf_class, ids, mask)
        if not diff <= TOLERANCE * max(1.0, scale):  # also catches NaN
            raise HFExportError(f"the exported {hf_class} differs from the checkpoint by {diff:.2e} (largest output "
                                f"{scale:.3g}); nothing was written")
        check_tokenizer(tokenizer, tmp, chat_template)
        result = HFExport(out, hf_class, diff, scale)
        (tmp / "README.md").write_text(model_card(card, cfg, hf_class, result, _exact_notes(cfg, hf_class)),
                                       encoding="utf-8")
        if out.exists() and not force:  # it appeared while we were exporting
            raise HFExportError(f"{out} exists; choose another --out or add --force")
        publish_dir(tmp, out)
    return result


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
