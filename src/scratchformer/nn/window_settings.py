"""The sliding-window and Gemma fields of ``ModelConfig`` checked (``nn/sliding_window.py``, ``nn/norms.py`` and
``nn/layers.py`` build them): one line each. ``sliding_layers`` left out becomes every layer (or none without a window),
so the JSON written with a checkpoint lists them."""

from __future__ import annotations

from typing import Any

from scratchformer.errors import ConfigError


def check_windows(cfg: Any, decoder_only: bool) -> None:
    """``sliding_window`` (0: none) and ``sliding_layers``, ``local_rope_base``, ``attention_scale``, the two softcaps,
    ``norm_plus_one`` and ``sandwich_norm``: values in range, and only where the blocks have them."""
    window = cfg.sliding_window
    if type(window) is not int or window < 0:
        raise ConfigError(f"sliding_window={window!r} must be an integer >= 0 (0: every earlier position)")
    layers = list(range(cfg.n_layers)) if cfg.sliding_layers is None and window else cfg.sliding_layers or []
    if not isinstance(layers, (list, tuple)) or any(type(i) is not int or not 0 <= i < cfg.n_layers for i in layers):
        raise ConfigError(f"sliding_layers={layers!r} must list layers between 0 and n_layers - 1 = {cfg.n_layers - 1}")
    cfg.sliding_layers = sorted(set(layers))
    if cfg.sliding_layers and not window:
        raise ConfigError(f"sliding_layers={cfg.sliding_layers} needs sliding_window > 0 (the positions they see)")
    if window and (not decoder_only or cfg.attention != "softmax"):
        raise ConfigError(f"sliding_window={window} applies to a decoder-only family's softmax attention (arch='gpt'), "
                          f"not arch={cfg.arch!r} with attention={cfg.attention!r}")
    if cfg.local_rope_base is not None and (not isinstance(cfg.local_rope_base, (int, float))
                                            or cfg.local_rope_base <= 0 or cfg.positional != "rotary"):
        raise ConfigError(f"local_rope_base={cfg.local_rope_base!r} must be a number > 0, with positional='rotary'")
    if cfg.attention_scale is not None and (not isinstance(cfg.attention_scale, (int, float))
                                            or cfg.attention_scale <= 0):
        raise ConfigError(f"attention_scale={cfg.attention_scale!r} must be a number > 0 (or left out: 1 / sqrt(D))")
    for name in ("attention_softcap", "logit_softcap"):
        value = getattr(cfg, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name}={value!r} must be a number >= 0 (0: none)")
    if cfg.attention_softcap and cfg.attention != "softmax":
        raise ConfigError(f"attention_softcap={cfg.attention_softcap} caps softmax scores; attention='linear' has none")
    for name in ("norm_plus_one", "sandwich_norm"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name}={getattr(cfg, name)!r} must be true or false")
    if cfg.norm_plus_one and cfg.norm_type != "rmsnorm":
        raise ConfigError("norm_plus_one=true applies to norm_type='rmsnorm' (its gain 1 + w)")
    if cfg.sandwich_norm and cfg.norm != "pre":
        raise ConfigError("sandwich_norm=true needs norm='pre' (a norm before and after each sub-layer)")


def sliding(cfg: Any, layer: int) -> bool:
    """Whether layer ``layer``'s self-attention is a sliding window (``SlidingWindowAttention``)."""
    return bool(cfg.sliding_window) and layer in (cfg.sliding_layers or ())
