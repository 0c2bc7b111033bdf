# %% [markdown]
# # 4. German -> English translation, greedy decoding and beam search
#
# The task the Transformer was invented for: translation. We train a small encoder-decoder on Multi30k,
# 29,000 German image descriptions with their English translations ("Ein Hund rennt durch das Gras." ->
# "A dog runs through the grass."), then decode with the two strategies of the paper:
#
# - **greedy decoding**: at each step take the single most likely next token;
# - **beam search** (§6.1: beam size 4, length penalty alpha = 0.6): keep the 4 best partial translations
#   at every step and pick the best finished one at the end;
#
# and score both with **BLEU** (sacreBLEU), the standard translation metric.
#
# Steps:
#
# 1. train a byte-pair-encoding (BPE) tokenizer and the model with `scratchformer.train.train`;
# 2. translate a few validation sentences with `generation.greedy_translate` and `generation.beam_search`;
# 3. compute BLEU on validation sentences with `scratchformer.tasks.metrics.bleu`;
# 4. load the saved checkpoint and translate new sentences, as `scratchformer translate` does.

# %%
# Parameters. SCRATCHFORMER_NOTEBOOK_TINY=1 (set by the test suite) trains a tiny model for a few steps
# on 300 sentence pairs: it runs in seconds and translates badly. Leave it unset for the real run (a
# few minutes on a laptop CPU): all 29,000 pairs, but a much smaller and shorter run than the multi30k
# preset, so expect rough translations and a modest BLEU.
import os

TINY = os.environ.get("SCRATCHFORMER_NOTEBOOK_TINY") == "1"

if TINY:
    MODEL = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0)
    TRAIN_LIMIT, BPE_VOCAB, MAX_STEPS, MAX_TOKENS, N_EVAL = 300, 500, 5, 600, 8
else:
    MODEL = dict(d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.1)
    TRAIN_LIMIT, BPE_VOCAB, MAX_STEPS, MAX_TOKENS, N_EVAL = 0, 4000, 600, 1500, 200

# %%
# ruff: noqa: E402  (in a notebook the imports come after the parameters cell)
import tempfile
from pathlib import Path

import torch

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.batching import pad_batch
from scratchformer.generation import beam_search, beam_search_hypotheses, greedy_translate, translate_ids
from scratchformer.tasks.inference import translate_texts
from scratchformer.tasks.metrics import bleu
from scratchformer.settings.resolve import resolve
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID
from scratchformer.train import train

print("TINY mode" if TINY else "full mode")

# %% [markdown]
# ## The data
#
# `dataset="multi30k"` is looked up in the folder named by the `SCRATCHFORMER_DATA` environment variable,
# then in `~/.cache/scratchformer`, and downloaded there if missing (the test suite points
# `SCRATCHFORMER_DATA` at a local copy and skips this notebook without one). Its splits: `train` (29,000
# pairs), `val` (1,014) and `test` (`test_2016_flickr`, 1,000). `train_limit` keeps only the first N
# training pairs, `eval_limit` the first N of each held-out split.

# %% [markdown]
# ## Subwords: byte-pair encoding
#
# Characters make sequences long; whole words make the vocabulary huge and leave rare words unknown.
# **BPE** (Sennrich et al., 2016) starts from single characters and repeatedly merges the most frequent
# adjacent pair into a new token, until the vocabulary has the size asked for: frequent words become one
# token, rare ones are spelt out from pieces. A character never seen in training still has no token.
# As in the paper, German and English share one vocabulary (and so one embedding matrix).
# `tokenizer="bpe"` makes the trainer learn it from the training sentences.
#
# The BPE here is GPT-2's variant, *byte-level* BPE: it starts from the 256 possible bytes of UTF-8 text
# instead of characters, so every string can be encoded and nothing is ever unknown (no `<unk>`). Its
# vocabulary shows each byte as a printable symbol. So a piece `Ġein` is " ein" with its leading space
# (`Ġ` stands for the space byte), and `Ã¤` is the two bytes of "ä". Decoding turns them back into text.
# The trainer learns `bpe_vocab_size` tokens.

# %%
run = resolve(overrides=dict(
    task="translate", dataset="multi30k", tokenizer="bpe", bpe_vocab_size=BPE_VOCAB,
    train_limit=TRAIN_LIMIT, eval_limit=N_EVAL,
    max_steps=MAX_STEPS, max_tokens=MAX_TOKENS, batch_size=64, lr=1e-3, min_lr=1e-5, schedule="cosine",
    warmup_steps=max(1, MAX_STEPS // 4), weight_decay=0.0, label_smoothing=0.1, grad_clip=1.0,
    eval_every=MAX_STEPS if TINY else 200, eval_decode=min(N_EVAL, 100), log_every=1 if TINY else 50, seed=0,
    **MODEL,
))
cfg = run.train
print(cfg)

# %% [markdown]
# ## Training
#
# The recipe follows the paper's (§5), scaled down: batches of sentence pairs of similar length holding about
# `max_tokens` tokens, label smoothing 0.1 (§5.4: the model is trained to put 90 % of its probability on the
# right token and spread the rest, which hurts perplexity but helps BLEU), dropout, weight tying, and Adam with
# the paper's β₂ = 0.98 and ε = 10⁻⁹ (AdamW with `weight_decay=0.0` is Adam). Two parts are not the paper's:
# the learning rate warms up and then follows a cosine down to `min_lr`, where the paper's equation 3 decays
# with 1/sqrt(step) (page 10 of the walkthrough explains both), and the gradients are clipped to norm 1. At each
# evaluation the trainer reports the validation loss and the BLEU of greedily decoded validation sentences.

# %%
tmp = tempfile.TemporaryDirectory(prefix="scratchformer-mt-")
RUN_DIR = Path(tmp.name) / "run"
result = train(run, RUN_DIR, echo=print)
model, tok = result.model.eval(), result.task.tokenizer
print(f"\ntrained {result.step} steps in {result.seconds:.1f} s, "
      f"{sum(p.numel() for p in model.parameters()):,} parameters, vocabulary {tok.vocab_size}")
print("validation:", {k: round(v, 3) for k, v in result.val.items()})

# %%
val_pairs = result.task.texts("val")  # (German, English) strings
german, english = val_pairs[0]
pieces = [tok.id_to_token(i) for i in tok.encode(german)]
print(german)
print(f"-> {len(pieces)} BPE tokens:", pieces)
print(f"   {len(german.split())} words; the pieces decode back to the exact sentence:",
      tok.decode(tok.encode(german)) == german)

# %% [markdown]
# ## Greedy decoding and beam search
#
# Both functions take a batch of padded source ids `(B, S)` with its mask `(B, S)` (`True` = real token)
# and the ids of `<bos>` and `<eos>`, and return one list of token ids per sentence, without `<bos>` and
# `<eos>`. The encoder runs once per sentence; the decoder extends the outputs one token at a time with a
# KV cache.
#
# Beam search keeps the `beam_size` best partial translations, ranked by their log-probability
# log P(Y | X). Since every extra token *lowers* that sum, raw log-probabilities favour short outputs; the
# GNMT length penalty divides by lp(Y) = ((5 + |Y|) / 6)^alpha, and alpha = 0.6 is the paper's choice.
# `beam_search_hypotheses` returns the same outputs with their log-probabilities and scores.

# %%
show = val_pairs[:4]
sources = [tok.encode(de, add_eos=True) for de, _ in show]  # the source ends with <eos>, as in training
src, src_mask = pad_batch(sources, PAD_ID)
print("source batch", tuple(src.shape), "mask", tuple(src_mask.shape))

greedy = greedy_translate(model, src, src_mask, bos_id=BOS_ID, eos_id=EOS_ID)
beam = beam_search(model, src, src_mask, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=4, length_penalty=0.6)
hyps = beam_search_hypotheses(model, src, src_mask, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=4, length_penalty=0.6)
assert [h.tokens for h in hyps] == beam

for (de, en), g, b, h in zip(show, greedy, beam, hyps):
    print(f"\nDE:        {de}")
    print(f"reference: {en}")
    print(f"greedy:    {tok.decode(g)}")
    print(f"beam 4:    {tok.decode(b)}   (log P = {h.log_prob:.2f}, score = log P / lp = {h.score:.2f})")

# %% [markdown]
# ## BLEU
#
# BLEU compares the n-grams (1 to 4 words) of the translations with those of the references, over the
# whole corpus, with a penalty for translations that are too short; 0 to 100. `metrics.bleu` runs
# sacreBLEU with its default settings on detokenized text and also returns sacreBLEU's *signature*, the
# string that says exactly how the score was computed (scores are only comparable with the same one).
#
# `generation.translate_ids` decodes many sentences in batches of similar length (`beam=1` is greedy).
# Scores on a few hundred sentences are noisy; the trainer's own test score is in `result.test`.

# %%
eval_pairs = val_pairs[:N_EVAL]
eval_sources = [tok.encode(de, add_eos=True) for de, _ in eval_pairs]
references = [en for _, en in eval_pairs]
scores = {}
for name, k in (("greedy", 1), ("beam 4", 4)):
    outputs = [tok.decode(ids) for ids in translate_ids(model, eval_sources, beam=k, length_penalty=0.6)]
    scores[name], signature = bleu(outputs, references)
    print(f"{name:7s} BLEU {scores[name]:5.2f} on {len(eval_pairs)} validation sentences")
print("signature:", signature)
print("test split (trainer, greedy):", {k: round(v, 3) for k, v in result.test.items()})

# %% [markdown]
# For reference: the full `multi30k` preset, `scratchformer train --preset multi30k --out runs/multi30k`
# (a wider, deeper model trained on all 29,000 pairs for longer: under an hour on 2 CPU cores), reaches
# the BLEU reported in RESULTS.md; `scratchformer evaluate --ckpt runs/multi30k` prints greedy and beam
# BLEU and chrF on the test set.

# %% [markdown]
# ## Using the saved checkpoint
#
# The trainer saved the model, its configuration and the tokenizer in `RUN_DIR/best`. `load_checkpoint`
# gives all three back, and `inference.translate_texts` goes from strings to strings (encode, batch,
# beam search, decode): what `scratchformer translate --ckpt RUN_DIR "..."` runs.

# %%
ckpt = load_checkpoint(RUN_DIR)  # a run directory means its best/ checkpoint
print(type(ckpt.model).__name__, "step", ckpt.step, "|", ckpt.tokenizer)
new_sentences = ["Ein Hund rennt durch das Gras.", "Zwei Kinder spielen am Strand."]
for de, en in zip(new_sentences, translate_texts(ckpt, new_sentences, beam=4, length_penalty=0.6)):
    print(f"{de}  ->  {en}")
with torch.no_grad():  # the reloaded weights are the trained ones
    assert all(torch.equal(a, b) for a, b in zip(ckpt.model.state_dict().values(), model.state_dict().values()))

# %% [markdown]
# ## What to try next
#
# - `beam_size=1` with `length_penalty=0` is exactly greedy decoding; try beam sizes 1, 2, 4, 8 and
#   alpha 0, 0.6, 1.0 and watch BLEU and the output lengths.
# - `scratchformer plot attention --ckpt RUN_DIR --text "Ein Hund rennt durch das Gras."` draws the
#   cross-attention: which German pieces each English piece looks at.

# %%
tmp.cleanup()  # the run directory (checkpoints, logs) was temporary
