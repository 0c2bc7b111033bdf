"""A Hugging Face folder's tokenizer, whole: its ``tokenizer.json`` and what the folder's other files say of it.

    tokenizer.json           the tokenizer itself (vocabulary, merges, word splitting, post-processor)
    tokenizer_config.json    its bos, eos and pad tokens by their text, whether to add bos or eos, the chat template
    chat_template.jinja      the chat template, where the folder keeps it in a file of its own
    config.json              bos_token_id, eos_token_id (one id, or every end-of-generation id), pad_token_id
    generation_config.json   eos_token_id, pad_token_id: where generation stops, what it pads with

They are read as ``transformers`` 5 reads them, so that ``encode`` gives ``AutoTokenizer``'s ids:

- **bos, eos, pad**: the tokens ``tokenizer_config.json`` names, else ``config.json``'s ids (a null token, Qwen3's
  bos, falls back to ``config.json``'s id: it begins an empty prompt, as llama.cpp's converter writes it).
- **every end-of-generation id** (``eos_ids``): ``config.json``'s, ``generation_config.json``'s and the eos, each once,
  in that order (Llama 3.1 Instruct: ``[128001, 128008, 128009]``, its eos ``<|eot_id|>`` among them).
- **whether bos or eos is added**: the post-processor in ``tokenizer.json`` decides (Llama 3's adds
  ``<|begin_of_text|>``), unless ``tokenizer_config.json`` says ``add_bos_token`` or ``add_eos_token``: then, as
  ``transformers`` does, a post-processor that adds exactly those replaces it.

What was read travels with the tokenizer (``PretrainedTokenizer.config``, ``eos_ids``), into every run made from the
folder and every export of one. A file that is not JSON, or a token named that the vocabulary lacks, is refused in
one line (``FolderError``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers.pretrained import PretrainedTokenizer

ROLES = ("bos", "eos", "pad")


def _json(path: Path) -> dict[str, Any]:
    """A JSON object file, ``{}`` where there is none; ``FolderError`` naming the line and column where it breaks."""
    from scratchformer.interop.hf_folder import FolderError

    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FolderError(f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise FolderError(f"{path} cannot be read ({err})") from None
    if not isinstance(data, dict):
        raise FolderError(f"{path} is not a JSON object")
    return data


def _ids(value: Any) -> list[int]:
    """One id or a list of ids, as config files write them."""
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]


def special_ids(backend: Any, settings: dict[str, Any], hf: dict[str, Any], generation: dict[str, Any],
                where: Path) -> dict[str, Any]:
    """``bos_id``, ``eos_id``, ``pad_id`` and ``eos_ids`` by the rules of the module docstring (those it has)."""
    from scratchformer.interop.hf_folder import FolderError

    vocab = backend.get_vocab_size(with_added_tokens=True)
    ids: dict[str, Any] = {}
    for role in ROLES:
        named = settings.get(f"{role}_token")
        named = named.get("content") if isinstance(named, dict) else named
        if isinstance(named, str):
            if backend.token_to_id(named) is None:
                raise FolderError(f"{where} names {role}_token {named!r}, which tokenizer.json does not hold")
            ids[f"{role}_id"] = backend.token_to_id(named)
            continue
        known = [i for i in _ids(hf.get(f"{role}_token_id")) if 0 <= i < vocab]
        if known:
            ids[f"{role}_id"] = known[0]
    if "eos_id" in ids:
        stops = [*_ids(hf.get("eos_token_id")), *_ids(generation.get("eos_token_id")), ids["eos_id"]]
        ids["eos_ids"] = list(dict.fromkeys(i for i in stops if 0 <= i < vocab))
    return ids


def _adding(backend: Any, settings: dict[str, Any]) -> None:
    """``add_bos_token`` / ``add_eos_token`` named in ``tokenizer_config.json``: the post-processor ``transformers``
    puts in place of the file's (``TokenizersBackend.update_post_processor``), the same ids."""
    from tokenizers import processors

    if "add_bos_token" not in settings and "add_eos_token" not in settings:
        return
    texts = {}
    for role in ("bos", "eos"):
        named = settings.get(f"{role}_token")
        texts[role] = named.get("content") if isinstance(named, dict) else named
    bos = texts["bos"] if settings.get("add_bos_token") and isinstance(texts["bos"], str) else None
    eos = texts["eos"] if settings.get("add_eos_token") and isinstance(texts["eos"], str) else None
    single = f"{bos + ':0 ' if bos else ''}$A:0{' ' + eos + ':0' if eos else ''}"
    pair = f"{single}{' ' + bos + ':1' if bos else ''} $B:1{' ' + eos + ':1' if eos else ''}"
    tokens = [(t, backend.token_to_id(t)) for t in (bos, eos) if t]
    backend.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=tokens)


def folder_tokenizer(folder: Path, hf: dict[str, Any], cfg: ModelConfig | None) -> PretrainedTokenizer | None:
    """The folder's tokenizer with what its other files say of it (module docstring), or None when it has no
    ``tokenizer.json``. ``hf``: its ``config.json``; ``cfg``: the model's config (the vocabulary must fit it)."""
    from tokenizers import Tokenizer as Backend

    from scratchformer.interop.hf_folder import FolderError

    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    settings = _json(folder / "tokenizer_config.json")
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        settings["chat_template"] = jinja.read_text(encoding="utf-8")
    generation = _json(folder / "generation_config.json")
    try:
        backend = Backend.from_file(str(path))
    except Exception as err:  # noqa: BLE001 - the tokenizers library's errors all mean "unreadable"
        raise FolderError(f"{path} is not a tokenizer file ({str(err).splitlines()[0] if str(err) else err})") from None
    ids = special_ids(backend, settings, hf, generation, folder / "tokenizer_config.json")
    _adding(backend, settings)
    tokenizer = PretrainedTokenizer(backend, **ids, config=settings)
    if cfg is not None and tokenizer.vocab_size > cfg.vocab_size:
        raise FolderError(f"{path} has {tokenizer.vocab_size:,} tokens, more than the model's vocab_size "
                          f"{cfg.vocab_size:,}")
    return tokenizer
