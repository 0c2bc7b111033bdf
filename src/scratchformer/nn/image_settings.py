"""The image fields of ``ModelConfig`` checked, for a family that reads pixels (a ViT): one line each."""

from __future__ import annotations

from typing import Any

from scratchformer.errors import ConfigError


def check_pixels(cfg: Any, no_vocab: dict[str, Any]) -> None:
    """An image model's (a ViT's) image fields checked; its sequence length and vocabulary fields set from them."""
    for name in ("image_size", "patch_size", "channels"):
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}={value!r} must be an integer >= 1")
    if cfg.patch_size > cfg.image_size:
        raise ConfigError(f"patch_size={cfg.patch_size} is larger than image_size={cfg.image_size}")
    if cfg.image_size % cfg.patch_size:
        raise ConfigError(f"image_size={cfg.image_size} is not divisible by patch_size={cfg.patch_size}: "
                          "the patches must tile the image")
    # max_len is the class token and the patches; another value than the default 512 meant another image: say so
    if cfg.max_len not in (512, cfg.n_patches + 1):
        raise ConfigError(f"max_len={cfg.max_len} does not fit a ViT: it is the class token plus the "
                          f"(image_size / patch_size)^2 = {cfg.n_patches} patches ({cfg.n_patches + 1}); "
                          "leave it out")
    cfg.max_len = cfg.n_patches + 1
    for name in ("embedding_norm", "scale_embeddings", "tie_embeddings"):
        if getattr(cfg, name) is True:
            raise ConfigError(f"{name} applies to token embeddings; arch={cfg.arch!r} has none (it reads pixels)")
    for name, value in no_vocab.items():
        if getattr(cfg, name) not in (value, type(cfg).__dataclass_fields__[name].default):
            raise ConfigError(f"{name} does not apply to arch={cfg.arch!r} (it reads pixels, not tokens)")
        setattr(cfg, name, value)
