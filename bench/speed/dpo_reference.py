"""What does DPO's reference cost: its log-probabilities precomputed once, against the model with its LoRA adapters off
at every step? Peak memory and time, each in its own process, taking turns.

    python bench/speed/dpo_reference.py --init-from runs/ts-instruct --steps 30
    python bench/speed/dpo_reference.py --init-from runs/ts-instruct --steps 30 --out runs/bench/dpo_reference.json

Each row is one ``scratchformer train task=dpo init_from=... dataset=preferences`` run in a child process (``--rounds``
rounds, the rows taking turns; the median reported): full fine-tuning with the precomputed reference (the only one
that applies: the weights it trains are the reference's), then LoRA (rank 8 on every projection) with each
reference. ``--limit N`` trains on the first N records (and validates on N / 10), for a larger model. Reported: the
child's peak resident memory (``ru_maxrss``), the seconds the reference's table took (the run's own line), the
seconds a step takes (from ``metrics.jsonl``, the first step left out) and the whole command's wall time; beside them
the bytes of the model's weights, which a reference kept as a second model would add.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROWS = {  # name -> the settings beyond the common ones
    "full fine-tuning, precomputed": ["reference=precomputed"],
    "LoRA, precomputed": ["lora_rank=8", "lora_targets=all", "lr=1e-3", "reference=precomputed"],
    "LoRA, adapters off": ["lora_rank=8", "lora_targets=all", "lr=1e-3", "reference=adapters"],
}


def child(words: list[str], out: Path) -> dict[str, float]:
    """Run one training command in a child process; its peak memory, timings."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scratchformer", "train", *words, "--out", str(out)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    # the peak of this process's children: the one run (each row is measured from a process of its own, ``--child``)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    table = re.search(r"computed once, before the first step \(([\d.]+) s\)", done.stderr)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    times = [r["time_s"] for r in rows if r["split"] == "train"]
    return {"peak_mb": peak_mb, "table_s": float(table.group(1)) if table else 0.0,
            "step_s": (times[-1] - times[0]) / (len(times) - 1), "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init-from", required=True, help="an instruction-tuned run (or a GPT folder)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="train on the first N records, validate on N / 10 "
                        "(0: all; a larger model's table then takes less time)")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args()
    from scratchformer.checkpoints import load_checkpoint

    weights = sum(p.numel() * p.element_size() for p in load_checkpoint(args.init_from).model.parameters())
    common = ["task=dpo", f"init_from={os.path.abspath(args.init_from)}", "dataset=preferences",
              f"max_steps={args.steps}", f"eval_every={args.steps}", "test_at_end=false", "log_every=1",
              f"num_threads={args.threads}", f"train_limit={args.limit}", f"eval_limit={args.limit // 10}"]
    found: dict[str, list[dict[str, float]]] = {name: [] for name in ROWS}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, (name, words) in enumerate(ROWS.items()):
                run = str(Path(tmp) / f"{r}-{i}")
                done = subprocess.run([sys.executable, __file__, "--child", json.dumps([*common, *words]), run],
                                      capture_output=True, text=True)
                if done.returncode:
                    raise SystemExit(done.stdout + done.stderr[-2000:])
                found[name].append(json.loads(done.stdout))
    out = {"init_from": args.init_from, "steps": args.steps, "rounds": args.rounds, "threads": args.threads,
           "limit": args.limit,
           "weights_mb": round(weights / 1e6, 2),
           "rows": {name: {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
                    for name, runs in found.items()}}
    text = json.dumps(out, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(json.loads(sys.argv[2]), Path(sys.argv[3]))))
    else:
        main()
