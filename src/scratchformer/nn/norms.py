"""The normalisation layers: LayerNorm (the paper, §3.1) and RMSNorm (Zhang & Sennrich 2019), one choice
(config field ``norm_type``) used everywhere a model normalises: around each sub-layer (``ResidualNorm``),
at the top of a pre-LN stack, after the embeddings (``embedding_norm``), and on queries and keys
(``qk_norm``).

    LayerNorm(x) = (x - mean(x)) / sqrt(var(x) + eps) * g + b        (Ba et al. 2016)
    RMSNorm(x)   = x / sqrt(mean(x^2) + eps) * g                     (no centring, no bias)

both over the last dimension. Gemma writes RMSNorm's gain as ``1 + w`` (``norm_plus_one``; ``w`` starts at 0, so
weight decay pulls the gain towards 1, not 0), and multiplies in float32 before rounding to the model's dtype.
RMSNorm skips the mean: one reduction instead of two, no bias, and in the models trained since (T5, LLaMA, the
NanoGPT speedrun) the same quality; a pre-LN residual stream does not need re-centring, only its scale held.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.nn.config import ModelConfig


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last dimension: ``(..., C) -> (..., C)``; with ``plus_one``,
    ``* (1 + weight)`` (Gemma's)."""

    def __init__(self, size: int, eps: float = 1e-5, plus_one: bool = False) -> None:
        super().__init__()
        self.eps, self.plus_one = eps, plus_one
        self.weight = nn.Parameter(torch.zeros(size) if plus_one else torch.ones(size))  # g (or g - 1), learned

    def forward(self, x: Tensor) -> Tensor:
        rms = x.float().pow(2).mean(-1, keepdim=True).add(self.eps).sqrt()  # in float32 even under bf16
        if self.plus_one:  # Gemma multiplies before rounding: (x / rms (1 + w)) in float32, then the dtype
            return (x.float() / rms * (1.0 + self.weight.float())).to(x.dtype)
        return (x.float() / rms).to(x.dtype) * self.weight

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps}" + (", plus_one=True" if self.plus_one else "")


def norm_layer(cfg: ModelConfig, size: int | None = None) -> nn.Module:
    """The model's normalisation over ``size`` features (default ``d_model``): ``cfg.norm_type``."""
    size = cfg.d_model if size is None else size
    if cfg.norm_type == "rmsnorm":
        return RMSNorm(size, eps=cfg.layer_norm_eps, plus_one=cfg.norm_plus_one)
    return nn.LayerNorm(size, eps=cfg.layer_norm_eps, bias=cfg.bias)


NORMS = (nn.LayerNorm, RMSNorm)  # for isinstance checks: "a normalisation layer"
