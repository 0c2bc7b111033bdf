"""What the attention explorer shows, as plain data: one input through a checkpoint's model -> a dict
ready for ``json.dumps``. The web server (``server.py``) only moves these dicts; tests call them directly.

    view = explore(ckpt, "abcdefg")                      # ckpt = checkpoints.load_checkpoint(DIR)
    view["attention"][0]["weights"][layer][head][q][k]   # the weight query q gives key k (§3.2.1)

The attention weights are the reference path's softmax(QK^T / sqrt(d_k)), recorded by
``nn.recording.attention_maps`` (the same numbers ``scratchformer plot attention`` draws), rounded to
``DECIMALS`` places. By the family's output (the family registry), besides the maps:

- next-token (a GPT): the next token's ``top_k`` most likely candidates and a sampled continuation (``generate``);
- translation (an encoder-decoder): the output of beam search (``generation.translate_ids``), whose tokens are the
  decoder's queries; a ``target`` given instead is teacher-forced;
- classes (an encoder classifier, a GPT classifier): every class's probability (none for a masked-token pretrained
  encoder, whose head is untrained).

and ``lens``: each layer's prediction, layer by layer (the logit lens, ``lens_view.py``): the next token's
for a GPT and for the decoder of an encoder-decoder, the classes' for a classifier.

Every input is checked first: ``RequestError`` says, in one line, what is wrong (too long, an unknown
option, a value out of range); a character a character-level model never saw raises ``DataError``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from scratchformer.app.explore.lens_view import classes_lens, token_lens
from scratchformer.checkpoints import Checkpoint, load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.families import Family, family
from scratchformer.generation import generate, translate_ids
from scratchformer.nn.recording import ATTENTION_KINDS, attention_maps
from scratchformer.registry import output_name, pretrains
from scratchformer.tasks.inference import encode_checked
from scratchformer.tokenizers import BOS_ID

# Defaults for the caps on one request. Tokens: also never more than the model's max_len. The maps grow
# with layers x heads x tokens^2 numbers, so the cap keeps one answer to a few megabytes.
MAX_CHARS = 1000
MAX_TOKENS = 128
DECIMALS = 6  # enough that the rounding is invisible, few enough to keep the JSON small

# Each kind of attention's title; a model of two stacks names the stack of its self-attention ("encoder ...").
VIEW_TITLES = {"encoder.self_attn": "self-attention", "decoder.self_attn": "masked self-attention",
               "decoder.cross_attn": "cross-attention (decoder -> encoder)"}


class RequestError(ValueError):
    """An input or option the explorer refuses; ``str(err)`` is one line for the user."""


@dataclass(frozen=True)
class Limits:
    """Caps on one request. ``max_tokens`` is further capped by the model's ``max_len``."""

    max_chars: int = MAX_CHARS
    max_tokens: int = MAX_TOKENS

    def __post_init__(self) -> None:
        if self.max_chars < 1 or self.max_tokens < 1:
            raise ValueError(f"limits must be positive, got max_chars={self.max_chars}, max_tokens={self.max_tokens}")

    def tokens_for(self, ckpt: Checkpoint) -> int:
        return min(self.max_tokens, ckpt.model_config.max_len)


DEFAULT_LIMITS = Limits()


# One table for every option the page can send: (the families it applies to, as the family registry answers, type,
# default, low, high). None as a default means "not set" (no top-k filter, no teacher-forced target).
_GENERATES, _TRANSLATES = attrgetter("generates"), attrgetter("translates")
OPTIONS: dict[str, tuple[Callable[[Family], bool], type, Any, float | None, float | None]] = {
    "top_k": (_GENERATES, int, 10, 1, 50),                # next-token candidates listed
    "max_new_tokens": (_GENERATES, int, 40, 0, 200),      # length of the sampled continuation
    "temperature": (_GENERATES, float, 0.8, 0.05, 5.0),
    "sample_top_k": (_GENERATES, int, None, 1, 1000),     # top-k filter of the sampling
    "seed": (_GENERATES, int, 0, 0, 2**31 - 1),
    "beam": (_TRANSLATES, int, 4, 1, 8),
    "length_penalty": (_TRANSLATES, float, 0.6, 0.0, 2.0),
    "target": (_TRANSLATES, str, None, None, None),
}


def default_options(arch: str) -> dict[str, Any]:
    """The options of a model of family ``arch`` and their defaults."""
    return {name: spec[2] for name, spec in OPTIONS.items() if spec[0](family(arch))}


def parse_request(payload: Any, ckpt: Checkpoint, limits: Limits = DEFAULT_LIMITS) -> tuple[str, dict[str, Any]]:
    """A request body (decoded JSON) -> ``(text, options)``, every field checked; ``RequestError`` else.

    ``{"text": "abc", "beam": 2}``: ``text`` is required; the other fields are the options of the
    checkpoint's family (``OPTIONS``), each optional."""
    if not isinstance(payload, dict):
        raise RequestError("the request body must be a JSON object such as {\"text\": \"...\"}")
    if "text" not in payload:
        raise RequestError("missing field 'text'")
    arch = ckpt.model_config.arch
    options = default_options(arch)
    for name, value in payload.items():
        if name == "text":
            continue
        if name not in options:
            allowed = ", ".join(["text", *options])
            raise RequestError(f"unknown field {name!r} for {family(arch).title}; allowed: {allowed}")
        options[name] = _check_option(name, value)
    if options.get("target") is not None:
        check_text(options["target"], limits.max_chars, "target")
    return check_text(payload["text"], limits.max_chars), options


def _check_option(name: str, value: Any) -> Any:
    _, kind, default, low, high = OPTIONS[name]
    if value is None:
        return default
    if kind is str:
        if not isinstance(value, str):
            raise RequestError(f"{name} must be a string")
        return value
    # bool is an int in Python, and 2.0 is not the 2 a user meant to be an int: refuse both
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise RequestError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {repr(value)[:40]}")
    if not (low <= value <= high):  # also refuses NaN
        raise RequestError(f"{name}={value} is out of range [{low}, {high}]")
    return kind(value)


def check_text(text: Any, max_chars: int = MAX_CHARS, field: str = "text") -> str:
    """``text`` if it is a non-empty string of at most ``max_chars`` characters; ``RequestError`` else."""
    if not isinstance(text, str):
        raise RequestError(f"'{field}' must be a string")
    if not text:
        raise RequestError(f"'{field}' is empty: type an input")
    if len(text) > max_chars:
        what = "input" if field == "text" else field
        raise RequestError(f"the {what} is {len(text)} characters; the explorer takes at most {max_chars}")
    return text


def _tokens(ckpt: Checkpoint, text: str, what: str, limit: int, **kw: Any) -> list[int]:
    ids = encode_checked(ckpt.tokenizer, text, **kw)
    if not ids:
        raise RequestError(f"the {what} has no tokens")
    if len(ids) > limit:
        raise RequestError(f"the {what} is {len(ids)} tokens; the explorer takes at most {limit} for this model "
                           f"(max_len {ckpt.model_config.max_len})")
    return ids


def _labels(ckpt: Checkpoint, ids: list[int]) -> list[str]:
    return [ckpt.tokenizer.token_label(i) for i in ids]


def _rounded(x: torch.Tensor) -> list:
    return np.round(x.double().numpy(), DECIMALS).tolist()


def _views(arch: str, maps: dict[str, torch.Tensor], labels: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Group ``{"decoder.layers.0.cross_attn": (1, H, T, S), ...}`` by kind of attention, layers in order:
    one view per kind with ``weights[layer][head][query][key]``. ``labels``: each stack's tokens; a
    stack's self-attention has them as queries and keys, cross-attention queries the decoder's tokens
    and keys the encoder's."""
    views = []
    for kind in ATTENTION_KINDS:
        stack, attn = kind.split(".")
        layers = []
        while (name := f"{stack}.layers.{len(layers)}.{attn}") in maps:
            layers.append(maps[name][0])  # (H, T, S) of the one example
        if layers:
            keys = labels["encoder"] if attn == "cross_attn" else labels[stack]
            title = VIEW_TITLES[kind] if attn == "cross_attn" or not family(arch).two_stacks else \
                f"{stack} {VIEW_TITLES[kind]}"
            views.append({"kind": kind, "title": title, "queries": labels[stack],
                          "keys": keys, "weights": _rounded(torch.stack(layers))})  # (L, H, T, S)
    return views


def model_info(ckpt: Checkpoint, limits: Limits = DEFAULT_LIMITS, name: str | None = None) -> dict[str, Any]:
    """What the page shows about the model before any input: family, sizes, options and caps."""
    cfg, entry = ckpt.model_config, family(ckpt.model_config.arch)
    info: dict[str, Any] = {
        "name": name, "family": cfg.arch, "family_name": entry.title, "output": entry.output, "task": ckpt.task,
        "output_name": output_name(ckpt.task),
        "step": ckpt.step, "parameters": sum(p.numel() for p in ckpt.model.parameters()),
        "d_model": cfg.d_model, "n_heads": cfg.n_heads, "max_len": cfg.max_len,
        "layers": {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers} if entry.two_stacks
        else {entry.stacks[0]: cfg.n_layers},
        "tokenizer": type(ckpt.tokenizer).__name__, "vocab_size": ckpt.tokenizer.vocab_size,
        "options": default_options(cfg.arch),
        "limits": {"max_chars": limits.max_chars, "max_tokens": limits.tokens_for(ckpt)},
    }
    if entry.classifies:
        info["labels"] = class_labels(ckpt)
    return info


def class_labels(ckpt: Checkpoint) -> list[str] | None:
    if pretrains(ckpt.task):
        return None  # its classification head was never trained
    return list(ckpt.extra.get("labels") or [str(i) for i in range(ckpt.model_config.n_classes)])


@torch.no_grad()
def explore(ckpt: Checkpoint, text: str, limits: Limits = DEFAULT_LIMITS, **options: Any) -> dict[str, Any]:
    """One input through the checkpoint's model -> tokens, every layer's and head's attention, and the
    family's output (see the module docstring). ``options``: ``OPTIONS`` of the family, checked as a
    request's are; missing ones take their defaults."""
    arch = ckpt.model_config.arch
    entry = family(arch)
    text, options = parse_request({"text": text, **options}, ckpt, limits)
    limit = limits.tokens_for(ckpt)
    model = ckpt.model
    result: dict[str, Any] = {"family": arch, "output": entry.output, "input": text, "options": options,
                              "lens_stack": entry.parts.blocks.split(".")[0]}
    if entry.translates:
        src = _tokens(ckpt, text, "input", limit, add_eos=True)
        if options["target"] is not None:
            out = _tokens(ckpt, options["target"], "target", limit - 1)
            result["target"] = {"text": options["target"], "tokens": _labels(ckpt, out), "token_ids": out}
        else:
            out = translate_ids(model, [src], beam=options["beam"], length_penalty=options["length_penalty"])[0]
            result["translation"] = {"text": ckpt.tokenizer.decode(out), "tokens": _labels(ckpt, out), "token_ids": out,
                                     "beam": options["beam"], "length_penalty": options["length_penalty"]}
        # The decoder reads <bos> and the output but its last token (which it predicts last). A long
        # output is cut to the cap, and the page says so.
        tgt = ([BOS_ID] + out)[:limit]
        result["truncated_target"] = len(out) + 1 > limit
        maps = attention_maps(model, src=torch.tensor([src]), tgt=torch.tensor([tgt]))
        labels = {"encoder": _labels(ckpt, src), "decoder": _labels(ckpt, tgt)}
        result["tokens"], result["token_ids"] = labels["encoder"], src
        result["attention"] = _views(arch, maps, labels)
        result["lens"] = token_lens(ckpt, labels["decoder"], src=torch.tensor([src]), tgt=torch.tensor([tgt]))
        return result

    ids = _tokens(ckpt, text, "input", limit)
    input_ids = torch.tensor([ids])
    maps = attention_maps(model, input_ids=input_ids)
    labels = _labels(ckpt, ids)
    result["tokens"], result["token_ids"] = labels, ids
    result["attention"] = _views(arch, maps, {entry.stacks[0]: labels})
    if entry.generates:
        probs = model(input_ids)[0, -1].float().softmax(-1)  # (V,): the distribution of the next token
        top = torch.topk(probs, min(options["top_k"], probs.numel()))
        result["next_tokens"] = [{"id": int(i), "token": ckpt.tokenizer.token_label(int(i)), "prob": round(float(p), 6)}
                                 for p, i in zip(top.values, top.indices)]
        out = generate(model, input_ids, options["max_new_tokens"], do_sample=True,
                       temperature=options["temperature"], top_k=options["sample_top_k"], seed=options["seed"])
        new = out[0, len(ids):].tolist()
        result["continuation"] = {"text": ckpt.tokenizer.decode(new), "tokens": _labels(ckpt, new), "token_ids": new}
        result["lens"] = token_lens(ckpt, labels, input_ids)
    else:
        labels_out = class_labels(ckpt)
        result["lens"] = classes_lens(ckpt, input_ids, labels_out)
        if labels_out is None:
            result["classes"] = None
            result["note"] = ("a masked-token pretrained encoder: its classification head is untrained, so no "
                              "class probabilities are shown")
        else:
            probs = model(input_ids).float().softmax(-1)[0]
            result["classes"] = [{"label": lab, "prob": round(float(p), 6)} for lab, p in zip(labels_out, probs)]
    return result


def load_explorable(path: str | Path) -> Checkpoint:
    """The checkpoint at ``path`` if the explorer reads its family (every family that reads text);
    ``CheckpointError`` for a bad checkpoint, ``ConfigError`` for an image classifier."""
    ckpt = load_checkpoint(path)
    if family(ckpt.model_config.arch).reads_pixels:
        raise ConfigError(f"the attention explorer reads text; draw {family(ckpt.model_config.arch).title}'s "
                          "attention with scratchformer plot attention --ckpt RUN --image FILE --out attention.png")
    ckpt.check_tokenizer("explore")
    return ckpt


def checkpoint_name(path: str | Path) -> str:
    """A short name for the page's header: the run's and the checkpoint's folder (``copy/best``); a Hugging Face
    folder's own name (``Qwen3-0.6B``), not its parent's."""
    from scratchformer.interop.hf_folder import is_hf_folder

    path = Path(path).resolve()
    return path.name if is_hf_folder(path) else "/".join(path.parts[-2:])


__all__ = ["DECIMALS", "DEFAULT_LIMITS", "MAX_CHARS", "MAX_TOKENS", "OPTIONS", "Limits", "RequestError",
           "checkpoint_name", "class_labels", "default_options", "explore", "load_explorable", "model_info",
           "parse_request"]
