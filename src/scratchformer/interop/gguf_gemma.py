"""A GPT with Gemma's blocks (``interop/hf_gemma.py``) as llama.cpp's ``gemma3``; a sliding window elsewhere refused.

llama.cpp's gemma3 computes Gemma 3's layer: norms before and after attention and feed-forward, QK-norm, GeGLU with
GELU's tanh approximation, embeddings times sqrt(C), rotary pairs (j, j + D/2) as ours (no permutation). What it
fixes rather than reads (in the llama.cpp that GGUF files are commonly run with): one global layer in six (layers
5, 11, ...), the local layers' rotary base 10,000, and the scores' factor 1 / sqrt(D). A model that differs is
refused, saying so. Its norms compute ``x / rms * w``, so Gemma's ``1 + w`` is written (as llama.cpp's own converter
writes it). Its tensors: llama's names, with ``post_attention_norm`` and ``post_ffw_norm`` for the norms after.

llama.cpp's llama (Mistral's architecture there too) has no sliding window: a Mistral whose window is shorter than its
context would be computed without it, and is refused; one whose window covers its context is a Llama.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# what every other architecture (gpt2, llama, qwen3, qwen3moe) wants of Gemma's settings
NOT_GEMMA: dict[str, tuple] = {"sandwich_norm": (False,), "norm_plus_one": (False,), "attention_scale": (None,),
                               "logit_softcap": (0, 0.0), "attention_softcap": (0, 0.0), "local_rope_base": (None,)}
LOCAL_BASE, EVERY = 10_000.0, 6


def gemma_problems(cfg: Any) -> list[str]:
    """What llama.cpp's gemma3 does not read in a GPT with Gemma's blocks, each with why."""
    bad = []
    local = [i for i in range(cfg.n_layers) if (i + 1) % EVERY]
    if cfg.sliding_window and cfg.sliding_layers != local:
        bad.append(f"sliding_layers={cfg.sliding_layers} (its global layers are every sixth: sliding {local})")
    base = cfg.local_rope_base if cfg.local_rope_base is not None else cfg.rope_base
    if cfg.sliding_window and base != LOCAL_BASE:
        bad.append(f"local_rope_base={base:g} (its local layers rotate by base 10,000)")
    if cfg.attention_scale is not None and abs(cfg.attention_scale * cfg.head_dim ** 0.5 - 1) > 1e-6:
        bad.append(f"attention_scale={cfg.attention_scale:g} (it multiplies the scores by 1 / sqrt(D))")
    if cfg.attention_softcap or cfg.bias or cfg.rope_scaling is not None:
        bad.append("attention_softcap, bias or rope_scaling (it has none)")
    return bad


def window_problems(cfg: Any) -> list[str]:
    """A sliding window that an architecture without one would drop (llama, qwen3, gpt2)."""
    if cfg.sliding_window and cfg.sliding_window < cfg.max_len:
        return [f"sliding_window={cfg.sliding_window} shorter than max_len={cfg.max_len} (llama.cpp's llama has no "
                "sliding window: it would attend to every earlier token)"]
    return []


def gemma_tensors(model: Any) -> dict[str, np.ndarray]:
    """gemma3's tensors: the norms' gains as 1 + w."""
    def np_(t: Any, plus: float = 0.0) -> np.ndarray:
        return t.detach().float().cpu().numpy() + plus

    cfg = model.config
    q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    out = {"token_embd.weight": np_(model.embed.token.weight), "output_norm.weight": np_(model.decoder.norm.weight, 1)}
    for i, layer in enumerate(model.decoder.layers):
        attn, ffn, b = layer.self_attn, layer.ffn, f"blk.{i}."
        w = np_(attn.in_proj.weight)
        out.update({b + "attn_q.weight": w[:q], b + "attn_k.weight": w[q:q + kv], b + "attn_v.weight": w[q + kv:],
                    b + "attn_output.weight": np_(attn.out_proj.weight), b + "ffn_gate.weight": np_(ffn.linear1.weight),
                    b + "ffn_up.weight": np_(ffn.linear3.weight), b + "ffn_down.weight": np_(ffn.linear2.weight)})
        norms = {"attn_norm": layer.self_attn_block.norm, "post_attention_norm": layer.self_attn_block.post_norm,
                 "ffn_norm": layer.ffn_block.norm, "post_ffw_norm": layer.ffn_block.post_norm,
                 "attn_q_norm": attn.q_norm, "attn_k_norm": attn.k_norm}
        out.update({f"{b}{name}.weight": np_(norm.weight, 1) for name, norm in norms.items()})
    if model.lm_head is not None:
        out["output.weight"] = np_(model.lm_head.weight)
    return out


def add_gemma_keys(writer: Any, cfg: Any) -> None:
    """gemma3's keys beyond llama's: the window, the final softcap, the head size always."""
    writer.add_key_length(cfg.head_dim)
    writer.add_value_length(cfg.head_dim)
    if cfg.sliding_window:
        writer.add_sliding_window(cfg.sliding_window)
    if cfg.logit_softcap:
        writer.add_final_logit_softcapping(float(cfg.logit_softcap))
