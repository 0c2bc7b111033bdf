"""Qwen3-MoE (``Qwen3MoeForCausalLM``): Qwen3's blocks with a mixture of experts (``nn/experts.py``) in the layers its
config makes sparse. Read by ``hf_folder.py`` and written by ``hf_llama.py`` with these mappings, each written once.

config.json                                 ModelConfig
    num_experts (num_local_experts)             n_experts
    num_experts_per_tok                         experts_top_k
    moe_intermediate_size                       expert_d_ff (the dense layers keep intermediate_size: d_ff)
    norm_topk_prob                              experts_norm_topk
    router_aux_loss_coef                        router_aux_coef
    mlp_only_layers, decoder_sparse_step        dense_layers: a layer i is sparse unless it is in mlp_only_layers
                                                or (i + 1) is not a multiple of decoder_sparse_step

Names (theirs under ``model.layers.i.``, ours under ``decoder.layers.i.``; ``j`` is the expert)::

    mlp.gate.weight                             ffn.router.weight  (W_r: E x C)
    mlp.experts.j.{gate,up,down}_proj.weight    ffn.experts.j.linear1 / linear3 / linear2
"""

from __future__ import annotations

from typing import Any

QWEN3_MOE_LM = "Qwen3MoeForCausalLM"
FFN_NAMES = (("linear1", "gate_proj"), ("linear3", "up_proj"), ("linear2", "down_proj"))


def n_experts(hf: dict[str, Any]) -> int:
    return int(hf.get("num_experts") or hf.get("num_local_experts") or 0)


def moe_settings(hf: dict[str, Any]) -> dict[str, Any]:
    """The ``ModelConfig`` fields of a Qwen3-MoE ``config.json`` (module docstring)."""
    E, L = n_experts(hf), hf["num_hidden_layers"]
    step, only = int(hf.get("decoder_sparse_step", 1) or 1), list(hf.get("mlp_only_layers") or [])
    dense = [i for i in range(L) if i in only or not (E > 0 and (i + 1) % step == 0)]
    return dict(n_experts=E, experts_top_k=int(hf.get("num_experts_per_tok", 2)), dense_layers=dense,
                expert_d_ff=int(hf["moe_intermediate_size"]), experts_norm_topk=bool(hf.get("norm_topk_prob", False)),
                router_aux_coef=float(hf.get("router_aux_loss_coef", 0.001)))


def ffn_plan(cfg: Any, i: int, kinds: list[str]) -> list[tuple[str, list[str], bool]]:
    """Where layer ``i``'s feed-forward tensors come from: the dense block's three, or the router and each expert's."""
    from scratchformer.nn.expert_settings import sparse_layers

    o, p = f"decoder.layers.{i}.ffn.", f"model.layers.{i}.mlp."
    if i not in sparse_layers(cfg):
        return [(o + f"{ours}.{kind}", [p + f"{theirs}.{kind}"], False) for kind in kinds for ours, theirs in FFN_NAMES]
    plan = [(o + "router.weight", [p + "gate.weight"], False)]
    for j in range(cfg.n_experts):
        plan += [(o + f"experts.{j}.{ours}.{kind}", [p + f"experts.{j}.{theirs}.{kind}"], False)
                 for kind in kinds for ours, theirs in FFN_NAMES]
    return plan


def moe_config_fields(cfg: Any) -> dict[str, Any]:
    """The ``Qwen3MoeConfig`` arguments of a GPT with experts (the dense layers named in ``mlp_only_layers``)."""
    return dict(num_experts=cfg.n_experts, num_experts_per_tok=cfg.experts_top_k,
                moe_intermediate_size=cfg.expert_d_ff or cfg.d_ff, norm_topk_prob=cfg.experts_norm_topk,
                mlp_only_layers=list(cfg.dense_layers), decoder_sparse_step=1,
                router_aux_loss_coef=cfg.router_aux_coef)


def as_in_memory(state: dict[str, Any], keys: Any) -> dict[str, Any]:
    """``state`` (their names, one tensor per expert, as folders store them) in the layout of a ``transformers`` model
    whose state-dict names are ``keys``: transformers 5 holds a layer's experts as two 3-D tensors, ``gate_up_proj``
    ``(E, 2F, C)`` (each expert's gate rows, then its up rows) and ``down_proj`` ``(E, C, F)``, and writes them per
    expert again when it saves."""
    import torch

    fused = [k.removesuffix("gate_up_proj") for k in keys if k.endswith(".experts.gate_up_proj")]
    if not fused:
        return state
    out = {k: v for k, v in state.items() if not any(k.startswith(p) for p in fused)}
    for p in fused:
        n = sum(1 for k in state if k.startswith(p) and k.endswith(".down_proj.weight"))
        out[p + "gate_up_proj"] = torch.stack([torch.cat([state[f"{p}{j}.gate_proj.weight"],
                                                          state[f"{p}{j}.up_proj.weight"]]) for j in range(n)])
        out[p + "down_proj"] = torch.stack([state[f"{p}{j}.down_proj.weight"] for j in range(n)])
    return out
