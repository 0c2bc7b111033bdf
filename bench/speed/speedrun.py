"""How close does a recipe come to nanoGPT's GPU result on Tiny Shakespeare (1.4697) in 10 minutes on this CPU?

    SCRATCHFORMER_DATA=../shared/data python bench/speed/speedrun.py --out runs/speedrun \
        [--preset shakespeare-char-speedrun] [--seeds 1337 1338 1339] [key=value ...]

Each seed runs ``scratchformer train --preset P seed=S [key=value ...] --out OUT/seed-S`` as its own process and
times it from start to exit (data preparation and the run's own last evaluation included): that is the wall time
the budget bounds. Then the kept checkpoint is scored on the whole validation block, the last 10 % of Tiny
Shakespeare (111,540 characters, every character predicted once in consecutive windows), as ``scratchformer
evaluate --ckpt RUN --data VAL.txt`` computes it; the run's own evaluations during training (``eval_batches``
random windows, nanoGPT's estimate) are reported beside it. The time to reach 1.50 and 1.47 is read off those
evaluations (training seconds since the run started training, ``time_s`` in ``metrics.jsonl``).

Before every run the machine's float32 matrix-multiply peak is measured the same way (2048 x 2048 by 2048 x 2048,
2 threads, best of 10) and printed beside its timings, so that runs on different machines can be compared. Writes
``OUT/speedrun.json`` and, with matplotlib, ``OUT/speedrun.png`` (validation loss against wall time, every seed).
``--records A/speedrun.json B/speedrun.json --out records.png`` draws several recipes in one picture.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

THRESHOLDS = (1.50, 1.47)


def matmul_peak() -> float:
    """GFLOP/s of a float32 2048 x 2048 matrix product on 2 threads, best of 10."""
    torch.set_num_threads(2)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = float("inf")
    for _ in range(10):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * 2048 ** 3 / best / 1e9


def validation_block(out: Path) -> Path:
    """The last 10 % of Tiny Shakespeare as a file (the preset's validation split, by nanoGPT's cut)."""
    from scratchformer.data.named import load_tinyshakespeare

    path = out / "val.txt"
    path.write_text(load_tinyshakespeare()[1], encoding="utf-8")
    return path


def run_seed(out: Path, preset: str, seed: int, words: list[str], val: Path) -> dict:
    run = out / f"seed-{seed}"
    peak = matmul_peak()
    argv = [sys.executable, "-m", "scratchformer", "train", "--preset", preset, f"seed={seed}", *words, "--quiet",
            "--out", str(run)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"speedrun: seed {seed} failed: {done.stderr.strip().splitlines()[-1]}")
    scored = subprocess.run([sys.executable, "-m", "scratchformer", "evaluate", "--ckpt", str(run), "--data",
                             str(val)], capture_output=True, text=True, check=True)
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["split"] == "val"]
    reached = {str(t): next((r["time_s"] for r in evals if r["loss"] <= t), None) for t in THRESHOLDS}
    steps = json.loads((run / "last" / "config.json").read_text())["step"]
    estimate = json.loads((run / "config.json").read_text())["train"]["max_steps"]  # before the fits at evaluations
    return {"seed": seed, "wall_s": round(wall, 1), "steps": steps, "first_estimate": estimate,
            "matmul_gflops": round(peak, 1),
            "whole_block_loss": round(json.loads(scored.stdout)["loss"], 4),
            "random_windows_loss": round(evals[-1]["loss"], 4), "training_s_to": reached,
            "curve": [(r["time_s"], r["loss"]) for r in evals]}


def plot_records(summaries: list[Path], path: Path) -> None:
    """One picture of one or several ``speedrun.json`` files: every seed's curve, one colour per recipe (nothing
    without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return

    fig, ax = plt.subplots(figsize=(7.2, 4.2), dpi=100)
    for i, file in enumerate(summaries):
        summary = json.loads(file.read_text())
        label = f"{summary['preset']} {' '.join(summary['words'])}".strip()
        seeds = len(summary["runs"])
        label += f": {summary['whole_block_mean']:.4f} ({seeds} seed{'s' if seeds > 1 else ''})"
        for j, row in enumerate(summary["runs"]):
            t, loss = zip(*row["curve"])
            ax.plot([s / 60 for s in t], loss, color=f"C{i}", marker=".", linewidth=1,
                    label=label if j == 0 else None)
    for threshold in THRESHOLDS:
        ax.axhline(threshold, color="grey", linewidth=0.6, linestyle="--")
    ax.set(xlabel="training minutes", ylabel="validation loss (random windows)", ylim=(1.4, 2.2),
           title="Tiny Shakespeare on 2 CPU cores (legend: whole-block loss, mean of seeds)")
    ax.legend(fontsize=7.5)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="the runs' folder (with --records: the PNG)")
    parser.add_argument("--records", nargs="+", type=Path, metavar="SPEEDRUN_JSON",
                        help="draw these recipes' curves into one picture (--out) instead of running")
    parser.add_argument("--preset", default="shakespeare-char-speedrun")
    parser.add_argument("--seeds", nargs="+", default=["1337"], help="one run per seed (default 1337)")
    parser.add_argument("words", nargs="*", metavar="key=value", help="settings changed from the preset")
    args = parser.parse_args()
    if args.records:
        return plot_records(args.records, args.out)
    # key=value words may follow --seeds: they are settings, not seeds
    args.words = [*[w for w in args.seeds if "=" in w], *args.words]
    try:
        args.seeds = [int(s) for s in args.seeds if "=" not in s]
    except ValueError:
        parser.error(f"--seeds takes whole numbers: {' '.join(args.seeds)}")
    args.out.mkdir(parents=True, exist_ok=True)
    val = validation_block(args.out)
    rows = []
    for seed in args.seeds:
        row = run_seed(args.out, args.preset, seed, args.words, val)
        rows.append(row)
        to = ", ".join(f"{t}: {s / 60:.1f} min" if s is not None else f"{t}: not reached"
                       for t, s in row["training_s_to"].items())
        print(f"seed {seed}: {row['wall_s'] / 60:.2f} min wall, {row['steps']:,} steps (first estimate "
              f"{row['first_estimate']:,}), whole block "
              f"{row['whole_block_loss']:.4f} (random windows {row['random_windows_loss']:.4f}); {to}; "
              f"matmul peak {row['matmul_gflops']:.1f} GFLOP/s", flush=True)
    losses = [r["whole_block_loss"] for r in rows]
    summary = {"preset": args.preset, "words": args.words, "runs": rows,
               "whole_block_mean": round(sum(losses) / len(losses), 4), "whole_block_spread": round(
                   max(losses) - min(losses), 4)}
    (args.out / "speedrun.json").write_text(json.dumps(summary, indent=1))
    plot_records([args.out / "speedrun.json"], args.out / "speedrun.png")
    print(f"whole block: mean {summary['whole_block_mean']:.4f}, spread {summary['whole_block_spread']:.4f} over "
          f"{len(rows)} seed(s); {args.out / 'speedrun.json'}")


if __name__ == "__main__":
    main()
