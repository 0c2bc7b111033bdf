"""What does DPO change in an instruction-tuned GPT, on preference records it never trained on?

    python bench/research/dpo_preferences.py --dpo runs/ts-dpo                     # the run's test split
    python bench/research/dpo_preferences.py --dpo runs/ts-dpo --split val --out runs/bench/dpo_before_after.json

The DPO run's records are read as it read them (its template, its tokenizer, its splits: ``build_task``), and its
start (``init_from``, the instruction-tuned run) is the reference. Both models, the start ("before") and the DPO run
("after"), are measured on the same held-out records:

- the DPO loss, the rewards, their margin and reward accuracy (before: the start is its own reference, so every
  reward is 0, the loss ln 2 and the accuracy 0 by definition);
- the model's own preference, needing no reference: the share of records whose chosen answer it finds more likely
  than the rejected one, summed over the answer's tokens (``logp``) and per token (``logp_per_token``: the answers
  differ in length);
- its greedy answer to every prompt, compared by chrF (sacreBLEU's sentence chrF) with the record's chosen and
  rejected answers: ``closer_to_chosen`` is the share of answers nearer the chosen one (ties not counted), a check of
  style that needs no judge model; and the greedy answers to the first ``--prompts`` prompts, before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.roles import DataFiles
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks import build_task
from scratchformer.tasks.dpo import answer_logps


@torch.no_grad()
def own_preference(task, model, split: str) -> dict[str, float]:  # noqa: ANN001 - a DPOTask
    """The share of records whose chosen answer ``model`` finds more likely than the rejected: in all, and per
    token."""
    rows = task.rows[split]
    n = len(rows)
    batch = task.examples(split, range(n))
    logps = answer_logps(model.eval(), batch)  # (n, 2)
    tokens = (batch["y"] != -100).sum(-1).clamp(min=1)  # (n, 2): each answer's scored tokens (with <eos>)
    return {"logp_prefers_chosen": float((logps[:, 0] > logps[:, 1]).float().mean()),
            "logp_per_token_prefers_chosen": float(((logps / tokens)[:, 0] > (logps / tokens)[:, 1]).float().mean())}


def measure(task, model, split: str) -> dict[str, float]:  # noqa: ANN001 - a DPOTask
    scores = task.report(model, split)
    return {**{k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()},
            **{k: round(v, 4) for k, v in own_preference(task, model, split).items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dpo", required=True, help="a task=dpo run (its init_from is the model before DPO)")
    parser.add_argument("--split", default="test", choices=["val", "test"])
    parser.add_argument("--prompts", type=int, default=5, help="greedy answers shown before and after")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    after = load_checkpoint(args.dpo)
    cfg = TrainConfig.from_dict(after.train)
    before = load_checkpoint(cfg.init_from)
    task = build_task(cfg, after.model_config, DataFiles.from_dict(after.extra.get("data")),
                      tokenizer=after.tokenizer, template=after.extra.get("template"), quiet=True,
                      log=lambda line: print(line, file=sys.stderr))
    shown = range(min(args.prompts, len(task.rows[args.split])))
    rows = task.rows[args.split]
    out = {"split": args.split, "records": len(rows), "dpo": args.dpo, "before_dpo": cfg.init_from, "beta": task.beta,
           "before": measure(task, before.model, args.split), "after": measure(task, after.model, args.split),
           "answers": [{"prompt": p, "before": b, "after": a, "chosen": c, "rejected": r} for p, b, a, c, r in zip(
               rows.texts("prompt", shown), task.answers(before.model, args.split, shown),
               task.answers(after.model, args.split, shown), rows.values("chosen.text", shown),
               rows.values("rejected.text", shown))]}
    text = json.dumps(out, indent=2, ensure_ascii=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
