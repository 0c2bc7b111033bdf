# %% [markdown]
# # 3. A character-level GPT on Tiny Shakespeare
#
# A **GPT** is the Transformer's decoder on its own: no encoder, no cross-attention, just masked
# self-attention and feed-forward layers that read a text and predict, at every position, the next
# token. Here a token is a single character, and the text is Tiny Shakespeare (1.1 million characters of
# the plays, the corpus of char-rnn and nanoGPT).
#
# In this notebook we:
#
# 1. find the data (or fall back to a short built-in text if it is not available);
# 2. train a small GPT with `scratchformer.train.train` and read its validation loss;
# 3. generate text with `scratchformer.generation.generate`: greedy, then sampled with a temperature and
#    top-k, and see what the **KV cache** does and that it changes nothing but the speed.

# %%
# Parameters. SCRATCHFORMER_NOTEBOOK_TINY=1 (set by the test suite) trains a tiny model for a few steps
# on a slice of the text: it runs in seconds and writes gibberish. Leave it unset for the real run
# (about a minute or two on a laptop CPU), which writes recognisably Shakespeare-shaped gibberish.
import os

TINY = os.environ.get("SCRATCHFORMER_NOTEBOOK_TINY") == "1"

if TINY:
    MODEL = dict(max_len=32, n_layers=1, n_heads=2, d_model=32, d_ff=64, dropout=0.0, bias=False)
    MAX_STEPS, TRAIN_LIMIT, EVAL_BATCHES, NEW_TOKENS = 10, 20_000, 2, 60
else:
    # nanoGPT's CPU configuration for this data (the shakespeare-char preset): block 64, 4 layers, 4 heads
    MODEL = dict(max_len=64, n_layers=4, n_heads=4, d_model=128, d_ff=512, dropout=0.0, bias=False)
    MAX_STEPS, TRAIN_LIMIT, EVAL_BATCHES, NEW_TOKENS = 1500, 0, 20, 400

# %%
# ruff: noqa: E402  (in a notebook the imports come after the parameters cell)
import math
import tempfile
import time
from pathlib import Path

import torch

from scratchformer.data.named import cache_dir, find_dataset
from scratchformer.errors import DataError
from scratchformer.generation import generate
from scratchformer.settings.resolve import resolve
from scratchformer.train import train

print("TINY mode" if TINY else "full mode")

# %% [markdown]
# ## The data
#
# Named datasets are looked up in the folder given by the `SCRATCHFORMER_DATA` environment variable,
# then in the cache `~/.cache/scratchformer`; if they are in neither, scratchformer downloads them from
# their public source (checking a sha256). The test suite points `SCRATCHFORMER_DATA` at a local copy.
#
# If the file is missing and cannot be downloaded (offline, or tiny mode, which never downloads), we
# fall back to a short built-in text: a few public-domain Shakespeare passages written to a temporary
# file and given to the trainer as our own data, the way `scratchformer train task=lm --data FILE` does.
# The model will then learn little (the text is tiny), but every step below still works.

# %%
FALLBACK_TEXT = """\
Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall Death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.

HAMLET:
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them. To die: to sleep;
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to, 'tis a consummation
Devoutly to be wish'd. To die, to sleep;
To sleep: perchance to dream: ay, there's the rub;
For in that sleep of death what dreams may come
When we have shuffled off this mortal coil,
Must give us pause.

JAQUES:
All the world's a stage,
And all the men and women merely players:
They have their exits and their entrances;
And one man in his time plays many parts,
His acts being seven ages.

ROMEO:
But, soft! what light through yonder window breaks?
It is the east, and Juliet is the sun.
Arise, fair sun, and kill the envious moon,
Who is already sick and pale with grief,
That thou her maid art far more fair than she.
"""


def local_copy() -> Path | None:
    """Tiny Shakespeare in $SCRATCHFORMER_DATA or the cache, without downloading anything."""
    folders = [Path(os.environ["SCRATCHFORMER_DATA"])] if os.environ.get("SCRATCHFORMER_DATA") else []
    folders.append(cache_dir())
    return next((f / "tinyshakespeare.txt" for f in folders if (f / "tinyshakespeare.txt").is_file()), None)


found = local_copy()
if found is None and not TINY:
    try:
        found = find_dataset("tinyshakespeare")  # downloads into the cache
    except DataError as err:
        print("could not download Tiny Shakespeare:", err)

tmp = tempfile.TemporaryDirectory(prefix="scratchformer-gpt-")
if found is not None:
    print("Tiny Shakespeare:", found)
    DATASET, DATA_PATHS = "tinyshakespeare", []
else:
    print("Tiny Shakespeare is not available: training on the built-in text instead (expect little learning)")
    fallback = Path(tmp.name) / "fallback.txt"
    fallback.write_text(FALLBACK_TEXT, encoding="utf-8")
    DATASET, DATA_PATHS = None, [str(fallback)]
    MODEL["max_len"] = min(MODEL["max_len"], 32)  # the 10 % validation slice is only ~200 characters

# %% [markdown]
# ## The training configuration
#
# `MODEL` (above) holds the `ModelConfig` fields we choose; the family follows from the task (`task="lm"`: a
# decoder-only GPT), as on the command line (`scratchformer train task=lm ...`), and the vocabulary size from
# the tokenizer. `resolve` applies these settings over the task's own defaults, in the one order every run
# uses, and builds the run's configs once: `run.model` (a `ModelConfig`) and `run.train` (a `TrainConfig`).
#
# `task="lm"` means language modelling: the trainer cuts random windows of `max_len` characters out of
# the text, feeds `x = text[i : i + max_len]` and asks for `y = text[i + 1 : i + max_len + 1]` at every
# position (the causal mask makes sure position *t* only sees `x[0..t]`). The loss is the cross-entropy
# of the next character, averaged over all positions. Tiny Shakespeare is split 90 % / 10 % by position
# into training and validation text; `train_limit` keeps only the first N training characters.
#
# The optimisation settings are nanoGPT's for this data, with the two that this project tuned on the
# validation split (peak learning rate 4e-3, 200 warm-up steps); see
# `src/scratchformer/settings/presets/shakespeare-char.toml`.

# %%
run = resolve(data=DATA_PATHS, overrides=dict(
    task="lm", dataset=DATASET, tokenizer="char", train_limit=TRAIN_LIMIT,
    max_steps=MAX_STEPS, batch_size=8 if TINY else 12, lr=4e-3, min_lr=1e-4, schedule="cosine",
    warmup_steps=min(200, MAX_STEPS // 5), beta1=0.9, beta2=0.99, adam_eps=1e-8, weight_decay=0.1,
    grad_clip=1.0, eval_every=MAX_STEPS if TINY else 250, eval_batches=EVAL_BATCHES,
    log_every=5 if TINY else 100, seed=1337, **MODEL,
))
cfg = run.train
print(cfg)

# %% [markdown]
# ## Training
#
# `train` returns a `TrainResult`: the trained model (reloaded from the checkpoint with the best
# validation loss), the task (with its tokenizer), and the last validation metrics.
#
# How good is a loss? A model that knows nothing gives every character the same probability 1 / V, a
# loss of ln V. The loss is in nats per character; `perplexity = exp(loss)` is the number of characters
# the model is, on average, as unsure between as if it picked uniformly among them.

# %%
result = train(run, Path(tmp.name) / "run", echo=print)
model, tok = result.model.eval(), result.task.tokenizer
V = tok.vocab_size
n_params = sum(p.numel() for p in model.parameters())
print(f"\ntrained {result.step} steps in {result.seconds:.1f} s; {n_params:,} parameters")
print(f"vocabulary: {V} tokens (4 special + {V - 4} characters)")
val_loss = result.val["loss"]
print(f"validation loss {val_loss:.3f} nats/char (perplexity {math.exp(val_loss):.2f}); "
      f"uniform guessing: {math.log(V):.3f} (perplexity {V})")
if not TINY:
    assert val_loss < math.log(V), "the model should beat uniform guessing"

# %% [markdown]
# ## Generating text
#
# `generate(model, input_ids, max_new_tokens, ...)` continues a prompt `(B, T)` and returns
# `(B, T + max_new_tokens)`: the prompt followed by the new tokens. At each step the model gives logits
# over the vocabulary for the next character; then
#
# - **greedy** (the default) takes the most likely character: deterministic, and quickly repetitive;
# - **sampling** (`do_sample=True`) draws from `softmax(logits / temperature)`. A temperature below 1
#   sharpens the distribution (safer, duller), above 1 flattens it (wilder, more typos); `top_k` first
#   drops all but the k most likely characters, which removes the long tail of unlikely ones. `seed`
#   makes a draw reproducible.
#
# The model only sees its last `max_len` characters; `generate` slides that window along as the text
# grows past it.

# %%
prompt = "ROMEO:" if all(c in tok.chars for c in "ROMEO:") else FALLBACK_TEXT.split("\n")[0]
prompt_ids = torch.tensor([tok.encode(prompt)])  # (1, T)
print("prompt", repr(prompt), "->", tuple(prompt_ids.shape))

out = generate(model, prompt_ids, NEW_TOKENS)
print(f"\n--- greedy, output {tuple(out.shape)} ---")
print(tok.decode(out[0].tolist()))

out = generate(model, prompt_ids, NEW_TOKENS, do_sample=True, temperature=0.8, top_k=20, seed=1)
print("\n--- sampled, temperature 0.8, top_k 20 ---")
print(tok.decode(out[0].tolist()))

for temperature in (0.5, 1.5):
    out = generate(model, prompt_ids, NEW_TOKENS // 4, do_sample=True, temperature=temperature, seed=1)
    print(f"\n--- sampled, temperature {temperature}, no top-k ---")
    print(tok.decode(out[0].tolist()))

# %% [markdown]
# ## The KV cache
#
# Generating token *t + 1* needs the keys and values of all *t* earlier tokens in every layer. Because
# of the causal mask, those never change once computed: earlier positions never see later ones. So
# instead of running the whole sequence through the model at every step, we keep them in a **KV cache**
# and feed only the newest token. `generate` does this by default (`use_cache=True`).
#
# By hand: `model.new_cache(batch_size)` makes an empty cache; each call `model(ids, cache=cache)`
# appends the keys and values of `ids` and attends over everything cached so far. The logits are the
# same as recomputing from scratch, up to float rounding.

# %%
ids = prompt_ids[:, : min(prompt_ids.size(1), model.config.max_len - 8)]
with torch.no_grad():
    cache = model.new_cache(batch_size=1)
    logits = model(ids, cache=cache)  # the whole prompt at once: (1, T, V)
    for _ in range(8):
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (1, 1): greedy next token
        ids = torch.cat([ids, nxt], dim=1)
        logits = model(nxt, cache=cache)  # only the new token: (1, 1, V)
        full = model(ids)  # recompute everything: (1, T + steps, V)
        assert torch.allclose(logits[:, -1], full[:, -1], atol=1e-4)
print("cache length", cache.length, "| cached and recomputed logits agree at every step")
print("keys of layer 0:", tuple(cache.self_attn[0].keys.shape), "(B, H, max_len, D), filled up to", cache.length)

# Same tokens, different speed:
timings = {}
for use_cache in (True, False):
    start = time.perf_counter()
    outs = generate(model, prompt_ids, NEW_TOKENS, use_cache=use_cache)
    timings[use_cache] = (time.perf_counter() - start, outs)
assert torch.equal(timings[True][1], timings[False][1])
print(f"{NEW_TOKENS} greedy tokens: {timings[True][0]:.2f} s with the cache, {timings[False][0]:.2f} s without; "
      "identical output")

# %% [markdown]
# ## What to try next
#
# - Train longer: with `MAX_STEPS = 2000` this is exactly the `shakespeare-char` preset, which reaches a
#   validation loss of 1.792 on these 20 evaluation batches ([results](../docs/reference/results.md);
#   `results/shakespeare-char/`).
# - On the command line: `scratchformer train --preset shakespeare-char --out runs/shakespeare`, then
#   `scratchformer generate --ckpt runs/shakespeare --prompt "ROMEO:" --top-k 50 --seed 1`.
# - Train on your own text: `train(resolve(overrides={"task": "lm", ...}, data=["my_book.txt"]), out)`.

# %%
tmp.cleanup()  # the run directory (checkpoints, logs) was temporary
