# %% [markdown]
# # 5. A training loop you can read in one sitting
#
# Notebook 2 trained the copy task with `scratchformer.train.train`, the project's full trainer:
# checkpoints, resuming, evaluation, gradient accumulation, several processes, mixed precision, early
# stopping. All of that hides the loop itself. Here is the loop alone, written out in about 100 lines of
# plain PyTorch, and it trains the paper's model as one file, `scratchformer/paper.py` (the code the
# walkthrough shows first on pages 2 to 9; it imports nothing but torch):
#
# 1. **batches**: random strings, padded, with the target shifted right;
# 2. **masks**: which positions attention may look at;
# 3. **the loss**: cross-entropy with label smoothing, padding left out;
# 4. **the optimiser and the schedule**: Adam with the paper's β₂ = 0.98 and ε = 10⁻⁹, and the learning
#    rate of equation 3 (warm-up, then 1/√step);
# 5. **greedy decoding** of strings the model has never seen, and the exact-match score.
#
# It is the paper's recipe (§5) at toy scale, the loop of `scratchformer/paper_train.py` (which runs with torch
# alone, beside `paper.py`). The full trainer, `train`, takes the same kind of step, with what real runs need
# around it and other choices by default (AdamW with weight decay, a cosine schedule, batches by token count,
# clipped gradients): page 10 of the walkthrough, `docs/10-training.md`, goes through it, and the end of this
# notebook lists the differences. At the end the trained weights move into the library's `Seq2SeqTransformer`,
# whose cached decoder must give the same tokens.

# %%
# Parameters. SCRATCHFORMER_NOTEBOOK_TINY=1 (set by the test suite) trains a one-layer model for 400 steps,
# which runs in about 15 seconds and copies most held-out strings (the test asks for 80 % exact match);
# leave it unset for the real run (1 to 2 minutes on a laptop CPU, 100 % exact match).
import os

TINY = os.environ.get("SCRATCHFORMER_NOTEBOOK_TINY") == "1"

if TINY:
    D_MODEL, N_HEADS, N_LAYERS, D_FF = 32, 2, 1, 64
    STEPS, WARMUP, BATCH_SIZE, N_TEST, LOG_EVERY = 400, 50, 32, 100, 100
else:
    D_MODEL, N_HEADS, N_LAYERS, D_FF = 64, 4, 2, 128
    STEPS, WARMUP, BATCH_SIZE, N_TEST, LOG_EVERY = 1500, 200, 64, 500, 100
MIN_LEN, MAX_LEN = 4, 12  # string lengths
LABEL_SMOOTHING = 0.1  # the paper's eps_ls

# %%
# ruff: noqa: E402  (in a notebook the imports come after the parameters cell)
import random
import time

import torch
import torch.nn.functional as F

from scratchformer import ModelConfig, paper
from scratchformer.generation import greedy_translate  # only to check our own decoding at the end
from scratchformer.interop.paper import from_paper

torch.manual_seed(0)
PAD, BOS, EOS = 0, 1, 2  # scratchformer's special ids (3 is <unk>, unused here)
SYMBOLS = list(range(4, 14))  # ten symbols, ids 4..13: the vocabulary has V = 14 entries
V = 14

# %% [markdown]
# ## 1. Batches
#
# An example is a string of symbols. The source is the string followed by `<eos>`; the decoder reads the
# target *shifted right* (`<bos>` then the string) and must predict the target itself (the string then
# `<eos>`). So at position t it has seen the target up to t - 1 and predicts token t ("teacher forcing").
# Strings have different lengths: shorter rows are filled with `<pad>` (id 0) at the end.
#
# The held-out strings are drawn first and never used for training, so the final score measures
# generalisation, not memory.


# %%
def random_string(rng: random.Random) -> list[int]:
    return [rng.choice(SYMBOLS) for _ in range(rng.randint(MIN_LEN, MAX_LEN))]


def make_batch(strings: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> source (B, S) = x <eos>, decoder input (B, T) = <bos> x, decoder target (B, T) = x <eos>."""
    width = max(len(s) for s in strings) + 1
    src, tgt_in, tgt_out = (torch.full((len(strings), width), PAD) for _ in range(3))
    for i, s in enumerate(strings):
        n = len(s) + 1
        src[i, :n] = torch.tensor(s + [EOS])
        tgt_in[i, :n] = torch.tensor([BOS] + s)
        tgt_out[i, :n] = torch.tensor(s + [EOS])
    return src, tgt_in, tgt_out


rng = random.Random(0)
test_strings = [random_string(rng) for _ in range(N_TEST)]
held_out = {tuple(s) for s in test_strings}
src, tgt_in, tgt_out = make_batch([[4, 5, 6, 7], [8, 9, 10, 11, 12, 13]])
print("source\n", src, "\ndecoder input\n", tgt_in, "\ndecoder target\n", tgt_out)

# %% [markdown]
# ## 2. Masks
#
# Attention must not look at padding, and the decoder must not look ahead. Both are boolean masks with
# `True` = may attend (page 4):
#
# - `paper.padding_mask(src, PAD)`, shape `(B, 1, 1, S)`: no query may look at a padded source position;
#   used by the encoder's self-attention and by the decoder's cross-attention.
# - `paper.causal_mask(T)`, shape `(T, T)`: position i of the target sees positions 0 .. i only. The decoder
#   ANDs it with the target's own padding mask, which broadcasts to `(B, 1, T, T)`.
#
# The model builds both from the ids itself (`Transformer.encode` and `decode` in `paper.py`), so there is
# nothing to pass; here they are for the batch above.

# %%
src_mask = paper.padding_mask(src, PAD)  # (B, 1, 1, S)
tgt_mask = paper.padding_mask(tgt_in, PAD) & paper.causal_mask(tgt_in.size(1))  # (B, 1, T, T)
print(src_mask[:, 0, 0].int(), "\n", tgt_mask[0, 0].int())  # the first string's target mask

# %% [markdown]
# ## 3. The model
#
# The paper's architecture scaled down, wired by `paper.make_model`: post-LN, ReLU, sinusoidal positions,
# one embedding table shared by the source, the target and the output layer. No dropout: copying random
# strings cannot be memorised, so there is nothing to regularise, and the model learns faster.

# %%
model = paper.make_model(V, n_layers=N_LAYERS, d_model=D_MODEL, d_ff=D_FF, n_heads=N_HEADS, dropout=0.0,
                         max_len=32, pad_id=PAD)
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
logits = model(src, tgt_in)  # (B, T, V): one distribution over the vocabulary per position
print("logits", tuple(logits.shape))

# %% [markdown]
# ## 4. Loss, optimiser, schedule
#
# - **Loss.** Cross-entropy of every real target position against a label-smoothed target: the correct
#   token gets 1 − ε + ε/V and every other token ε/V (§5.4). `ignore_index=PAD` leaves padded positions out,
#   and the mean is taken over the real ones.
# - **Optimiser.** Adam with β₁ = 0.9, β₂ = 0.98, ε = 10⁻⁹ (§5.3).
# - **Schedule.** Equation 3: `d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`, a linear rise over
#   `WARMUP` steps, then a decay with 1/√step. Adam's `lr` is set before every step.


# %%
def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD,
                           label_smoothing=LABEL_SMOOTHING)


def learning_rate(step: int) -> float:
    """Equation 3 of the paper; ``step`` counts from 1."""
    return D_MODEL ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate(1), betas=(0.9, 0.98), eps=1e-9)
print(f"peak learning rate {learning_rate(WARMUP):.2e} at step {WARMUP}")

# %% [markdown]
# ## 5. The loop
#
# Each step: draw a fresh batch, run the model with teacher forcing, compute the loss, back-propagate,
# set the learning rate, take one Adam step. That is all.


# %%
def train_loop(model: paper.Transformer, optimizer: torch.optim.Optimizer, steps: int) -> list[float]:
    """``steps`` training steps on fresh random strings (never a held-out one); the loss of every step."""
    model.train()  # dropout on (none here: dropout=0.0)
    losses, start = [], time.time()
    for step in range(1, steps + 1):
        strings = []
        while len(strings) < BATCH_SIZE:
            s = random_string(rng)
            if tuple(s) not in held_out:
                strings.append(s)
        src, tgt_in, tgt_out = make_batch(strings)  # (B, S), (B, T), (B, T)
        logits = model(src, tgt_in)  # (B, T, V): teacher forcing, every position at once
        loss = loss_fn(logits, tgt_out)  # a number: the mean over the real target tokens
        optimizer.zero_grad()  # forget the previous step's gradients
        loss.backward()  # d loss / d every weight
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)  # equation 3
        optimizer.step()  # Adam: every weight moves a little against its gradient
        losses.append(loss.item())
        if step % LOG_EVERY == 0:
            print(f"step {step:5d}  loss {sum(losses[-LOG_EVERY:]) / LOG_EVERY:.3f}  lr {learning_rate(step):.2e}  "
                  f"{time.time() - start:.0f} s")
    return losses


losses = train_loop(model, optimizer, STEPS)

# %% [markdown]
# With label smoothing the loss cannot reach 0: even a perfect model pays for the ε spread over the other
# tokens. Its floor is the entropy of the smoothed target, computed below.
#
# ## 6. Greedy decoding
#
# At test time there is no target to feed in. Encode the source once; start the decoder from `<bos>`;
# append the most likely next token; repeat until every row has written `<eos>`. This version runs the
# whole prefix through the decoder at every step: simple, and slow for long outputs. The project's
# `greedy_translate` keeps a KV cache instead (page 11); it runs the library's `Seq2SeqTransformer`, so the
# trained weights move into one first (`from_paper`: the same numbers under the library's names), and it
# must give the same tokens, which we check.


# %%
@torch.no_grad()
def greedy_decode(model: paper.Transformer, src: torch.Tensor, max_new_tokens: int) -> list[list[int]]:
    model.eval()
    memory = model.encode(src)  # (B, S, C), once
    out = torch.full((len(src), 1), BOS)  # (B, 1): <bos>
    for _ in range(max_new_tokens):
        logits = model.decode(out, memory, src)[:, -1]  # (B, V): the last position's prediction
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
        if (out == EOS).any(dim=1).all():
            break
    rows = out[:, 1:].tolist()
    return [row[:row.index(EOS)] if EOS in row else row for row in rows]


src, _, _ = make_batch(test_strings)
predictions = greedy_decode(model, src, max_new_tokens=MAX_LEN + 1)
exact_match = sum(p == s for p, s in zip(predictions, test_strings)) / len(test_strings)
print(f"exact match on {len(test_strings)} held-out strings: {exact_match:.1%}")
for s, p in list(zip(test_strings, predictions))[:5]:
    print("  ", "ok" if p == s else "XX", s, "->", p)

smoothed = torch.full((V,), LABEL_SMOOTHING / V)
smoothed[4] += 1 - LABEL_SMOOTHING
floor = -(smoothed * smoothed.log()).sum().item()
print(f"last training loss {losses[-1]:.3f}; the floor with label smoothing {LABEL_SMOOTHING}: {floor:.3f}")

config = ModelConfig(arch="seq2seq", vocab_size=V, d_model=D_MODEL, n_heads=N_HEADS, n_layers=N_LAYERS, d_ff=D_FF,
                     max_len=32, dropout=0.0)  # the seq2seq family's defaults are the paper's settings
library_model = from_paper(model, config)
library = greedy_translate(library_model, src, src != PAD, bos_id=BOS, eos_id=EOS, max_new_tokens=MAX_LEN + 1)
assert library == predictions, "the cached decoder and the plain loop disagree"
print("the library's greedy_translate (with the KV cache) gives the same tokens as the plain loop")
if not TINY:
    assert exact_match > 0.95, exact_match

# %% [markdown]
# ## What the full trainer adds
#
# `scratchformer.train.train` (and `scratchformer train` on the command line) runs this same step,
# plus what a real run needs: validation and test evaluation, checkpoints that resume bit for bit, batches
# by token count (§5.1), gradient accumulation and clipping, several processes (DDP), mixed precision,
# AdamW with weight decay on the matrices only, other schedules (cosine), early stopping, and logs
# (`metrics.jsonl`, TensorBoard), and the paper's checkpoint averaging: `average_last=N` keeps the mean of
# the last N saves, as §6.1 averaged the last 5 or 20 checkpoints (`ema_decay` keeps a moving average
# instead; page 10).
#
# Things to try here: `LABEL_SMOOTHING = 0.0` (the loss now goes towards 0); `WARMUP = 1` (no warm-up:
# does this post-LN model still train?); reverse the strings (`tgt = s[::-1]`).
