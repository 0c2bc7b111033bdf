"""Before a run that tunes a model on prompts (``task=instruct``, ``task=dpo``: the registry's ``prompted``): can the
model it starts from read them? Checked once, before anything is read or written (``fine_tune.starting_point``).

- **Its window**: the template's own text (Alpaca's preamble and headings, or a chat template's markers), an
  instruction and an answer must fit the model's ``max_len``. A character-level model pretrained with nanoGPT's
  window of 64 characters cannot hold Alpaca's 150 characters of template: refused in one line that says what window
  to pretrain with, instead of a run whose every answer is cut off.
- **Its vocabulary**: the characters the template writes that a character-level model never saw (a book has no
  ``#``, Alpaca's headings do) are added to its vocabulary (``ModelSource.added_chars``), each a new row of its
  embedding, and the run says which; without them every prompt would read its headings as ``<unk>``. Characters of
  the user's own records that the model lacks stay a warning of the data (they are the user's to change).
"""

from __future__ import annotations

import dataclasses

from scratchformer.checkpoints import ModelSource
from scratchformer.data.templates import Template, find_template, special_texts
from scratchformer.errors import ConfigError
from scratchformer.settings.resolve import Resolved

__all__ = ["ROOM", "prompt_ready", "run_template"]

ROOM = 32  # tokens beyond the template's own: a short instruction and a short answer
WINDOW_FOR_CHARS = 512  # what to pretrain a character-level model with: the template, and a typical record


def run_template(run: Resolved, base: ModelSource) -> Template:
    """The template the run will put its records through (as ``data.records.prompt_template`` picks it): the one the
    base was tuned with, unless ``template`` names another; else the one ``template`` names (``auto``: the base
    folder's chat template, else Alpaca's)."""
    setting = run.train.template
    if base.template and not setting:
        return Template.from_dict(base.template)
    return find_template(setting or "auto", base.path)


def prompt_ready(run: Resolved, base: ModelSource) -> ModelSource:
    """``base`` as the run must start from it: with the characters its template writes added to a character-level
    vocabulary; refused in one line (``ConfigError``) when its window cannot hold the template and a short answer."""
    tokenizer = base.tokenizer()
    if tokenizer is None:
        return base  # refused where the run asks for it (session: training on text needs the model's tokenizer)
    template = run_template(run, base)
    frame = template.instruction("", "", special_texts(tokenizer))  # the template's own text, no instruction in it
    missing = tokenizer.cannot_encode(frame)
    if missing:
        if run.train.sharded:
            raise ConfigError(f"init_from={base.given} has no token for {''.join(missing)!r}, which the "
                              f"{template.name} template writes; shard=fsdp cannot add them: train without shard")
        base = dataclasses.replace(base, added_chars=tuple(missing))
        tokenizer = tokenizer.with_characters(missing)
    own = len(tokenizer.encode(frame))
    given = run.source.get("max_len", "task default") != "task default"  # a length of the user's own, else the base's
    window = min(base.config.max_len, run.model.max_len) if given else base.config.max_len
    if own + ROOM > window:
        raise ConfigError(
            f"init_from={base.given} reads {window} tokens at most, but the {template.name} template alone takes "
            f"{own}: tuning on instructions needs room for the template, an instruction and its answer. Start from "
            f"a model with a longer window (for a character-level model, pretrain with max_len={WINDOW_FOR_CHARS}: "
            "room for the template and most records)")
    return base
