"""The mixture-of-experts fields of ``ModelConfig`` checked (``nn/experts.py`` builds the block): one line each."""

from __future__ import annotations

from typing import Any

from scratchformer.errors import ConfigError


def check_experts(cfg: Any, decoder_only: bool) -> None:
    """``n_experts`` (0 = dense), ``experts_top_k``, ``expert_d_ff``, ``dense_layers``, ``experts_norm_topk`` and
    ``router_aux_coef``: integers in range, layers that exist, experts only where a decoder-only family has them."""
    for name in ("n_experts", "experts_top_k"):
        value = getattr(cfg, name)
        if type(value) is not int or value < 0:
            raise ConfigError(f"{name}={value!r} must be an integer >= 0")
    if not cfg.n_experts:
        return
    if not decoder_only:
        raise ConfigError(f"n_experts={cfg.n_experts} applies to a decoder-only family (arch='gpt'), not "
                          f"arch={cfg.arch!r}")
    if not 1 <= cfg.experts_top_k <= cfg.n_experts:
        raise ConfigError(f"experts_top_k={cfg.experts_top_k} must be between 1 and n_experts={cfg.n_experts}")
    if cfg.expert_d_ff is not None and (type(cfg.expert_d_ff) is not int or cfg.expert_d_ff < 1):
        raise ConfigError(f"expert_d_ff={cfg.expert_d_ff!r} must be an integer >= 1 (or left out: d_ff)")
    layers = cfg.dense_layers
    if not isinstance(layers, (list, tuple)) or any(type(i) is not int or not 0 <= i < cfg.n_layers for i in layers):
        raise ConfigError(f"dense_layers={layers!r} must list layers between 0 and n_layers - 1 = {cfg.n_layers - 1}")
    cfg.dense_layers = sorted(set(layers))
    if not isinstance(cfg.experts_norm_topk, bool):
        raise ConfigError(f"experts_norm_topk={cfg.experts_norm_topk!r} must be true or false")
    if not isinstance(cfg.router_aux_coef, (int, float)) or cfg.router_aux_coef < 0:
        raise ConfigError(f"router_aux_coef={cfg.router_aux_coef!r} must be a number >= 0")


def sparse_layers(cfg: Any) -> list[int]:
    """The layers whose feed-forward is a mixture of experts (none when ``n_experts`` is 0)."""
    return [i for i in range(cfg.n_layers) if cfg.n_experts and i not in cfg.dense_layers]
