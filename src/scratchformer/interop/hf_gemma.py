"""Gemma 3 (text: ``Gemma3ForCausalLM``) and Mistral (``MistralForCausalLM``): Llama's blocks with the settings they
add. Read by ``hf_folder.py`` and written by ``hf_llama.py`` with these mappings, each written once.

config.json (Gemma 3)                       ModelConfig
    sliding_window, layer_types                 sliding_window, sliding_layers (the "sliding_attention" ones)
    rope_parameters.sliding_attention           local_rope_base (transformers 4: rope_local_base_freq)
    rope_parameters.full_attention              rope_base (transformers 4: rope_theta)
    query_pre_attn_scalar                       attention_scale = query_pre_attn_scalar^-1/2
    hidden_activation gelu_pytorch_tanh         activation="geglu_tanh" (GELU's tanh approximation gating x W_3)
    final_logit_softcapping                     logit_softcap (null: 0)
    attn_logit_softcapping                      not read: transformers' Gemma 3 never applies it (QK-norm took the
                                                place of Gemma 2's cap, as the Gemma 3 report says), nor do we
    (always)                                    norm_plus_one, sandwich_norm, qk_norm, scale_embeddings (x sqrt(C))

config.json (Mistral)                       ModelConfig
    sliding_window (null: none)                 sliding_window, every layer

Names where Gemma 3 differs from Llama (theirs under ``model.layers.i.``, ours under ``decoder.layers.i.``)::

    input_layernorm.weight                      self_attn_block.norm.weight
    post_attention_layernorm.weight             self_attn_block.post_norm.weight  (Llama's name for the next norm)
    pre_feedforward_layernorm.weight            ffn_block.norm.weight
    post_feedforward_layernorm.weight           ffn_block.post_norm.weight

Refused in one line: a ``Gemma3ForConditionalGeneration`` folder (images and text: only the text model,
``Gemma3ForCausalLM``, is read here), bidirectional attention, another activation, a sliding window on the global
layers' rotary scaling other than Llama 3's.
"""

from __future__ import annotations

from typing import Any

GEMMA3_LM, MISTRAL_LM, GEMMA3_IMAGES = "Gemma3ForCausalLM", "MistralForCausalLM", "Gemma3ForConditionalGeneration"
SLIDING, FULL = "sliding_attention", "full_attention"
# Gemma's blocks as settings: the reader builds these, the exports check them
GEMMA_SETTINGS: dict[str, Any] = {"activation": "geglu_tanh", "norm_plus_one": True, "sandwich_norm": True,
                                  "qk_norm": True, "scale_embeddings": True}


def gemma_rope(hf: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The global layers' rotary parameters (as a Llama's ``rope_parameters``) and the local layers' base."""
    params = hf.get("rope_parameters") or {}
    full = dict(params.get(FULL) or {"rope_type": "default", "rope_theta": hf.get("rope_theta", 1_000_000.0)})
    if hf.get("rope_scaling"):  # transformers 4: the global layers' scaling
        full.update(hf["rope_scaling"])
    local = (params.get(SLIDING) or {}).get("rope_theta", hf.get("rope_local_base_freq", 10_000.0))
    return full, float(local)


def gemma_settings(hf: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The ``ModelConfig`` fields of a Gemma 3 text ``config.json`` beyond Llama's (module docstring); ``ValueError``
    (one line, which the reader turns into a ``FolderError``) for what it cannot read."""
    if hf.get("use_bidirectional_attention"):
        raise ValueError("use_bidirectional_attention=true is not supported (a Gemma 3 here is a causal LM)")
    if hf.get("hidden_activation", "gelu_pytorch_tanh") not in ("gelu_pytorch_tanh", "gelu_tanh"):
        raise ValueError(f"hidden_activation={hf['hidden_activation']!r} is not supported for gemma3 "
                          "(supported: gelu_pytorch_tanh)")
    L = hf["num_hidden_layers"]
    types = hf.get("layer_types") or [FULL if (i + 1) % int(hf.get("sliding_window_pattern", 6)) == 0 else SLIDING
                                      for i in range(L)]
    scalar = float(hf.get("query_pre_attn_scalar", 256))
    window = int(hf.get("sliding_window") or 0)
    return dict(GEMMA_SETTINGS, sliding_window=window,
                sliding_layers=[i for i, kind in enumerate(types) if kind == SLIDING] if window else [],
                local_rope_base=gemma_rope(hf)[1],
                attention_scale=None if scalar == head_dim else scalar ** -0.5,
                logit_softcap=float(hf.get("final_logit_softcapping") or 0.0))


def is_gemma(cfg: Any) -> bool:
    """Whether a GPT's settings are Gemma's blocks (it exports as Gemma 3)."""
    return all(getattr(cfg, k) == v for k, v in GEMMA_SETTINGS.items())


def gemma_problems(cfg: Any) -> list[str]:
    """The settings ``Gemma3ForCausalLM`` cannot express, each with why."""
    problems = [f"{k}={getattr(cfg, k)!r} (Gemma 3 has {k}={v!r})" for k, v in GEMMA_SETTINGS.items()
                if getattr(cfg, k) != v]
    if cfg.bias:
        problems.append("bias=true (Gemma 3's feed-forward has no biases)")
    if cfg.attention_softcap:
        problems.append(f"attention_softcap={cfg.attention_softcap} (transformers' Gemma 3 does not cap its scores)")
    return problems


def window_problems(cfg: Any, name: str, slides: bool) -> list[str]:
    """What a Llama-like class without layer types (``name``: Llama, Qwen3, Mistral) cannot express of a sliding
    window: one that ``slides`` (Mistral) has it in every layer with one rotary base, the others in none."""
    if not cfg.sliding_window:
        return []
    if not slides:
        return [f"sliding_window={cfg.sliding_window} ({name} attends to every earlier token: export as "
                f"{MISTRAL_LM if not cfg.qk_norm else GEMMA3_LM})"]
    every = cfg.sliding_layers == list(range(cfg.n_layers))
    local = cfg.local_rope_base is not None and cfg.local_rope_base != cfg.rope_base
    return ([] if every else [f"sliding_layers={cfg.sliding_layers} (Mistral's window is in every layer)"]) + \
        ([f"local_rope_base={cfg.local_rope_base} (Mistral rotates every layer by one base)"] if local else [])


def gemma_config_fields(cfg: Any, rope: dict[str, Any]) -> dict[str, Any]:
    """The ``Gemma3TextConfig`` arguments of a GPT with Gemma's settings (``rope``: the global layers' parameters)."""
    scalar = cfg.head_dim if cfg.attention_scale is None else cfg.attention_scale ** -2
    local = {"rope_type": "default", "rope_theta": cfg.local_rope_base or cfg.rope_base}
    return dict(hidden_activation="gelu_pytorch_tanh", sliding_window=cfg.sliding_window or cfg.max_len,
                query_pre_attn_scalar=round(scalar) if abs(scalar - round(scalar)) < 1e-6 else scalar,
                layer_types=[SLIDING if i in cfg.sliding_layers else FULL for i in range(cfg.n_layers)],
                final_logit_softcapping=cfg.logit_softcap or None, rope_parameters={FULL: rope, SLIDING: local},
                rope_local_base_freq=local["rope_theta"])  # transformers 4's name for the local base


def norm_names(sandwich: bool) -> list[tuple[str, str]]:
    """(ours, theirs) of a layer's norms: Llama's two, or Gemma's four (module docstring)."""
    if sandwich:
        return [("self_attn_block.norm", "input_layernorm"), ("self_attn_block.post_norm", "post_attention_layernorm"),
                ("ffn_block.norm", "pre_feedforward_layernorm"), ("ffn_block.post_norm", "post_feedforward_layernorm")]
    return [("self_attn_block.norm", "input_layernorm"), ("ffn_block.norm", "post_attention_layernorm")]
