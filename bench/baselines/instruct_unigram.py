"""The loss a unigram model gets on an instruction run's answers: the floor a Transformer must beat.

    python bench/baselines/instruct_unigram.py --ckpt runs/ts-instruct        # its own data, its own tokenizer

The run's records are read as it read them (its template, its tokenizer, its splits, ``build_task``). The unigram
model is the frequency of each token among the training answers' tokens (their end tokens included), with add-one
smoothing over the vocabulary; its loss is the mean negative log-probability of each validation (and test) answer
token, the same tokens and the same mean as the run's validation loss (``tasks/instruct.py``: the prompt and the
padding are not scored). A model below it has learnt more than which tokens answers use.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.roles import DataFiles
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks import build_task


def answers(task, split: str) -> list[int]:  # noqa: ANN001 - an InstructTask
    """The answer tokens of every row of a split (the end token included), as the loss scores them."""
    rows = task.rows[split]
    return [t for ids, n in zip(rows.fields["ids"], rows.fields["n_prompt"]) for t in ids[n:task.max_len + 1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True, help="a task=instruct run or checkpoint")
    args = parser.parse_args()
    ckpt = load_checkpoint(args.ckpt)
    cfg = TrainConfig.from_dict(ckpt.train)
    task = build_task(cfg, ckpt.model_config, DataFiles.from_dict(ckpt.extra.get("data")), tokenizer=ckpt.tokenizer,
                      quiet=True)
    counts, vocab = Counter(answers(task, "train")), ckpt.tokenizer.vocab_size
    total = sum(counts.values())
    out = {"train_answer_tokens": total, "vocabulary": vocab}
    for split in ("val", "test"):
        if task.has_split(split):
            tokens = answers(task, split)
            loss = -sum(math.log((counts[t] + 1) / (total + vocab)) for t in tokens) / len(tokens)
            out[f"{split}_loss"] = round(loss, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
