"""Which of torch's three AdamW implementations is fastest on the CPU (and so the one the trainer uses)?

AdamW on the CPU: torch's three implementations side by side, to choose the one the trainer uses.

    python bench/research/adamw_speed.py                   # about a minute on 2 cores
    python bench/research/adamw_speed.py --rounds 9 --threads 1

torch.optim.AdamW has a per-parameter loop of small tensor operations (``foreach=False``, torch's choice on
the CPU), "foreach" (the same operations on lists of tensors at once; torch has no CPU kernels for them, so
on the CPU they fall back to a loop) and ``fused=True`` (one kernel per parameter group that does the whole
update). Measured: the optimizer step alone, at two GPT sizes with scratchformer's two parameter groups
(decayed matrices, the rest), with the same random gradients; and a whole training step (forward,
cross-entropy, backward, clipping, AdamW) at nanoGPT's CPU configuration. The contestants take turns
(round-robin) so that slow phases of a shared machine hit them all; medians and the range are reported.
The JSON goes to ``results/bench/adamw_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from scratchformer import GPT, ModelConfig
from scratchformer.train.optim import param_groups

KINDS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
SIZES = {"small (d 128, 4 layers: shakespeare-char)": dict(d_model=128, n_heads=4, n_layers=4, d_ff=512, max_len=64),
         "mid (d 384, 6 layers)": dict(d_model=384, n_heads=6, n_layers=6, d_ff=1536, max_len=256)}
ROOT = Path(__file__).resolve().parents[2]


def model(size: dict) -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(arch="gpt", vocab_size=65, dropout=0.0, bias=False, **size))


def rounds(contestants: dict, n_rounds: int) -> dict[str, list[float]]:
    """``{name: run()}`` -> milliseconds per call of each, one list entry per round (round-robin)."""
    for run in contestants.values():
        run()  # warm-up (and optimizer state created)
    times: dict[str, list[float]] = {k: [] for k in contestants}
    for _ in range(n_rounds):
        for name, run in contestants.items():
            t = time.perf_counter()
            n = run()
            times[name].append((time.perf_counter() - t) / n * 1000)
    return times


def optimizer_steps(size: dict, repeat: int) -> dict:
    contestants = {}
    for kind, options in KINDS.items():
        m = model(size)
        for p in m.parameters():
            p.grad = torch.randn_like(p) * 1e-3
        opt = torch.optim.AdamW(param_groups(m, 0.1), lr=1e-4, **options)

        def run(opt: torch.optim.Optimizer = opt) -> int:
            for _ in range(repeat):
                opt.step()
            return repeat
        contestants[kind] = run
    return contestants


def training_steps(size: dict, repeat: int) -> dict:
    x = torch.randint(0, 65, (12, size["max_len"]))
    y = torch.randint(0, 65, (12, size["max_len"]))
    contestants = {}
    for kind, options in KINDS.items():
        m = model(size)
        opt = torch.optim.AdamW(param_groups(m, 0.1), lr=1e-3, betas=(0.9, 0.99), **options)

        def run(m: GPT = m, opt: torch.optim.Optimizer = opt) -> int:
            for _ in range(repeat):
                F.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
                torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            return repeat
        contestants[kind] = run
    return contestants


def report(title: str, times: dict[str, list[float]]) -> dict:
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{title}")
    for k, v in times.items():
        print(f"  {k:<9} median {med[k]:8.2f} ms (range {min(v):.2f}-{max(v):.2f})   "
              f"{med['for-loop'] / med[k]:.2f}x the for-loop's speed")
    return {k: {"median_ms": med[k], "min_ms": min(v), "max_ms": max(v), "rounds_ms": v} for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="round-robin rounds (median reported)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "adamw_speed.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = (f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}, "
               f"{os.cpu_count()} CPUs, {platform.processor() or 'processor unknown'}")
    print(machine)
    result: dict = {"machine": machine, "rounds": args.rounds, "optimizer_step": {}, "training_step": {}}
    for name, size in SIZES.items():
        n = sum(p.numel() for p in model(size).parameters())
        times = rounds(optimizer_steps(size, 20 if "small" in name else 3), args.rounds)
        result["optimizer_step"][name] = {"parameters": n, **report(f"AdamW step alone, {name}, {n:,} parameters",
                                                                     times)}
    small = next(iter(SIZES))
    times = rounds(training_steps(SIZES[small], 5), args.rounds)
    result["training_step"][small] = report(f"whole training step, {small}, batch 12 x 64 tokens", times)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
