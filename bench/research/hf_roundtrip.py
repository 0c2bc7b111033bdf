"""How far apart are a checkpoint's outputs and its Hugging Face export's, on real data?

A checkpoint against its Hugging Face export, on real data: how far apart are their outputs?

    scratchformer export --format hf --ckpt runs/shakespeare-char --out runs/shakespeare-char-hf
    SCRATCHFORMER_DATA=../shared/data python bench/research/hf_roundtrip.py \
        runs/shakespeare-char runs/shakespeare-char-hf

- GPT (``GPT2LMHeadModel``): the validation tenth of Tiny Shakespeare (or ``--data FILE``) in windows of
  ``max_len`` characters, batches of 16 in which every row but the first is left-padded to a random
  length (positions counted over real tokens, as ``generate`` does); the logits at every real position.
  Then 8 prompts continued greedily up to ``max_len`` tokens (GPT-2 has no positions beyond it) by
  scratchformer's ``generate`` and by transformers' ``generate``, left-padded as one batch: how many
  tokens agree.
- Classifier (``BertForSequenceClassification``): the 872 SST-2 test sentences (or ``--data FILE``, a TSV
  of text and label), tokenized by the exported tokenizer (its ids checked against scratchformer's) and
  padded on the right in batches of 32; the class logits and the predicted labels.

Prints the largest |difference| and the largest |logit| (for scale). Runs on one CPU thread.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from pathlib import Path

import torch

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.batching import pad_batch
from scratchformer.generation import generate

PROMPTS = ["ROMEO:", "JULIET:\nO", "First Citizen:\n", "KING RICHARD III:\nNow is", "To be", "What", "MENENIUS:\n",
           "The king"]


def gpt(ckpt, hf_dir: Path, data: Path) -> None:
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    text = data.read_text(encoding="utf-8")
    val = text[int(0.9 * len(text)):]  # the held-out tenth, as nanoGPT and the preset split it
    ids = torch.tensor(ckpt.tokenizer.encode(val))
    assert tok(val, verbose=False)["input_ids"] == ids.tolist(), "the exported tokenizer gives other ids"
    T = ckpt.model_config.max_len
    windows = ids[: len(ids) // T * T].view(-1, T)  # (N, T)
    gen = torch.Generator().manual_seed(0)
    worst, scale, positions = 0.0, 0.0, 0
    with torch.no_grad():
        for batch in windows.split(16):
            keep = torch.randint(1, T + 1, (len(batch),), generator=gen)
            keep[0] = T
            mask = torch.arange(T)[None, :] >= T - keep[:, None]  # (B, T): left padding
            batch = batch.masked_fill(~mask, 0)
            m = mask.long()
            theirs = hf(input_ids=batch, attention_mask=m, position_ids=(m.cumsum(-1) - 1).clamp(min=0)).logits
            ours = ckpt.model(batch, mask)
            worst = max(worst, (theirs[mask] - ours[mask]).abs().max().item())
            scale = max(scale, ours[mask].abs().max().item())
            positions += int(mask.sum())
    print(f"logits at {positions:,} positions ({len(windows)} windows of {T}, left-padded): "
          f"max |difference| {worst:.2e}, largest |logit| {scale:.1f}")

    batch = tok(PROMPTS, padding=True, return_tensors="pt")
    n_new = T - batch["input_ids"].size(1)
    theirs = hf.generate(**batch, max_new_tokens=n_new, do_sample=False, pad_token_id=tok.pad_token_id)
    ours = generate(ckpt.model, batch["input_ids"], n_new, attention_mask=batch["attention_mask"])
    new = slice(batch["input_ids"].size(1), None)
    same = int((theirs[:, new] == ours[:, new]).sum())
    print(f"greedy continuations of {len(PROMPTS)} prompts x {n_new} tokens: {same:,} of {ours[:, new].numel():,} "
          "tokens the same")


def classifier(ckpt, hf_dir: Path, data: Path) -> None:
    import transformers

    hf = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    with data.open(encoding="utf-8", newline="") as f:
        rows = [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)][1:]
    texts, labels = [r[0] for r in rows], [int(r[1]) for r in rows]
    worst, scale, same_ids, ours_right, theirs_right, agree = 0.0, 0.0, 0, 0, 0, 0
    with torch.no_grad():
        for start in range(0, len(texts), 32):
            chunk = texts[start:start + 32]
            batch = tok(chunk, padding=True, return_tensors="pt")
            ids, mask = pad_batch(ckpt.tokenizer.encode_batch(chunk), 0)
            same_ids += sum(a == b for a, b in zip(batch["input_ids"].tolist(), ids.tolist()))
            theirs, ours = hf(**batch).logits, ckpt.model(ids, mask)
            worst = max(worst, (theirs - ours).abs().max().item())
            scale = max(scale, ours.abs().max().item())
            truth = torch.tensor(labels[start:start + 32])
            ours_right += int((ours.argmax(-1) == truth).sum())
            theirs_right += int((theirs.argmax(-1) == truth).sum())
            agree += int((ours.argmax(-1) == theirs.argmax(-1)).sum())
    n = len(texts)
    print(f"{n} sentences: token ids the same for {same_ids}; class logits max |difference| {worst:.2e}, largest "
          f"|logit| {scale:.2f}; same label for {agree}; accuracy {100 * ours_right / n:.2f} % (scratchformer) vs "
          f"{100 * theirs_right / n:.2f} % (transformers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ckpt", help="a scratchformer run or checkpoint directory")
    parser.add_argument("hf", help="its `scratchformer export --format hf` directory")
    parser.add_argument("--data", help="text (GPT) or a TSV of text and label (classifier); default: from "
                                       "$SCRATCHFORMER_DATA")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ckpt = load_checkpoint(args.ckpt)
    architecture = json.loads((Path(args.hf) / "config.json").read_text())["architectures"][0]
    shared = Path(os.environ.get("SCRATCHFORMER_DATA", "../shared/data"))
    print(f"{args.ckpt} ({ckpt.model_config.arch}, step {ckpt.step}) vs {args.hf} ({architecture})")
    if architecture == "GPT2LMHeadModel":
        gpt(ckpt, Path(args.hf), Path(args.data or shared / "tinyshakespeare.txt"))
    else:
        classifier(ckpt, Path(args.hf), Path(args.data or shared / "sst2" / "test.tsv"))


if __name__ == "__main__":
    main()
