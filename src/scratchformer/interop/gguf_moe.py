"""A GPT with experts (``nn/experts.py``) as llama.cpp's ``qwen3moe``: what it reads, its tensors and keys.

llama.cpp's qwen3moe puts a mixture of experts in every layer and always renormalises the top k's weights, so a
model with a dense layer among sparse ones (``dense_layers``, Qwen3-MoE's ``mlp_only_layers``) or with
``experts_norm_topk=false`` is refused, saying so. The router is ``ffn_gate_inp`` (written in float32, as llama.cpp's
own converter keeps it), each layer's experts three 3-D tensors ``ffn_{gate,up,down}_exps`` ``(E, rows, cols)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def moe_problems(cfg: Any) -> list[str]:
    """What llama.cpp's qwen3moe does not read in a GPT with experts, each with why."""
    bad = []
    if cfg.dense_layers:
        bad.append(f"dense_layers={cfg.dense_layers} (a dense layer among sparse ones, which it does not read)")
    if not cfg.experts_norm_topk:
        bad.append("experts_norm_topk=False (it always renormalises the top k's weights)")
    return bad


def expert_tensors(i: int, moe: Any) -> dict[str, np.ndarray]:
    """Layer ``i``'s mixture of experts as qwen3moe's tensors."""
    def stacked(attr: str) -> np.ndarray:
        return np.stack([getattr(expert, attr).weight.detach().float().cpu().numpy() for expert in moe.experts])
    return {f"blk.{i}.ffn_gate_inp.weight": moe.router.weight.detach().float().cpu().numpy(),
            f"blk.{i}.ffn_gate_exps.weight": stacked("linear1"), f"blk.{i}.ffn_up_exps.weight": stacked("linear3"),
            f"blk.{i}.ffn_down_exps.weight": stacked("linear2")}


def add_expert_keys(writer: Any, cfg: Any) -> None:
    writer.add_expert_count(cfg.n_experts)
    writer.add_expert_used_count(cfg.experts_top_k)
    writer.add_expert_feed_forward_length(cfg.expert_d_ff or cfg.d_ff)
