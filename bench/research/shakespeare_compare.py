"""Which trained character-level GPT is better on the whole Tiny Shakespeare validation text, on equal terms?

Compare trained character-level GPTs on the *whole* Tiny Shakespeare validation text, on equal terms.

    export SCRATCHFORMER_DATA=../shared/data
    python bench/research/shakespeare_compare.py runs/shakespeare-char runs/shakespeare-char-large [--context 64]

The trainer's validation loss averages random windows of each model's own context length (64 characters
for ``shakespeare-char``, 128 for ``shakespeare-char-large``), so the two numbers in RESULTS.md are not
measured the same way: a longer context alone lowers the loss. This script cuts the whole validation text
(the last 10 %) into consecutive, non-overlapping windows of ``--context`` characters (default: 64, the
smallest model's) and reports each model's mean cross-entropy per predicted character over all of them:
same characters, same context, only the weights differ. Needs the checkpoints (``runs/NAME``).
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data import load_tinyshakespeare


@torch.no_grad()
def windowed_loss(model: torch.nn.Module, ids: torch.Tensor, context: int, batch_size: int = 64) -> float:
    """Mean next-character cross-entropy over consecutive windows of ``context`` + 1 characters."""
    n = (len(ids) - 1) // context
    x = ids[: n * context].view(n, context)
    y = ids[1: n * context + 1].view(n, context)
    total = 0.0
    for i in range(0, n, batch_size):
        logits = model(x[i:i + batch_size])
        total += F.cross_entropy(logits.flatten(0, 1).float(), y[i:i + batch_size].flatten(), reduction="sum").item()
    return total / y.numel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories or checkpoints of task=lm on tinyshakespeare")
    parser.add_argument("--context", type=int, default=64, help="characters of context per window (default 64)")
    args = parser.parse_args()
    _, val_text = load_tinyshakespeare()
    for run in args.runs:
        ckpt = load_checkpoint(run)
        ckpt.model.eval()
        ids = torch.tensor(ckpt.tokenizer.encode(val_text), dtype=torch.long)
        context = min(args.context, ckpt.model_config.max_len)
        loss = windowed_loss(ckpt.model, ids, context)
        print(json.dumps({"run": run, "context": context, "characters": (len(ids) - 1) // context * context,
                          "val_loss": round(loss, 4), "parameters": sum(p.numel() for p in ckpt.model.parameters())}))


if __name__ == "__main__":
    main()
