# %% [markdown]
# # 1. Build a Transformer from its blocks
#
# This notebook assembles the encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al.,
# 2017) one block at a time, using the modules of `scratchformer.nn`, and prints the shape of every tensor
# on the way. Then it builds the whole model from a `ModelConfig`, checks its parameter count against a
# formula derived on paper, and *proves* two properties every correct Transformer must have:
#
# - **causality**: the decoder's output at position *t* does not depend on target tokens after *t*;
# - **padding invariance**: padding tokens do not change the outputs of the real tokens.
#
# You need Python and a little linear algebra (matrix products, softmax). No training happens here: the
# whole notebook runs in seconds.
#
# Shape letters used everywhere in scratchformer:
#
# | letter | meaning |
# |---|---|
# | B | batch size |
# | S | source (key) length |
# | T | target (query) length |
# | C | model width `d_model` |
# | H | number of heads, D = C / H the size of one head |
# | F | hidden width of the feed-forward network `d_ff` |
# | V | vocabulary size |

# %%
# Parameters. SCRATCHFORMER_NOTEBOOK_TINY=1 (set by the test suite) shrinks everything so the notebook
# runs in a few seconds; leave it unset to run the notebook as a learner.
import os

TINY = os.environ.get("SCRATCHFORMER_NOTEBOOK_TINY") == "1"

D_MODEL = 32 if TINY else 64  # C
N_HEADS = 4  # H
D_FF = 64 if TINY else 256  # F
N_LAYERS = 2
VOCAB = 20  # V: a toy vocabulary; ids 0..3 are <pad>, <bos>, <eos>, <unk> in scratchformer

# %%
# ruff: noqa: E402  (in a notebook the imports come after the parameters cell)
import math

import torch
from torch import nn

from scratchformer import ModelConfig, build_model, count_parameters_formula
from scratchformer.nn import (
    DecoderLayer,
    Embeddings,
    EncoderLayer,
    FeedForward,
    MultiHeadAttention,
    ResidualNorm,
    attention_reference,
    causal_mask,
    combine_masks,
    key_padding_to_attention_mask,
    padding_mask,
    record_attention,
    sinusoidal_table,
)

torch.manual_seed(0)
print("TINY mode" if TINY else "full mode", "| torch", torch.__version__)

# %% [markdown]
# ## The configuration
#
# Every block reads its sizes from one `ModelConfig`. Fields we do not set take the paper's defaults for
# the `seq2seq` family: post-LayerNorm, ReLU, sinusoidal positions, embeddings multiplied by sqrt(C), and
# one embedding matrix shared by source, target and output layer. We switch dropout off so that every
# run of the same input gives the same output (needed for the checks at the end).

# %%
cfg = ModelConfig(arch="seq2seq", vocab_size=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                  d_ff=D_FF, max_len=32, dropout=0.0)
print(cfg)
print("head size D = C / H =", cfg.head_dim)

# %% [markdown]
# ## Step 1: token embeddings + positional encoding (§3.4, §3.5)
#
# A sentence is a row of token ids, shape `(B, T)`. An embedding table of shape `(V, C)` turns each id
# into a vector of C numbers: `(B, T) -> (B, T, C)`. The paper multiplies these vectors by sqrt(C).
#
# Attention by itself does not know the order of the tokens (shuffle the inputs and the outputs are
# shuffled the same way), so we *add* a vector that depends on the position:
#
#     PE(pos, 2i)   = sin(pos / 10000^(2i / C))
#     PE(pos, 2i+1) = cos(pos / 10000^(2i / C))
#
# The table has one row per position, shape `(max_len, C)`. Note that it is indexed by the **position**
# of a token, never by its batch row.

# %%
ids = torch.tensor([[5, 6, 7, 8, 9, 10],
                    [11, 12, 13, 0, 0, 0]])  # (B, T) = (2, 6); the second row has 3 tokens + 3 <pad> (id 0)
B, T = ids.shape
positions = torch.arange(T)  # (T,): 0, 1, ..., T-1

embed = Embeddings(nn.Embedding(VOCAB, D_MODEL), cfg)
x = embed(ids, positions)
print("ids       ", tuple(ids.shape), "-> embeddings", tuple(x.shape))

table = sinusoidal_table(cfg.max_len, D_MODEL)
print("PE table  ", tuple(table.shape))

# The same computation by hand: scaled token vectors plus the rows of the table for positions 0..T-1.
manual = embed.token(ids) * math.sqrt(D_MODEL) + table[positions]
assert torch.allclose(x, manual, atol=1e-6)
print("Embeddings == token(ids) * sqrt(C) + PE[positions]: OK")

# %% [markdown]
# ## Step 2: scaled dot-product attention (§3.2.1)
#
#     Attention(Q, K, V) = softmax(Q K^T / sqrt(D)) V
#
# Each query vector is compared with every key vector (a dot product), the scores are scaled by
# 1 / sqrt(D) and turned into weights that sum to one (softmax over the keys), and the output is the
# weighted average of the value vectors. A **mask** (boolean, `True` = may attend) sets forbidden scores
# to minus infinity before the softmax, so they get exactly zero weight.
#
# `attention_reference` is that formula written line for line; the model itself usually runs PyTorch's
# fused `scaled_dot_product_attention`, and the tests prove the two agree.

# %%
H, D = N_HEADS, cfg.head_dim
q = torch.randn(B, H, T, D)  # queries
k = torch.randn(B, H, 9, D)  # 9 keys: the key length S need not equal the query length T
v = torch.randn(B, H, 9, D)
out, weights = attention_reference(q, k, v)
print("q", tuple(q.shape), " k, v", tuple(k.shape), "-> output", tuple(out.shape), " weights", tuple(weights.shape))
assert torch.allclose(weights.sum(-1), torch.ones(B, H, T))
print("every row of weights sums to 1: OK")

# %% [markdown]
# ## Step 3: masks (§3.2.3)
#
# Two masks, both boolean with `True` = *may attend*:
#
# - the **padding mask** `(B, S)` says which keys are real tokens; padding must never be attended to;
# - the **causal mask** `(T, T)` is lower-triangular: query *i* may look at keys 0..*i* only. The decoder
#   uses it so that, during training, position *i* cannot peek at the token it has to predict.
#
# Masks broadcast to the score shape `(B, H, T, S)`: a padding mask becomes `(B, 1, 1, S)` (the same for
# every head and every query), a causal mask `(T, S)`. `combine_masks` ANDs them.

# %%
pad = padding_mask(ids, pad_id=0)  # (B, S)
print("padding mask (B, S):\n", pad.int())
causal = causal_mask(T)  # (T, T)
print("causal mask (T, T):\n", causal.int())
both = combine_masks(key_padding_to_attention_mask(pad), causal)  # (B, 1, T, T)
print("padding AND causal for row 1 (3 real tokens), shape", tuple(both.shape), ":\n", both[1, 0].int())

q = k = v = torch.randn(B, H, T, D)
_, w = attention_reference(q, k, v, mask=both)
assert (w[1, :, :, 3:] == 0).all(), "padding got attention weight"
assert (w.triu(1) == 0).all(), "a query attended to a later key"
print("masked positions get exactly zero weight: OK")

# %% [markdown]
# ## Step 4: multi-head attention (§3.2.2)
#
#     MultiHead(x) = Concat(head_1, ..., head_H) W^O,   head_h = Attention(x W_h^Q, x W_h^K, x W_h^V)
#
# Instead of one attention over C-dimensional vectors, the model projects the input into H smaller
# spaces of size D = C / H, attends in each of them independently (each head can look for something
# different), concatenates the H results and mixes them with W^O. In code, the `(B, T, C)` projections
# are reshaped to `(B, H, T, D)`, attended, and reshaped back.
#
# *Self*-attention takes queries, keys and values from the same sequence. *Cross*-attention (in the
# decoder) takes queries from the target and keys/values from the encoder output, the "memory".
# `record_attention` collects the attention weights while a module runs.

# %%
mha = MultiHeadAttention(D_MODEL, N_HEADS)
print("W^Q, W^K, W^V stacked:", tuple(mha.in_proj.weight.shape), "  W^O:", tuple(mha.out_proj.weight.shape))

x = torch.randn(B, T, D_MODEL)
with record_attention(mha) as maps:
    y = mha(x, mask=key_padding_to_attention_mask(pad))
(self_weights,) = maps.values()
print("self-attention : x", tuple(x.shape), "->", tuple(y.shape), " weights (B, H, T, S):", tuple(self_weights.shape))

memory = torch.randn(B, 9, D_MODEL)  # pretend encoder output for a 9-token source
with record_attention(mha) as maps:
    y = mha.cross(x, mha.project_kv(memory))
(cross_weights,) = maps.values()
print("cross-attention: x", tuple(x.shape), "+ memory", tuple(memory.shape), "->", tuple(y.shape),
      " weights:", tuple(cross_weights.shape))

# %% [markdown]
# ## Step 5: the position-wise feed-forward network (§3.3)
#
#     FFN(x) = max(0, x W_1 + b_1) W_2 + b_2
#
# Two linear layers with a ReLU between, `(B, T, C) -> (B, T, F) -> (B, T, C)`, applied to each position
# separately: attention mixes information *between* positions, the FFN transforms each position on its
# own. We check that: running the FFN on one position alone gives the same vector.

# %%
ffn = FeedForward(D_MODEL, D_FF, activation="relu")
hidden = ffn.linear1(x)
print("x", tuple(x.shape), "-> W_1 ->", tuple(hidden.shape), "-> W_2 ->", tuple(ffn(x).shape))
assert torch.allclose(ffn(x)[:, 2], ffn(x[:, 2:3])[:, 0], atol=1e-6)
print("position-wise: FFN(x)[:, 2] == FFN(x[:, 2]): OK")

# %% [markdown]
# ## Step 6: residual connection + LayerNorm (§3.1, §5.4)
#
# Every sub-layer (attention or FFN) is wrapped as `LayerNorm(x + Dropout(Sublayer(x)))`: the input is
# added back (the residual path lets gradients flow through deep stacks), then each position's vector
# is normalised to mean 0 and variance 1 (before a learned scale and shift, which start at 1 and 0).
# This is the paper's "post-LN"; `norm="pre"` in the config moves the LayerNorm before the sub-layer.

# %%
block = ResidualNorm(cfg)
y = block(x, ffn)
print("ResidualNorm(x, FFN):", tuple(x.shape), "->", tuple(y.shape))
print(f"per-position mean {y.mean(-1).abs().max():.1e} (~0), std {y.std(-1, unbiased=False).mean():.3f} (~1)")

# %% [markdown]
# ## Step 7: encoder and decoder layers (§3.1, Figure 1)
#
# - **Encoder layer**: self-attention, then FFN, each inside a `ResidualNorm`. `(B, S, C) -> (B, S, C)`.
# - **Decoder layer**: *masked* (causal) self-attention over the target so far, then cross-attention over
#   the encoder memory, then FFN. `(B, T, C) -> (B, T, C)`.
#
# Because every layer maps `(.., C)` to `(.., C)`, layers stack: the encoder is N encoder layers, the
# decoder N decoder layers.

# %%
enc_layer = EncoderLayer(cfg)
dec_layer = DecoderLayer(cfg)
src_x = torch.randn(B, 9, D_MODEL)  # embedded source, S = 9
src_pad = torch.arange(9)[None, :] < torch.tensor([9, 4])[:, None]  # second source: 4 real tokens
enc_out = enc_layer(src_x, key_padding_to_attention_mask(src_pad))
print("EncoderLayer:", tuple(src_x.shape), "->", tuple(enc_out.shape))
dec_out = dec_layer(x, enc_out, memory_mask=key_padding_to_attention_mask(src_pad))
print("DecoderLayer:", tuple(x.shape), "+ memory", tuple(enc_out.shape), "->", tuple(dec_out.shape))
for name, module in (("encoder layer", enc_layer), ("decoder layer", dec_layer)):
    print(f"  {name}: {sum(p.numel() for p in module.parameters()):,} parameters;",
          ", ".join(n for n, _ in module.named_children()))

# %% [markdown]
# ## Step 8: the whole model
#
# `build_model(cfg)` composes exactly these blocks into a `Seq2SeqTransformer` (for `arch="seq2seq"`):
#
#     src (B, S) -> Embeddings -> N x EncoderLayer -> memory (B, S, C)
#     tgt (B, T) -> Embeddings -> N x DecoderLayer(memory) -> (B, T, C) -> x E^T -> logits (B, T, V)
#
# The last step multiplies by the transposed embedding matrix E (weight tying, §3.4): the score of word
# *w* is the dot product of the decoder output with the embedding of *w*.

# %%
model = build_model(cfg).eval()
print(type(model).__name__)
for name, child in model.named_children():
    print(f"  {name:10s} {type(child).__name__:12s} {sum(p.numel() for p in child.parameters()):>8,} parameters")
# Weight tying: source embedding, target embedding and output layer are one and the same matrix,
# so the two Embeddings above show the same V x C parameters (the model total counts them once).
assert model.src_embed.token.weight is model.tgt_embed.token.weight is model.output_weight()
print("source embedding is target embedding is output matrix:", tuple(model.output_weight().shape))

src = torch.tensor([[4, 5, 6, 7, 8, 9, 2],  # (B, S) = (2, 7); 2 = <eos>
                    [4, 5, 6, 2, 0, 0, 0]])  # 3 tokens + <eos> + 3 <pad>
tgt = torch.tensor([[1, 9, 8, 7, 6, 5],  # (B, T) = (2, 6); 1 = <bos>: the target shifted right
                    [1, 6, 5, 4, 0, 0]])
memory = model.encode(src)  # the source padding mask defaults to src != pad_id
logits = model.decode(tgt, memory, src != 0)
print("encode:", tuple(src.shape), "->", tuple(memory.shape))
print("decode:", tuple(tgt.shape), "+", tuple(memory.shape), "->", tuple(logits.shape), "(B, T, V)")
assert torch.allclose(model(src, tgt), logits, atol=1e-6)  # forward = encode + decode

# %% [markdown]
# ## Step 9: count the parameters, twice
#
# `count_parameters_formula` derives the count on paper (see its docstring):
#
# - attention: 4 (C^2 + C) for W^Q, W^K, W^V, W^O and their biases;
# - FFN: 2 C F + F + C; LayerNorm: 2 C;
# - encoder layer = attention + FFN + 2 LayerNorms; decoder layer = 2 attentions + FFN + 3 LayerNorms;
# - one shared V x C embedding matrix; sinusoidal positions have no parameters.
#
# It must equal the number of parameters the code actually creates.

# %%
C, F = D_MODEL, D_FF
attn, ffn_n, ln = 4 * (C * C + C), 2 * C * F + F + C, 2 * C
by_hand = VOCAB * C + N_LAYERS * (attn + ffn_n + 2 * ln) + N_LAYERS * (2 * attn + ffn_n + 3 * ln)
actual = sum(p.numel() for p in model.parameters())
formula = count_parameters_formula(cfg)
print(f"parameters: counted {actual:,}, formula {formula:,}, by hand {by_hand:,}")
assert actual == formula == by_hand

if not TINY:
    # The paper's base model with a shared vocabulary of exactly 37,000 tokens: 63.1M parameters. Table 3
    # says 65M; the paper gives neither its exact vocabulary nor how it counted (walkthrough, page 2).
    base = ModelConfig.preset("paper-base")
    n_base = sum(p.numel() for p in build_model(base).parameters())
    print(f"paper-base: counted {n_base:,}, formula {count_parameters_formula(base):,}")
    assert n_base == count_parameters_formula(base)

# %% [markdown]
# ## Step 10: causality: the future cannot leak into the past
#
# During training the decoder sees the whole target at once (teacher forcing) and must predict token
# *t + 1* at position *t*. If position *t* could see later tokens it would simply copy the answer. So:
# change the target token at position `k` and check that the logits at positions `0 .. k-1` do not move
# (they may and do change from position `k` on).

# %%
k_pos = 3
tgt2 = tgt.clone()
tgt2[:, k_pos] = 17  # a different token at position 3
with torch.no_grad():
    before, after = model(src, tgt), model(src, tgt2)
change = (before - after).abs().amax(dim=(0, 2))  # (T,): largest change of the logits at each position
print("largest logit change per target position:", [f"{c:.1e}" for c in change.tolist()])
assert torch.allclose(before[:, :k_pos], after[:, :k_pos], atol=1e-5), "the decoder looked ahead!"
assert not torch.allclose(before[:, k_pos:], after[:, k_pos:]), "later positions should change"
print(f"positions 0..{k_pos - 1} unchanged, {k_pos}.. changed: the decoder is causal")

# %% [markdown]
# ## Step 11: padding changes nothing
#
# Sentences in a batch have different lengths, so the short ones are filled up with `<pad>`. The padding
# mask must make these filler tokens invisible. Two checks on the second sentence:
#
# 1. alone (no padding at all) vs. padded to the batch's length: same logits;
# 2. padded with `<pad>` vs. padded with arbitrary tokens that the mask hides: same logits.

# %%
with torch.no_grad():
    alone = model(src[1:, :4], tgt[1:, :4])  # 3 tokens + <eos>, no padding
    batched = model(src, tgt)[1:, :4]  # the same sentence inside the padded batch
    junk = src.clone()
    junk[1, 4:] = torch.tensor([13, 14, 15])  # garbage where the padding was ...
    hidden_junk = model(junk, tgt, src_padding_mask=src != 0)[1:, :4]  # ... hidden by the same mask
print("alone vs batched, max difference:", f"{(alone - batched).abs().max():.1e}")
print("<pad> vs masked junk, max difference:", f"{(batched - hidden_junk).abs().max():.1e}")
assert torch.allclose(alone, batched, atol=1e-5)
assert torch.allclose(batched, hidden_junk, atol=1e-5)

# and the encoder outputs of the real source tokens do not move either
with torch.no_grad():
    assert torch.allclose(model.encode(src[1:, :4]), model.encode(src)[1:, :4], atol=1e-5)
print("padding is invisible to the real tokens: OK")

# %% [markdown]
# ## The other two families
#
# The same blocks make the other two Transformer families: a **GPT** is the decoder without
# cross-attention (no encoder at all), an **encoder classifier** is the encoder plus a pooling step and a
# linear head. Their parameter counts follow the same formula.

# %%
for arch, extra in (("gpt", {}), ("encoder", {"n_classes": 3})):
    small = ModelConfig(arch=arch, vocab_size=VOCAB, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS,
                        d_ff=D_FF, max_len=32, dropout=0.0, **extra)
    m = build_model(small).eval()
    n = sum(p.numel() for p in m.parameters())
    assert n == count_parameters_formula(small)
    with torch.no_grad():
        shape = tuple(m(ids).shape)
    print(f"{type(m).__name__:18s} norm={small.norm}, positions={small.positional}: {n:,} parameters, "
          f"ids {tuple(ids.shape)} -> {shape}")

# %% [markdown]
# ## Summary
#
# | block | class | shape |
# |---|---|---|
# | embeddings + positions | `Embeddings` | `(B, T) -> (B, T, C)` |
# | scaled dot-product attention | `attention_reference` / `attend` | `(B, H, T, D) x (B, H, S, D) -> (B, H, T, D)` |
# | multi-head attention | `MultiHeadAttention` | `(B, T, C) -> (B, T, C)` |
# | feed-forward | `FeedForward` | `(B, T, C) -> (B, T, F) -> (B, T, C)` |
# | residual + LayerNorm | `ResidualNorm` | `(B, T, C) -> (B, T, C)` |
# | encoder / decoder layer | `EncoderLayer` / `DecoderLayer` | `(B, T, C) -> (B, T, C)` |
# | the model | `Seq2SeqTransformer` via `build_model` | `(B, S), (B, T) -> (B, T, V)` |
#
# Next: `02_copy_task_attention.py` trains this architecture and looks at what its attention learns.
