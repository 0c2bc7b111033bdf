"""Llama 3's rotary scaling: the slow rotations stretched so that a model trained on short texts reads long ones.

Rotary positions (``embedding.RotaryEmbedding``) turn the dimension pair j of a head by ``p * f_j`` at position
p, with frequencies ``f_j = base^(-2j / D)``. A pair whose wavelength ``2 pi / f_j`` is longer than the texts the
model was first trained on (``original_max_position_embeddings``) never completed a turn in training; Llama 3.1
divides those frequencies by ``factor`` (stretching their wavelengths past the new context), keeps the fast ones
(wavelength below ``original / high_freq_factor``) as they are, and blends the two in between::

    wavelength < original / high_freq_factor          f_j                  (fast: unchanged)
    wavelength > original / low_freq_factor           f_j / factor         (slow: stretched)
    otherwise, s = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor):
                                                      (1 - s) f_j / factor + s f_j

The only scaling supported (``rope_scaling={"rope_type": "llama3", ...}``); the others are refused.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scratchformer.errors import ConfigError

if TYPE_CHECKING:  # the config checks run without torch (the command line starts without it)
    from torch import Tensor

ROPE_SCALING_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def check_rope_scaling(scaling: Any, positional: str = "rotary") -> None:
    """A ``rope_scaling`` value: Llama 3's (``rope_type`` ``"llama3"``) with its four numbers, for rotary positions;
    else ``ConfigError``."""
    if positional != "rotary":
        raise ConfigError(f"rope_scaling applies to positional='rotary' only, not {positional!r}")
    if not isinstance(scaling, dict):
        raise ConfigError(f"rope_scaling={scaling!r} must be a table of the scaling's settings")
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind != "llama3":
        raise ConfigError(f"rope_scaling of type {kind!r} is not supported; supported: llama3")
    bad = [k for k in ROPE_SCALING_KEYS if isinstance(scaling.get(k), bool)
           or not isinstance(scaling.get(k), (int, float)) or scaling[k] <= 0]
    if bad:
        raise ConfigError(f"rope_scaling (llama3) needs a positive number for {', '.join(bad)}")
    if scaling["high_freq_factor"] <= scaling["low_freq_factor"]:
        raise ConfigError("rope_scaling (llama3): high_freq_factor must be above low_freq_factor")


def llama3_frequencies(inv_freq: Tensor, scaling: dict[str, Any]) -> Tensor:
    """The rotary frequencies ``(D/2,)`` scaled as Llama 3 scales them (module docstring)."""
    import torch

    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    s = (original / wavelength - low) / (high - low)
    blended = (1 - s) * inv_freq / factor + s * inv_freq
    scaled = torch.where(wavelength > original / low, inv_freq / factor, blended)
    return torch.where(wavelength < original / high, inv_freq, scaled)
