"""How much memory does each process hold, and how long does a step take, when a GPT-2-small-shaped model trains
sharded (``shard=fsdp``, FSDP2) on 1, 2 and 4 processes, against DDP on as many?

    python bench/speed/fsdp_memory.py                     # 1, 2 and 4 processes, each way: about 25 min on 2 cores
    python bench/speed/fsdp_memory.py --processes 2 --rounds 1 --steps 2

Each configuration runs in a torchrun of its own (fresh processes: one's memory is not another's), CPU and gloo,
the two ways taking turns at each process count. The model is ``gpt2-small`` (124M weights, float32), built and
sharded as ``train`` does it (``train/fsdp.py``: each block, then the root) or wrapped by DDP, trained with fused
AdamW on one global batch of ``--rows`` x ``--tokens`` random token ids (each process its share). Per process:

- the state at rest after a step, counted tensor by tensor: the process's own pieces of the weights, of their
  gradients (just before they are cleared) and of AdamW's two moments: 16 bytes a weight, divided by N when sharded;
- the largest group FSDP2 gathers whole at once (a block, or the root: embeddings, final norm, tied head), for the
  goal "1/N of the unsharded state, plus the largest block gathered";
- the peak resident memory above what the process held before the model was built (``ru_maxrss``): the state, the
  gathered weights and gradients, the activations of its share of the batch, DDP's gradient buckets, allocator slack;
- the step time (forward, backward, clipping, AdamW): in ``--rounds`` runs of each way taking turns (without the
  memory run's glibc setting, which slows allocation), the median of ``--steps`` after one to warm up, of the slowest
  process; the table gives the median of the rounds, the JSON each.

It prints the table (RESULTS.md, "Past one device: FSDP2", has it); ``--json FILE`` also writes every measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MB = 1e6


def _rss() -> int:
    """This process's resident memory now, in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _local_bytes(tensors) -> int:
    total = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def worker(way: str, rows: int, tokens: int, steps: int) -> None:
    """One process of one configuration (started by torchrun): prints rank 0's JSON line."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from scratchformer import ModelConfig
    from scratchformer.families import parts
    from scratchformer.models import build_model
    from scratchformer.nn.model_presets import PRESETS
    from scratchformer.train.fsdp import shard_model
    from scratchformer.train.optim import param_groups

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    before = _rss()
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**PRESETS["gpt2-small"], "dropout": 0.0}))
    weights = sum(p.numel() for p in model.parameters())
    blocks = [sum(p.numel() for p in b.parameters()) for b in parts(model).every_block]
    root, block = 4 * (weights - sum(blocks)), 4 * max(blocks)  # the root: embeddings, final norm, (tied) head
    module = shard_model(model, model, "fp32") if way == "fsdp" else torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (rows, tokens + 1), generator=gen)
    mine = ids.chunk(world)[rank]
    times, state = [], {}
    for step in range(steps + 1):
        dist.barrier()
        start = time.perf_counter()
        logits = module(mine[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), mine[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state = {"weights": _local_bytes(model.parameters()), "gradients": _local_bytes(p.grad for p in
                                                                                        model.parameters()),
                 "optimizer": _local_bytes(t for s in optimizer.state.values() for t in s.values()
                                           if torch.is_tensor(t) and t.dim() > 0)}
        optimizer.zero_grad(set_to_none=True)
        dist.barrier()
        if step:  # the first warms up
            times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    mine_out = {"state": state, "peak_rss_above_start": peak, "step_s": statistics.median(times)}
    everyone = [None] * world
    dist.all_gather_object(everyone, mine_out)
    if rank == 0:
        print("RESULT " + json.dumps({"way": way, "processes": world, "weights": weights, "root_bytes": root,
                                      "block_bytes": block, "per_process": everyone}))
    dist.destroy_process_group()


def run(way: str, processes: int, args: argparse.Namespace, memory: bool) -> dict:
    """One configuration in a torchrun of its own: for its ``memory`` (one step after the warm-up, glibc told to give
    freed blocks back) or for its time (``--steps`` steps, glibc as it comes)."""
    steps = 1 if memory else args.steps
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}", __file__,
           "--worker", way, "--rows", str(args.rows), "--tokens", str(args.tokens), "--steps", str(steps)]
    # glibc serves a large block from its heap once one of that size has been freed (its mmap threshold grows), and
    # keeps the heap's pages after a free: resident memory would then hold freed tensors. A fixed threshold keeps
    # every block of 64 kB or more in its own mapping, given back when freed, so the peak is that of live tensors.
    env = {**os.environ, "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // processes)),
           **({"MALLOC_MMAP_THRESHOLD_": "65536"} if memory else {})}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{way} on {processes} processes failed:\n{r.stderr[-3000:]}")
    return json.loads(line.removeprefix("RESULT "))


def table(results: list[dict]) -> list[str]:
    """RESULTS.md's table: per process, the worst of the processes."""
    by = {(r["way"], r["processes"], r["measured"]): r for r in results}

    def worst(way: str, n: int, key: str) -> float:
        """The largest over the processes; a step's time: the median over the rounds of the slowest process's."""
        if key == "step_s":
            return statistics.median(max(p["step_s"] for p in r["per_process"]) for r in results
                                     if (r["way"], r["processes"], r["measured"]) == (way, n, "time"))
        processes = by[(way, n, "memory")]["per_process"]
        return max(sum(p["state"].values()) if key == "state" else p[key] for p in processes)

    lines = ["| processes | 16 bytes a weight / N | fsdp: state at rest | fsdp: + root and a block gathered | "
             "fsdp: peak memory | DDP: state | DDP: peak memory | fsdp: s a step | DDP: s a step | fsdp / DDP |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["processes"] for r in results}):
        f = by[("fsdp", n, "memory")]
        state = worst("fsdp", n, "state")
        peak_f, peak_d = worst("fsdp", n, "peak_rss_above_start"), worst("ddp", n, "peak_rss_above_start")
        time_f, time_d = worst("fsdp", n, "step_s"), worst("ddp", n, "step_s")
        lines.append(f"| {n} | {16 * f['weights'] / n / MB:,.0f} MB | {state / MB:,.0f} MB | "
                     f"{(state + 2 * (f['root_bytes'] + f['block_bytes'])) / MB:,.0f} MB | {peak_f / MB:,.0f} MB | "
                     f"{worst('ddp', n, 'state') / MB:,.0f} MB | {peak_d / MB:,.0f} MB | {time_f:.2f} | {time_d:.2f} | "
                     f"{time_f / time_d:.2f}x |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rows", type=int, default=4, help="rows of the global batch (each process its share)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens a row")
    parser.add_argument("--steps", type=int, default=3, help="timed steps, after one to warm up")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each way, taking turns")
    parser.add_argument("--worker", choices=("fsdp", "ddp"), help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rows, args.tokens, args.steps)
        return
    results = []
    for n in args.processes:
        for measured in ["memory"] + ["time"] * args.rounds:
            for way in ("fsdp", "ddp"):  # taking turns at each process count
                results.append({**run(way, n, args, measured == "memory"), "measured": measured})
                print(f"{way} on {n} ({measured}): " + json.dumps(results[-1]["per_process"][0]), flush=True)
    lines = table(results)
    print("\n".join(lines))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(), "rows": args.rows,
                                         "tokens": args.tokens, "steps": args.steps, "rounds": args.rounds,
                                         "results": results, "table": lines}, indent=1) + "\n")


if __name__ == "__main__":
    main()
