"""Hugging Face tokenizer files for a scratchformer tokenizer, so that ``AutoTokenizer`` gives the same ids.

The tokenizer is written as ``tokenizer.json`` (Hugging Face ``tokenizers``) with ``tokenizer_config.json``
and ``special_tokens_map.json`` declaring ``<pad> <bos> <eos> <unk>`` (ids 0-3); ``AutoTokenizer`` gives
``PreTrainedTokenizerFast``. Characters become a BPE model with no merges (each character one token, an
unseen one ``<unk>``); byte-level BPE and pretrained (WordPiece) tokenizers are copied as they are. As in
scratchformer, text that spells a special token is text (``split_special_tokens``), except for a pretrained
tokenizer, which keeps its own behaviour (``[SEP]`` in text is the separator, as scratchformer treats it).

A pretrained model's tokenizer (one read from a Hugging Face folder, or a run's made from one) keeps what its folder
said of it (``interop/folder_tokenizer.py``): its ``tokenizer_config.json`` is written again as the folder had it (its
bos, eos and pad tokens, ``add_bos_token``, the chat template, its class), less ``auto_map`` (code) and the added
tokens (``tokenizer.json`` holds them); a folder that had none gets the token texts of its ids. The chat template is
the run's own where it was tuned with one. ``generation_ids`` are the bos, every end-of-generation id and the pad
token's id for ``config.json`` (``generation_config.json`` pads with the first eos where there is no pad token: never
with id 0 standing in for one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scratchformer.families import family
from scratchformer.interop.hf_models import HFExportError, transformers_module
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import CharTokenizer, PretrainedTokenizer, Tokenizer

__all__ = ["SAMPLE_TEXTS", "backend_of", "check_tokenizer", "generation_ids", "hf_tokenizer_files"]

SAMPLE_TEXTS = [
    "To be, or not to be, that is the question:",
    "A man walks his dog in the park.\nEin Mann geht mit seinem Hund im Park spazieren.",
    "  two  spaces, a\ttab and  trailing space ",
    "Café, naïve, Straße; 3.14 + 2 = 5.14!",
    "text that spells <eos> or <pad> is text",
    "",
]


# special-token roles of transformers' tokenizers, by the token's text
_ROLES = {"<pad>": "pad_token", "<bos>": "bos_token", "<eos>": "eos_token", "<unk>": "unk_token",
          "<mask>": "mask_token", "[PAD]": "pad_token", "[UNK]": "unk_token", "[CLS]": "cls_token",
          "[SEP]": "sep_token", "[MASK]": "mask_token"}


def backend_of(tokenizer: Tokenizer) -> Any:
    """``tokenizer`` as a Hugging Face ``tokenizers.Tokenizer`` (a copy), the ``tokenizer.json`` that library reads."""
    from tokenizers import Tokenizer as Backend

    return Backend.from_str(tokenizer.hf_json())  # a copy: padding and truncation are off in it


def generation_ids(tokenizer: Tokenizer) -> dict[str, Any]:
    """``bos_token_id``, ``eos_token_id`` (every end-of-generation id: a list where there are several) and
    ``pad_token_id`` (its pad token's; None where it has none, as Llama 3's) as ``config.json`` holds them."""
    eos = list(tokenizer.eos_ids)
    pad = tokenizer.pad_id if tokenizer.has_pad else None
    return {"bos_token_id": tokenizer.own_bos_id, "eos_token_id": (eos[0] if len(eos) == 1 else eos) or None,
            "pad_token_id": pad}


_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
               "additional_special_tokens", "extra_special_tokens")
_NOT_KEPT = ("auto_map", "added_tokens_decoder", "tokenizer_file", "name_or_path")  # code; in tokenizer.json; paths


def _pretrained_settings(tokenizer: PretrainedTokenizer) -> dict[str, Any]:
    """What a pretrained tokenizer's folder said of it (``tokenizer_config.json``), to write again."""
    kept = {k: v for k, v in tokenizer.config.items() if k not in _NOT_KEPT}
    if "auto_map" in tokenizer.config:  # a class of the folder's own code: the file as it is, read by the library
        kept["tokenizer_class"] = "PreTrainedTokenizerFast"
    if not tokenizer.config:  # a folder with tokenizer.json alone: name the tokens its config.json's ids are
        kept |= {f"{role}_token": tokenizer.special_text(role) for role in ("bos", "eos", "pad")
                 if tokenizer.special_text(role) is not None}
    return kept


def hf_tokenizer_files(tokenizer: Tokenizer, model_config: ModelConfig, chat_template: str | None = None
                       ) -> dict[str, str]:
    """The files (name -> text) that make ``AutoTokenizer.from_pretrained`` give ``tokenizer``'s ids, special tokens and
    chat template: ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``. ``chat_template``: the
    run's own (an instruction-tuned run's), which replaces the tokenizer's."""
    backend = backend_of(tokenizer)
    specials = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    roles = {role: token for token, role in _ROLES.items() if token in specials}
    pretrained = isinstance(tokenizer, PretrainedTokenizer)
    config = {
        # PreTrainedTokenizerFast reads tokenizer.json as it is, in transformers 4 and 5 alike
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_config.max_len,
        # GPT batches of prompts are left-padded, as scratchformer pads them for generation
        "padding_side": "left" if family(model_config.arch).decoder_only else "right",
        "clean_up_tokenization_spaces": False,
        # scratchformer's own tokenizers read "<eos>" in text as characters; a pretrained one as its token
        "split_special_tokens": not pretrained,
        # GPT-2 would add token_type_ids to its input embeddings (through wte): never hand them to a GPT
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]
        if pretrained and not family(model_config.arch).decoder_only else ["input_ids", "attention_mask"],
        **roles,
        **(_pretrained_settings(tokenizer) if pretrained else {}),
    }
    template = chat_template or tokenizer.chat_template
    if template:
        config["chat_template"] = template
    tokens_map = {k: v for k, v in config.items() if k in _TOKEN_KEYS and v is not None}
    return {"tokenizer.json": backend.to_str(pretty=True),
            "tokenizer_config.json": json.dumps(config, indent=2, ensure_ascii=False) + "\n",
            "special_tokens_map.json": json.dumps(tokens_map, indent=2, ensure_ascii=False) + "\n"}


def check_tokenizer(tokenizer: Tokenizer, directory: Path, chat_template: str | None = None) -> int:
    """Compare ``AutoTokenizer.from_pretrained(directory)`` with ``tokenizer`` on the sample texts (and, for
    characters, on the whole alphabet), and its eos and chat template (``chat_template``: the run's own) with
    ``tokenizer``'s; returns how many texts agreed, raises on the first that differs."""
    transformers = transformers_module()
    hf = transformers.AutoTokenizer.from_pretrained(str(directory))
    texts = list(SAMPLE_TEXTS)
    if isinstance(tokenizer, CharTokenizer):
        texts.append("".join(tokenizer.chars))
    for text in texts:
        ours, theirs = tokenizer.encode(text), hf(text)["input_ids"]
        if ours != theirs:
            raise HFExportError(f"the exported tokenizer encodes {text[:30]!r} as {theirs[:12]}..., scratchformer "
                                f"as {ours[:12]}...; nothing was written")
    template = chat_template or tokenizer.chat_template
    if template and getattr(hf, "chat_template", None) != template:
        raise HFExportError("the exported tokenizer does not carry the chat template; nothing was written")
    if tokenizer.eos_ids and hf.eos_token_id != tokenizer.eos_id:
        raise HFExportError(f"the exported tokenizer's eos is id {hf.eos_token_id}, scratchformer's "
                            f"{tokenizer.eos_id}; nothing was written")
    return len(texts)
