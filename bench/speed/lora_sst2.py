"""LoRA against full fine-tuning (and against training the head alone) on SST-2, from all-MiniLM-L6-v2, at the same
budget: test accuracy, seconds a step, peak memory, the checkpoint's size.

    SCRATCHFORMER_DATA=../shared/data python bench/speed/lora_sst2.py                  # 3 seeds, 1,000 steps each
    SCRATCHFORMER_DATA=../shared/data python bench/speed/lora_sst2.py --seeds 1 --steps 100 --configs full lora

Each run is ``scratchformer train --preset sst2-minilm max_steps=STEPS eval_every=STEPS seed=S`` plus its
configuration's settings, in a fresh child process, the configurations taking turns seed by seed:

    full      every weight trains (the preset: lr 1e-4)
    lora      lora_rank=8 on W^Q and W^V (the LoRA paper's choice; lora_alpha 16), lr 1e-3: LoRA wants a rate about
              10x higher
    lora-attn lora_rank=8 on attention's four projections (query, key, value, output), lr 1e-3
    lora-all  lora_rank=8 on every projection (query, key, value, output, ff), lr 1e-3
    head      trainable=head: the classification head alone, lr 1e-3

Measured: the test accuracy (the 872 sentences of GLUE's validation set, as the preset measures it), the seconds a
training step takes (the train rows of ``metrics.jsonl``, between step 50 and the last step: no evaluation, no
loading), the peak resident memory of the child (``VmHWM``), the size of ``best/model.safetensors``, and the weights
that train (the run's own line). Reported: each configuration's mean over the seeds, and LoRA's ratios to full
fine-tuning (goals: accuracy within 1 point, at least 1.3x faster a step, a checkpoint at least 20x smaller).
``--json FILE`` writes every run's numbers. The validation accuracy (SST-2's ``dev`` phrases, held out from training)
is reported beside the test's: LoRA's rate was chosen on it, never on the test sentences
(``--configs lora --seeds 1 --lora-lr 2e-3`` runs one candidate).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONFIGS = {"full": [], "lora": ["lora_rank=8", "lora_targets=query,value", "lr=1e-3"],
           "lora-attn": ["lora_rank=8", "lora_targets=query,key,value,output", "lr=1e-3"],
           "lora-all": ["lora_rank=8", "lora_targets=all", "lr=1e-3"], "head": ["trainable=head", "lr=1e-3"]}
CHILD = ("import sys\nfrom scratchformer.app.cli import main\ncode = main(sys.argv[1:])\n"
         "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]\n"
         "print('PEAK_KB', peak, file=sys.stderr)\nsys.exit(code)\n")


def settings(config: str, lora_lr: str) -> list[str]:
    """The configuration's own settings, with ``--lora-lr`` in place of a LoRA configuration's rate."""
    if not (lora_lr and config.startswith("lora")):
        return CONFIGS[config]
    return [w for w in CONFIGS[config] if not w.startswith("lr=")] + [f"lr={lora_lr}"]


def one_run(config: str, seed: int, steps: int, out: Path, threads: int, lora_lr: str = "") -> dict:
    words = ["train", "--preset", "sst2-minilm", f"max_steps={steps}", f"eval_every={steps}", f"seed={seed}",
             f"num_threads={threads}", "log_every=50", *settings(config, lora_lr), "--out", str(out)]
    done = subprocess.run([sys.executable, "-c", CHILD, *words], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{config} seed {seed} failed:\n{done.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r.get("split") == "train"]
    first, last = train[0], train[-1]
    trains = (re.search(r"([\d,]+) of [\d,]+ weights train", done.stderr)  # LoRA, trainable=head: the run says
              or re.search(r"([\d,]+) parameters", done.stderr))  # full fine-tuning: every parameter
    return {"config": config, "seed": seed, "steps": steps,
            "test_accuracy": next(r for r in rows if r.get("split") == "test")["accuracy"],
            "val_accuracy": [r for r in rows if r.get("split") == "val"][-1]["accuracy"],
            "s_per_step": (last["time_s"] - first["time_s"]) / (last["step"] - first["step"]),
            "peak_mb": int(re.search(r"PEAK_KB (\d+)", done.stderr).group(1)) / 1024,  # type: ignore[union-attr]
            "checkpoint_mb": (out / "best" / "model.safetensors").stat().st_size / 1e6,
            "trained_weights": int(trains.group(1).replace(",", ""))}  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, help="run this seed only (seeds side by side, one process each)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--configs", nargs="+", default=["full", "lora", "lora-all", "head"], choices=list(CONFIGS))
    parser.add_argument("--json", type=Path, help="write every run's numbers here")
    parser.add_argument("--lora-lr", default="", help="the LoRA configurations' learning rate (default: their own)")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in ([args.seed] if args.seed is not None else range(args.seeds)):
            for config in args.configs:
                run = one_run(config, seed, args.steps, Path(tmp) / f"{config}-{seed}", args.threads, args.lora_lr)
                runs.append(run)
                print(json.dumps(run), flush=True)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    mean = {c: {k: statistics.mean(r[k] for r in runs if r["config"] == c) for k in
                ("test_accuracy", "val_accuracy", "s_per_step", "peak_mb", "checkpoint_mb")} for c in args.configs}
    print(f"\nsst2-minilm, {args.steps} steps of 32 sentences, mean of {args.seeds} seed(s), {args.threads} threads")
    print("| configuration | weights that train | validation accuracy | test accuracy | s / step | peak memory | "
          "checkpoint |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in args.configs:
        m, trained = mean[c], next(r["trained_weights"] for r in runs if r["config"] == c)
        print(f"| {c} ({' '.join(settings(c, args.lora_lr)) or 'the preset'}) | {trained:,} | "
              f"{100 * m['val_accuracy']:.2f} % | {100 * m['test_accuracy']:.2f} % | {m['s_per_step']:.3f} | "
              f"{m['peak_mb']:,.0f} MB | {m['checkpoint_mb']:.1f} MB |")
    if "full" in mean and "lora" in mean:
        full, lora = mean["full"], mean["lora"]
        print(f"\nLoRA against full fine-tuning: accuracy {100 * (lora['test_accuracy'] - full['test_accuracy']):+.2f} "
              f"points (goal: within 1), {full['s_per_step'] / lora['s_per_step']:.2f}x faster a step (goal: 1.3x), "
              f"peak memory {lora['peak_mb'] / full['peak_mb']:.2f}x, checkpoint "
              f"{full['checkpoint_mb'] / lora['checkpoint_mb']:.0f}x smaller (goal: 20x)")


if __name__ == "__main__":
    main()
