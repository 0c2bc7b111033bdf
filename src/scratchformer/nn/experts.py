"""A mixture of experts (Shazeer et al. 2017; Switch Transformer, Fedus et al. 2021; Qwen3-MoE): a feed-forward
block whose weights grow without the work per token growing.

E feed-forward networks (the experts, each the block of ``feedforward.py``), and a router, one linear layer
W_r (C -> E) without bias. For a token x::

    p = softmax(x W_r)                          the router's probability of each expert          (E)
    S = TopK(p, k)                              the k experts the token goes to
    g_i = p_i  (or p_i / sum_{j in S} p_j)      each chosen expert's weight, renormalised with ``norm_topk``
    y = sum_{i in S} g_i E_i(x)                 the chosen experts' outputs, weighted

Only k of the E experts run on a token: with k = 2 of E = 8 a layer holds 8 feed-forwards' weights and does 2 of
their work. ``readable`` is the equation as written (every expert on every token, g zero outside the top k: E
times the work); ``grouped``, the path the model takes, runs each expert once on the tokens routed to it.

Left alone, a router sends most tokens to a few experts that then learn fastest. The load-balancing loss (Switch
Transformer, equations 4-6, as ``transformers``' ``load_balancing_loss_func`` computes it over every sparse layer)
is E sum_i f_i P_i, with f_i the share of the (token, choice) pairs sent to expert i and P_i the router's mean
probability of i; it is k when the tokens spread evenly, more when they gather. Training adds ``router_aux_coef``
times it to the loss (``router_aux_loss``), and the run's train rows log it as ``router_aux``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.nn.expert_settings import sparse_layers
from scratchformer.nn.feedforward import FeedForward


class MixtureOfExperts(nn.Module):
    """Router + E experts. ``(B, T, C) -> (B, T, C)``; each call keeps its router logits (``router_logits``, for the
    load-balancing loss) and how many tokens each expert took (``tokens_per_expert``)."""

    def __init__(self, d_model: int, d_ff: int, n_experts: int, top_k: int, activation: str = "swiglu",
                 bias: bool = False, norm_topk: bool = True) -> None:
        super().__init__()
        self.top_k, self.norm_topk = top_k, norm_topk
        self.router = nn.Linear(d_model, n_experts, bias=False)  # W_r: (C) -> (E)
        self.experts = nn.ModuleList(FeedForward(d_model, d_ff, activation, bias) for _ in range(n_experts))
        self.fast = True  # False: the readable path (every expert on every token)
        self.router_logits: Tensor | None = None  # (B T, E) of the last call
        self.tokens_per_expert: Tensor | None = None  # (E,) of the last call

    def route(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``x (N, C)`` -> the chosen weights g ``(N, k)``, their experts S ``(N, k)``, the router logits ``(N, E)``."""
        logits = self.router(x)  # (N, E)
        p = F.softmax(logits, dim=-1, dtype=torch.float)  # in float32, as transformers
        g, chosen = torch.topk(p, self.top_k, dim=-1)  # (N, k): the k largest probabilities, largest first
        if self.norm_topk:
            g = g / g.sum(dim=-1, keepdim=True)  # the k weights sum to 1
        return g.to(x.dtype), chosen, logits

    def readable(self, x: Tensor, g: Tensor, chosen: Tensor) -> Tensor:
        """y = sum_i g_i E_i(x), as written: every expert on every token, g_i zero outside the token's top k."""
        gates = torch.zeros(x.size(0), len(self.experts), dtype=g.dtype, device=x.device)
        gates = gates.scatter(1, chosen, g)  # (N, E): each token's weight for each expert, zero but for its k
        outputs = torch.stack([expert(x) for expert in self.experts], dim=1)  # (N, E, C): E_i(x) for every i
        return (gates.unsqueeze(-1) * outputs).sum(dim=1)  # (N, C)

    def grouped(self, x: Tensor, g: Tensor, chosen: Tensor) -> Tensor:
        """The same sum, each expert run once on the tokens routed to it (k/E of ``readable``'s work)."""
        y = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            rows, slot = torch.where(chosen == i)  # the tokens that chose expert i, and as which of their k
            if rows.numel():
                y.index_add_(0, rows, expert(x[rows]) * g[rows, slot, None])
        return y

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # (N = B T, C): the router sees each token alone
        g, chosen, self.router_logits = self.route(flat)
        with torch.no_grad():
            self.tokens_per_expert = torch.bincount(chosen.flatten(), minlength=len(self.experts))
        y = self.grouped(flat, g, chosen) if self.fast else self.readable(flat, g, chosen)
        return y.reshape(shape)


def feed_forward(cfg: Any, layer: int) -> nn.Module:
    """Layer ``layer``'s feed-forward: a mixture of experts where the config has experts there, else the dense one."""
    if layer in sparse_layers(cfg):
        return MixtureOfExperts(cfg.d_model, cfg.expert_d_ff or cfg.d_ff, cfg.n_experts, cfg.experts_top_k,
                                cfg.activation, cfg.bias, cfg.experts_norm_topk)
    return FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.bias)


def load_balancing_loss(router_logits: Sequence[Tensor], n_experts: int, top_k: int,
                        attention_mask: Tensor | None = None) -> Tensor:
    """E sum_i f_i P_i over the sparse layers' router logits (each ``(B T, E)``), padding left out where
    ``attention_mask (B, T)`` says (``transformers``' ``load_balancing_loss_func``, the same sums)."""
    counts = torch.zeros(n_experts, device=router_logits[0].device)  # (token, choice) pairs sent to each expert
    probs = torch.zeros(n_experts, device=router_logits[0].device)  # the router's probabilities of each, summed
    rows = torch.zeros((), device=router_logits[0].device)
    keep = None if attention_mask is None else attention_mask.reshape(-1, 1).float()  # (B T, 1)
    for logits in router_logits:
        p = F.softmax(logits.float(), dim=-1)  # (N, E)
        chosen = torch.topk(p, top_k, dim=-1).indices  # (N, k)
        one_hot = F.one_hot(chosen, n_experts).float().sum(dim=1)  # (N, E): 1 where the token chose the expert
        if keep is not None:
            one_hot, p = one_hot * keep, p * keep
        counts, probs = counts + one_hot.sum(dim=0), probs + p.sum(dim=0)
        rows = rows + (keep.sum() if keep is not None else p.size(0))
    return n_experts * torch.sum((counts / rows) * (probs / rows))


def moe_blocks(model: nn.Module) -> list[MixtureOfExperts]:
    """The model's mixtures of experts, in layer order (through any wrapper: DDP, LoRA, compile)."""
    return [m for m in model.modules() if isinstance(m, MixtureOfExperts)]


def router_aux_loss(model: nn.Module, attention_mask: Tensor | None = None) -> Tensor | None:
    """The load-balancing loss of the model's last forward pass, or None for a model without experts."""
    blocks = moe_blocks(model)
    logits = [b.router_logits for b in blocks if b.router_logits is not None]
    if not logits:
        return None
    return load_balancing_loss(logits, len(blocks[0].experts), blocks[0].top_k, attention_mask)
