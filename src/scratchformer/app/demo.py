"""Models on paper: build a model preset, count its parameters against the formula, run it (``scratchformer
demo``); the model a preset describes, for ``scratchformer explain``."""

from __future__ import annotations

import time
from typing import Any

import torch

from scratchformer.data.named import SHAPES
from scratchformer.errors import ConfigError
from scratchformer.families import family
from scratchformer.models import build_model
from scratchformer.models.lens import residual_stream
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.model_presets import PRESETS
from scratchformer.registry import TaskSpec
from scratchformer.settings.presets import preset_names
from scratchformer.settings.resolve import resolve
from scratchformer.settings.values import coerce, field_types


def model_from_preset(preset: str, overrides: dict[str, Any]) -> ModelConfig:
    """A model preset (paper-base, ...) with key=value changes to its ModelConfig fields."""
    types = field_types(ModelConfig)
    unknown = [k for k in overrides if k not in types]
    if unknown:
        raise ConfigError(f"unknown model config key {unknown[0]!r}")
    # preset(**changes), not replace(): fields derived from n_layers etc. are derived again
    return ModelConfig.preset(preset, **{k: coerce(k, v, types[k]) for k, v in overrides.items()})


def demo(preset: str, overrides: dict[str, Any], seed: int = 0) -> None:
    """Build a model, check its parameter count against the formula, run a forward pass and cached decoding."""
    torch.manual_seed(seed)
    cfg = model_from_preset(preset, overrides)
    model = build_model(cfg).eval()
    n = sum(p.numel() for p in model.parameters())
    formula = count_parameters_formula(cfg)
    print(f"preset {preset}: arch={cfg.arch} d_model={cfg.d_model} heads={cfg.n_heads} layers={cfg.n_layers} "
          f"d_ff={cfg.d_ff} norm={cfg.norm} activation={cfg.activation} positions={cfg.positional}")
    print(f"parameters: {n:,} (analytic formula: {formula:,}, {'match' if n == formula else 'MISMATCH'})")
    B, T = 2, min(16, cfg.max_len)
    ids = torch.randint(1, max(cfg.vocab_size, 2), (B, T))
    entry = family(cfg.arch)
    with torch.no_grad():
        start = time.perf_counter()
        if entry.reads_pixels:
            images = torch.rand(B, cfg.channels, cfg.image_size, cfg.image_size)
            out = model(images)
            print(f"forward: images {tuple(images.shape)} -> {cfg.n_patches} patches + a class token "
                  f"{tuple(residual_stream(model, images)[-1].shape)} -> class logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            return
        if entry.two_stacks:  # a source and a target; the decoder's cache keeps the source's keys and values
            tgt = torch.randint(1, cfg.target_vocab_size, (B, T))
            out = model(ids, tgt)
            print(f"forward: src {tuple(ids.shape)} + tgt {tuple(tgt.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            memory = model.encode(ids)
            cache = model.new_cache(B)
            steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(T)], 1)
        elif entry.generates:
            out = model(ids)
            print(f"forward: input_ids {tuple(ids.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            cache = model.new_cache(B)
            steps = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(T)], 1)
        else:
            out = model(ids)
            hidden = residual_stream(model, ids)[-1]
            print(f"forward: input_ids {tuple(ids.shape)} -> hidden {tuple(hidden.shape)} -> class logits "
                  f"{tuple(out.shape)} in {1000 * (time.perf_counter() - start):.1f} ms")
            return
    diff = (steps - out).abs().max().item()
    print(f"KV-cached decoding, one token at a time: max |cached - full| = {diff:.2e}")


def explain_config(preset: str, overrides: dict[str, Any]) -> tuple[ModelConfig, str, TaskSpec | None]:
    """The model of a model preset (paper-base, ...) or of a training preset (copy, multi30k, ...) with
    key=value changes; returns it, a note on what was assumed of the data, and the training task (None for a
    model preset)."""
    if preset in PRESETS:
        return model_from_preset(preset, overrides), "", None
    if preset not in preset_names():
        raise ConfigError(f"unknown preset {preset!r}; model presets: {', '.join(sorted(PRESETS))}; "
                          f"training presets: {', '.join(preset_names())}")
    vocab = overrides.pop("vocab_size", None)
    run = resolve(preset=preset, overrides=overrides)
    train, model = run.train, run.model
    if train.init_from:
        raise ConfigError(f"preset {preset} fine-tunes a pretrained model; see `scratchformer info` of its checkpoint")
    known = SHAPES.get(train.dataset or "", {})  # what the preset's named dataset is known to hold
    if family(model.arch).reads_pixels:  # no vocabulary; the classes come from the data
        if "n_classes" in run.settings:
            return model, "", run.task
        classes = known.get("classes", model.n_classes)  # the named dataset's, else the config's own
        return model.replace(n_classes=classes), (f"n_classes={classes} assumed (the real number comes from the "
                                                  "data; set n_classes=N to change)"), run.task
    if vocab is None:  # the real vocabulary comes from the tokenizer trained on the data
        from scratchformer.tokenizers import SPECIAL_TOKENS
        from scratchformer.tokenizers.train import known_vocab_size

        vocab = known_vocab_size(train.tokenizer, train.bpe_vocab_size)  # BPE's, as set
        if vocab is None and run.task.makes_own_data:  # a character for each of its symbols
            vocab = train.n_symbols + len(SPECIAL_TOKENS)
        elif vocab is None:  # a character vocabulary: Tiny Shakespeare's 65 characters, say
            vocab = known["characters"] + len(SPECIAL_TOKENS) if "characters" in known else model.vocab_size
        note = f"vocab_size={vocab} assumed (the real one comes from the tokenizer; set vocab_size=N to change)"
    else:
        note = ""
    return model.replace(vocab_size=int(vocab)), note, run.task
