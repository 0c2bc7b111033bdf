"""Does learning from rewards beat more imitation at equal cost, for a small GPT on the built-in arithmetic problems?

    python bench/research/grpo_arithmetic.py                       # the full protocol, about 35 minutes on 2 cores
    python bench/research/grpo_arithmetic.py --start-steps 300 --minutes 3 --out runs/grpo-bench   # a quick look

1. **The start**: a character-level GPT trained from scratch with ``task=instruct dataset=arithmetic`` (two-digit sums
   and differences, GSM8K's answer form ``#### N``) for ``--start-steps`` steps, until it solves some of them.
2. **GRPO** from that start for ``--minutes`` minutes (``task=grpo init_from=START dataset=arithmetic max_time=...``,
   the task's defaults: 4 problems x 8 answers a step, DAPO's loss, no KL term).
3. **More instruction tuning** from the same start for the same minutes (``task=instruct init_from=START
   dataset=arithmetic max_time=...``).

Reported: the held-out accuracy (greedy, the 200 test problems, ``evaluate``) of the start and of each, GRPO's steps
per minute and the share of its time spent sampling, and its reward and validation accuracy over training (a figure,
``--figure``). Every run's directory is kept under ``--out``; ``--json`` writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def scratchformer(*argv: str) -> str:
    """``scratchformer ARGV`` in a process of its own (its own clock, two threads); what it printed."""
    done = subprocess.run([sys.executable, "-m", "scratchformer", *argv], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")})
    if done.returncode:
        raise SystemExit(f"scratchformer {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def test_accuracy(run: Path) -> float:
    """The share of the 200 test problems whose greedy answer the ``answer`` reward finds right: what ``evaluate``
    gives a GRPO run as ``accuracy``, here for an instruction run as well (each problem asked in the run's template,
    answered by the decoding engine, at most 64 tokens)."""
    import torch

    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.data.arithmetic import arithmetic_problems
    from scratchformer.generation.engine import Engine
    from scratchformer.generation.requests import Request, Stop
    from scratchformer.tasks.inference import chat_prompt_ids
    from scratchformer.tasks.rewards import answer_reward

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    ckpt = load_checkpoint(run)
    problems = arithmetic_problems(2, "+-")["test"]
    stop = Stop(frozenset(ckpt.tokenizer.eos_ids))
    asked = [Request(chat_prompt_ids(ckpt, [{"role": "user", "content": p["question"]}]), 64, stop=stop)
             for p in problems]
    done = Engine(ckpt.model, ckpt.tokenizer, max_rows=64).run(asked)
    return sum(answer_reward(p, r.choices[0].text) for p, r in zip(problems, done)) / len(problems)


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/grpo-arithmetic")
    parser.add_argument("--start-steps", type=int, default=1500)
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--json")
    parser.add_argument("--figure")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems = ["dataset=arithmetic", "digits=2", "operations=+-"]
    start, grpo, more = out / "start", out / "grpo", out / "more-instruct"
    if not (start / "best").is_dir():
        began = time.perf_counter()
        scratchformer("train", "task=instruct", *problems, "max_len=256", f"max_steps={args.start_steps}",
                      "eval_every=500", "eval_decode=0", "--quiet", "--out", str(start))
        print(f"start: {args.start_steps} steps of task=instruct in {time.perf_counter() - began:.0f} s")
    budget = f"max_time={args.minutes}m"
    scratchformer("train", "task=grpo", f"init_from={start}", *problems, budget, "max_steps=0", "eval_every=50",
                  "--quiet", "--out", str(grpo))
    scratchformer("train", "task=instruct", f"init_from={start}", *problems, budget, "max_steps=0", "eval_every=500",
                  "eval_decode=0", "--quiet", "--out", str(more))
    accuracy = {name: test_accuracy(run) for name, run in (("start", start), ("grpo", grpo), ("more instruct", more))}
    train = [r for r in rows(grpo) if r["split"] == "train"]
    seconds = train[-1]["time_s"] if train else 0.0
    sampled = sum(r.get("sample_s", 0.0) for r in train)
    figures = {"start_steps": args.start_steps, "minutes": args.minutes, "test_accuracy": accuracy,
               "grpo_steps": len(train), "grpo_steps_per_minute": 60 * len(train) / max(seconds, 1e-9),
               "grpo_sampling_share": sampled / max(seconds, 1e-9),
               "more_instruct_steps": max(r["step"] for r in rows(more) if r["split"] == "train")}
    print("| model | held-out accuracy (test, greedy) |\n|---|---:|")
    for name, value in accuracy.items():
        print(f"| {name} | {100 * value:.1f} % |")
    print(f"GRPO: {len(train)} steps in {seconds:.0f} s ({figures['grpo_steps_per_minute']:.1f} a minute), "
          f"{100 * figures['grpo_sampling_share']:.0f} % of it sampling; more instruction tuning: "
          f"{figures['more_instruct_steps']:,} steps")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    if args.figure:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 4.2), dpi=110, layout="constrained")
        ax = fig.subplots()
        ax.plot([r["step"] for r in train], [r["accuracy"] for r in train], lw=1, alpha=0.5,
                label="sampled answers right (training batch)")
        val = [r for r in rows(grpo) if r["split"] == "val"]
        ax.plot([r["step"] for r in val], [r["accuracy"] for r in val], marker="o", label="held-out accuracy (greedy)")
        ax.axhline(accuracy["more instruct"], ls="--", color="C3", label="more instruction tuning, same minutes")
        ax.set_xlabel("GRPO step")
        ax.set_ylabel("share right")
        ax.set_ylim(0, 1)
        ax.set_title("GRPO on two-digit arithmetic, from an instruction-tuned character GPT")
        ax.legend(frameon=False, fontsize=9)
        fig.savefig(args.figure)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
