"""The number of parameters of a model, derived on paper and checked against the real count by the tests."""

from __future__ import annotations

from scratchformer.families import family
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.expert_settings import sparse_layers
from scratchformer.nn.feedforward import GATED


def _feed_forward(cfg: ModelConfig, f: int) -> int:
    """A feed-forward of width ``f``: C F + b F + F C + b C, and a gate's (SwiGLU's, GeGLU's) C F + b F."""
    c, b = cfg.d_model, int(cfg.bias)
    return 2 * c * f + b * (f + c) + (c * f + b * f if cfg.activation in GATED else 0)


def count_parameters_formula(cfg: ModelConfig) -> int:
    """The number of trainable parameters of the model ``cfg`` builds, derived on paper.

    Notation: C = d_model, F = d_ff, V = vocabulary, L = layers, b = 1 if biases else 0.

    - attention block: Q, K, V, O projections  ->  4 (C^2 + b C); with grouped-query attention (H_kv heads of keys
      and values) and a head size D: (C + b)(H D + 2 H_kv D) + H D C + b C
    - feed-forward:  relu/gelu: C F + b F + F C + b C;   swiglu and geglu_tanh add a gate: + C F + b F
    - experts (E = ``n_experts``, in layers not in ``dense_layers``): E feed-forwards of F = ``expert_d_ff``, router C E
    - LayerNorm:  C weights + b C biases; RMSNorm (``norm_type``): C weights
    - ``qk_norm``: one norm of D = C / H features on the queries and one on the keys of every attention
      block (self- and cross-)
    - encoder layer = attention + FFN + 2 LayerNorms; decoder layer = 2 attention + FFN + 3 LayerNorms;
      a decoder-only (GPT) layer has no cross-attention: attention + FFN + 2 LayerNorms (4 with ``sandwich_norm``)
    - pre-LN adds one final LayerNorm per stack; ``embedding_norm`` one LayerNorm after the embeddings
    - embeddings: V C per table (tables shared when tied); learned positions: max_len C;
      sinusoidal and rotary positions have no parameters
    - output projection: V C with no bias, unless tied to the target embedding (then 0)
    - classifier head: C n_classes + n_classes; ``pooling="pooler"`` adds BERT's pooler: C^2 + b C; a GPT classifier
      has a head of C n_classes (no bias, as GPT-2's: the registry's ``head_bias``) instead of its output projection
    - ``attention="linear"`` changes the function of the same Q, K, V, O projections: no parameters
    - ViT: no vocabulary; the patch embedding (P^2 ch) C + C (always with a bias), the class token C,
      positions as above over the class token and the patches (max_len = N + 1), the encoder stack, the head
    """
    c, f, b = cfg.d_model, cfg.d_ff, int(cfg.bias)
    norm_of = (lambda n: n) if cfg.norm_type == "rmsnorm" else (lambda n: n + b * n)
    q, kv = cfg.n_heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim  # H D and H_kv D (C and C in the paper)
    attn = (c + b) * (q + 2 * kv) + q * c + b * c + (2 * norm_of(cfg.head_dim) if cfg.qk_norm else 0)
    ffn = _feed_forward(cfg, f)
    experts = len(sparse_layers(cfg)) * (cfg.n_experts * (_feed_forward(cfg, cfg.expert_d_ff or f) + c) - ffn)
    ln = norm_of(c)
    final_ln = ln if cfg.norm == "pre" else 0
    positions = cfg.max_len * c if cfg.positional == "learned" else 0
    emb_ln = ln if cfg.embedding_norm else 0
    entry = family(cfg.arch)
    if not entry.two_stacks:  # one stack, without cross-attention: a GPT's decoder, or an encoder
        layers = cfg.n_layers * (attn + ffn + (4 if cfg.sandwich_norm else 2) * ln) + final_ln + experts
        if entry.reads_pixels:  # the patch embedding (with its bias) and the class token; no vocabulary
            inputs = cfg.patch_size ** 2 * cfg.channels * c + c + c + positions
        else:
            inputs = cfg.vocab_size * c + positions + emb_ln
        if entry.classifies:
            pooler = c * c + b * c if cfg.pooling == "pooler" else 0
            head = pooler + c * cfg.n_classes + (cfg.n_classes if entry.head_bias else 0)
        else:  # the output projection: none of its own when tied to the token embedding
            head = 0 if cfg.tie_embeddings else cfg.vocab_size * c
        return inputs + layers + head

    assert cfg.n_encoder_layers is not None and cfg.n_decoder_layers is not None
    encoder = cfg.n_encoder_layers * (attn + ffn + 2 * ln) + final_ln
    decoder = cfg.n_decoder_layers * (2 * attn + ffn + 3 * ln) + final_ln
    src_v, tgt_v = cfg.vocab_size, cfg.target_vocab_size
    if cfg.shared_vocab and cfg.tie_embeddings:
        embeddings = src_v * c  # one matrix for source, target and output (§3.4)
    elif cfg.tie_embeddings:
        embeddings = src_v * c + tgt_v * c  # target embedding doubles as the output projection
    else:
        embeddings = src_v * c + 2 * tgt_v * c
    # each stack has its own learned positions and its own embedding LayerNorm
    return embeddings + 2 * (positions + emb_ln) + encoder + decoder
