"""A GPT with today's settings as a Hugging Face ``LlamaForCausalLM``, ``Qwen3ForCausalLM``, ``Qwen3MoeForCausalLM``
(with experts: ``hf_moe.py``), ``MistralForCausalLM`` or ``Gemma3ForCausalLM`` (``hf_gemma.py``): the reverse of
``hf_folder.py`` (the same name-by-name plan, ``hf_folder.llama_plan``, read the other way: ``in_proj``'s rows
split back into ``q_proj``, ``k_proj`` and ``v_proj``).

A GPT is a Llama when it is pre-norm with RMSNorm, SwiGLU and rotary positions, without embedding scaling or an
embedding norm, with softmax attention; a Qwen3 when it also normalises each head's queries and keys (``qk_norm``)
and has no biases; a Mistral when it is a Llama with a sliding window in every layer; a Gemma 3 with Gemma's
blocks (``hf_gemma.GEMMA_SETTINGS``). Grouped-query attention, a head size apart from ``d_model / n_heads``, the
rotary base and Llama 3's scaling, tied or untied output and biases (Llama: on every projection, or none) are written
into the config.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import Tensor

from scratchformer.interop.hf_folder import LLAMA_SETTINGS, llama_plan
from scratchformer.interop.hf_gemma import (
    GEMMA3_LM,
    GEMMA_SETTINGS,
    MISTRAL_LM,
    gemma_config_fields,
    gemma_problems,
    is_gemma,
    window_problems,
)
from scratchformer.interop.hf_moe import QWEN3_MOE_LM, moe_config_fields
from scratchformer.models import GPT
from scratchformer.nn.config import ModelConfig

LLAMA_LM, QWEN3_LM = "LlamaForCausalLM", "Qwen3ForCausalLM"
LLAMA_CLASSES = (LLAMA_LM, QWEN3_LM, QWEN3_MOE_LM, MISTRAL_LM, GEMMA3_LM)  # the classes this module writes
NAMES = {LLAMA_LM: "Llama", QWEN3_LM: "Qwen3", QWEN3_MOE_LM: "Qwen3-MoE", MISTRAL_LM: "Mistral", GEMMA3_LM: "Gemma 3"}
CONFIGS = {LLAMA_LM: "LlamaConfig", QWEN3_LM: "Qwen3Config", QWEN3_MOE_LM: "Qwen3MoeConfig",
           MISTRAL_LM: "MistralConfig", GEMMA3_LM: "Gemma3TextConfig"}
# what only Gemma's blocks have (hf_gemma.GEMMA_SETTINGS aside): the other classes want these values
NOT_LLAMA = {"attention_scale": None, "logit_softcap": 0.0, "attention_softcap": 0.0}


def is_llama_like(cfg: ModelConfig) -> bool:
    """Whether a GPT's settings lean to Llama's (the blocks since 2017) rather than GPT-2's: it exports as one of
    these, or is told what it lacks for them."""
    return any(getattr(cfg, k) == LLAMA_SETTINGS[k] for k in ("norm_type", "activation", "positional"))


def default_llama_class(cfg: ModelConfig) -> str:
    if is_gemma(cfg):
        return GEMMA3_LM
    if cfg.n_experts:
        return QWEN3_MOE_LM
    return QWEN3_LM if cfg.qk_norm else MISTRAL_LM if cfg.sliding_window else LLAMA_LM


def llama_problems(cfg: ModelConfig, hf_class: str) -> list[str]:
    """The settings ``hf_class`` (Llama, Qwen3, Mistral, Gemma 3) cannot express, each with why."""
    name = NAMES[hf_class]
    if hf_class == GEMMA3_LM:
        wants = {k: v for k, v in LLAMA_SETTINGS.items() if k not in GEMMA_SETTINGS}
        return [f"{key}={getattr(cfg, key)!r} ({name} has {key}={want!r})" for key, want in wants.items()
                if getattr(cfg, key) != want] + gemma_problems(cfg)
    wants = {**LLAMA_SETTINGS, "qk_norm": hf_class in (QWEN3_LM, QWEN3_MOE_LM), **NOT_LLAMA,
             **{k: False for k in GEMMA_SETTINGS if k not in LLAMA_SETTINGS and k != "qk_norm"}}
    problems = [f"{key}={getattr(cfg, key)!r} ({name} has {key}={want!r})" for key, want in wants.items()
                if getattr(cfg, key) != want]
    problems += window_problems(cfg, name, hf_class == MISTRAL_LM)
    if hf_class == MISTRAL_LM and cfg.bias:
        problems.append("bias=true (Mistral has no biases)")
    if hf_class != LLAMA_LM and cfg.bias:
        problems.append(f"bias=true ({name}'s feed-forward has no biases)")
    if (hf_class == QWEN3_MOE_LM) != bool(cfg.n_experts):
        problems.append(f"n_experts={cfg.n_experts} ({name} has " + ("experts)" if cfg.n_experts == 0 else
                                                                       "no experts: export as Qwen3MoeForCausalLM)"))
    return problems


def llama_state(model: GPT) -> dict[str, Tensor]:
    """Every tensor of ``model`` under its Llama / Qwen3 name."""
    cfg, own = model.config, model.state_dict()
    q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    state: dict[str, Tensor] = {}
    for ours, theirs, _ in llama_plan(cfg):
        parts = own[ours].split([q, kv, kv]) if len(theirs) == 3 else [own[ours]]
        state.update(zip(theirs, parts))
    if cfg.tie_embeddings:
        state["lm_head.weight"] = own["embed.token.weight"]
    return state


def llama_config(model: GPT, hf_class: str, transformers: Any, ids: dict[str, Any]) -> Any:
    """The ``transformers`` config of ``hf_class`` for ``model``; ``ids``: ``bos_token_id``, ``eos_token_id`` (one, or a
    list of every end-of-generation id) and ``pad_token_id`` (each may be None)."""
    cfg = model.config
    config_class = getattr(transformers, CONFIGS[hf_class])
    rope = {"rope_type": "default"} if cfg.rope_scaling is None else dict(cfg.rope_scaling)
    if "rope_parameters" in inspect.signature(config_class.__init__).parameters:  # transformers 5
        rotary: dict[str, Any] = {"rope_parameters": {**rope, "rope_theta": cfg.rope_base}}
    else:  # transformers 4
        rotary = {"rope_theta": cfg.rope_base, "rope_scaling": cfg.rope_scaling}
    more: dict[str, Any] = {"attention_bias": cfg.bias, "hidden_act": "silu"}
    if hf_class == LLAMA_LM:
        more["mlp_bias"] = cfg.bias
    elif hf_class == MISTRAL_LM:
        more = {"hidden_act": "silu", "sliding_window": cfg.sliding_window or None}
    elif hf_class == GEMMA3_LM:
        more = {"attention_bias": False, **gemma_config_fields(cfg, rotary.pop("rope_parameters", rope))}
    return config_class(
        vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff, num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads, num_key_value_heads=cfg.kv_heads, head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_len, rms_norm_eps=cfg.layer_norm_eps,
        tie_word_embeddings=cfg.tie_embeddings, attention_dropout=cfg.attention_dropout,
        **{k: ids.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")},
        architectures=[hf_class], **rotary, **more, **(moe_config_fields(cfg) if cfg.n_experts else {}))
