"""Hugging Face tokenizer files for a scratchformer tokenizer, so that ``AutoTokenizer`` gives the same ids.

The tokenizer is written as ``tokenizer.json`` (Hugging Face ``tokenizers``) with ``tokenizer_config.json``
and ``special_tokens_map.json`` declaring ``<pad> <bos> <eos> <unk>`` (ids 0-3); ``AutoTokenizer`` gives
``PreTrainedTokenizerFast``. Characters become a BPE model with no merges (each character one token, an
unseen one ``<unk>``); byte-level BPE and pretrained (WordPiece) tokenizers are copied as they are. As in
scratchformer, text that spells a special token is text (``split_special_tokens``), except for a pretrained
tokenizer, which keeps its own behaviour (``[SEP]`` in text is the separator, as scratchformer treats it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scratchformer.families import family
from scratchformer.interop.hf_models import HFExportError, transformers_module
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers import SPECIAL_TOKENS, BPETokenizer, CharTokenizer, PretrainedTokenizer, Tokenizer

__all__ = ["SAMPLE_TEXTS", "check_tokenizer", "hf_tokenizer_files"]

SAMPLE_TEXTS = [
    "To be, or not to be, that is the question:",
    "A man walks his dog in the park.\nEin Mann geht mit seinem Hund im Park spazieren.",
    "  two  spaces, a\ttab and  trailing space ",
    "Café, naïve, Straße; 3.14 + 2 = 5.14!",
    "text that spells <eos> or <pad> is text",
    "",
]


def _char_backend(tokenizer: CharTokenizer) -> Any:
    """Characters as a Hugging Face ``tokenizers.Tokenizer``: a BPE model without merges splits text into
    characters and looks each up (an unseen one is ``<unk>``, one per character, as ``CharTokenizer``)."""
    from tokenizers import AddedToken, decoders, models
    from tokenizers import Tokenizer as Backend

    vocab = {token: i for i, token in enumerate(tokenizer.specials + tokenizer.chars)}
    backend = Backend(models.BPE(vocab=vocab, merges=[], unk_token=SPECIAL_TOKENS[3], fuse_unk=False))
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in tokenizer.specials])
    backend.decoder = decoders.Fuse()  # join the characters (the default decoder puts spaces between tokens)
    return backend


# special-token roles of transformers' tokenizers, by the token's text
_ROLES = {"<pad>": "pad_token", "<bos>": "bos_token", "<eos>": "eos_token", "<unk>": "unk_token",
          "<mask>": "mask_token", "[PAD]": "pad_token", "[UNK]": "unk_token", "[CLS]": "cls_token",
          "[SEP]": "sep_token", "[MASK]": "mask_token"}


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
        "padding_side": "left" if family(model_config.arch).decoder_only else "right",
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




def check_tokenizer(tokenizer: Tokenizer, directory: Path) -> int:
    """Compare ``AutoTokenizer.from_pretrained(directory)`` with ``tokenizer`` on the sample texts (and,
    for characters, on the whole alphabet); returns how many texts agreed, raises on the first that differs."""
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
    return len(texts)
