"""From which context length is linear attention cheaper than softmax, per generated token and per step?

Softmax vs linear attention (Katharopoulos et al. 2020) as the context grows: time and memory per generated
token and per training step, for a small GPT (d_model 128, 2 layers, 4 heads, d_ff 512, batch 1).

    python bench/research/linear_attention.py [--contexts 256 1024 4096 16384] [--repeats 5] \
        [--out results/linear-attention]

Softmax takes its fast path (``F.scaled_dot_product_attention``, fused on CPU: it never stores the (T, T)
weights) and decodes with the KV cache; linear attention trains with its chunked prefix sums and decodes with
its recurrent state. For every (kind, measurement, context) a fresh Python process builds the model, warms up
once and then times ``--repeats`` rounds, reporting the median CPU time of the measuring thread (the wall
time too, in the JSON: on a busy shared machine it also counts the time other processes held the core; with
``--threads`` above 1 the measuring thread's CPU time misses the other threads' work, so read the wall times):

- generation: a prompt of ``context`` tokens goes into the cache (not timed), then ``--new-tokens`` greedy
  tokens one at a time, as ``generate`` does; time per token;
- training: forward, backward and an AdamW step on one sequence of ``context`` tokens; time per step.

Memory, in the same process: the growth of its peak resident set (``getrusage`` maxrss) over the measurement,
i.e. above the peak after the model was built; for generation, the exact size of what decoding keeps per
sequence (the KV cache: 2 x layers x context x d_model floats; the state: layers x heads x (D^2 + D)); for
training, the exact bytes of the activations autograd keeps for the backward pass.
A process that fails (out of memory, killed) is reported as such. Threads: one (``--threads``). The machine is
shared: before each process the 1-minute load average is waited on (below ``--max-load``, for at most
``--max-wait`` seconds) and recorded beside its numbers. Writes ``linear_attention.json`` and
``linear_attention.txt`` (the table) and ``linear_attention.png`` (16 colours) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

KINDS = ("softmax", "linear")
MODEL = dict(arch="gpt", vocab_size=65, d_model=128, n_heads=4, n_layers=2, d_ff=512, dropout=0.0)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _model(kind: str, max_len: int) -> torch.nn.Module:
    from scratchformer import GPT, ModelConfig

    torch.manual_seed(0)
    return GPT(ModelConfig(**MODEL, max_len=max_len, attention=kind))


def _clocks() -> tuple[float, float]:
    """(wall time, CPU time of this thread): on a shared machine the second is not inflated by the time
    other processes hold the core, only by what they do to caches and memory bandwidth."""
    return time.perf_counter(), time.thread_time()


def _since(start: tuple[float, float], n: int = 1) -> tuple[float, float]:
    wall, cpu = _clocks()
    return (wall - start[0]) / n, (cpu - start[1]) / n


@torch.no_grad()
def _generate_round(model: torch.nn.Module, prompt: torch.Tensor, new_tokens: int) -> tuple[tuple[float, float], int]:
    """(wall, CPU) seconds per token of ``new_tokens`` cached greedy steps after ``prompt``; the cache's bytes."""
    cache = model.new_cache(1, prompt.size(1) + new_tokens)
    token = model(prompt, cache=cache)[:, -1:].argmax(-1)  # the prompt: into the cache, not timed
    start = _clocks()
    for _ in range(new_tokens):
        token = model(token, cache=cache)[:, -1:].argmax(-1)
    seconds = _since(start, new_tokens)
    held = [t for c in cache.self_attn for t in ((c.keys, c.values) if hasattr(c, "keys") else (c.s, c.z))]
    if hasattr(cache.self_attn[0], "keys"):  # a KV cache: only the filled positions count
        return seconds, sum(t[:, :, :cache.length].numel() * t.element_size() for t in held)
    return seconds, sum(t.numel() * t.element_size() for t in held)


def _saved_mb(model: torch.nn.Module, ids: torch.Tensor) -> float:
    """MiB of activations a training step keeps for its backward pass (weights not counted): exact."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in weights:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten())
    return sum(kept.values()) / 2**20


def _train_round(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor) -> tuple[float, float]:
    start = _clocks()
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return _since(start)


def measure(kind: str, what: str, context: int, repeats: int, new_tokens: int) -> dict:
    """One configuration, in this process: the median time and the growth of the peak memory."""
    model = _model(kind, context + new_tokens + 1)
    ids = torch.randint(0, 65, (1, context + 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4) if what == "train" else None
    base = _peak_mb()
    times, cache_bytes = [], None
    for r in range(repeats + 1):  # round 0 warms up
        if what == "generate":
            seconds, cache_bytes = _generate_round(model.eval(), ids[:, :context], new_tokens)
        else:
            seconds = _train_round(model.train(), optimizer, ids)  # type: ignore[arg-type]
        if r:
            times.append(seconds)
    row = {"kind": kind, "what": what, "context": context, "median_s": statistics.median(t[1] for t in times),
           "median_wall_s": statistics.median(t[0] for t in times), "cpu_times_s": [t[1] for t in times],
           "wall_times_s": [t[0] for t in times], "peak_rss_growth_mb": _peak_mb() - base,
           "cache_bytes": cache_bytes, "threads": torch.get_num_threads()}
    if what == "train":  # after the peak was read: this forward would add to it
        row["saved_for_backward_mb"] = _saved_mb(model, ids)
    return row


def _wait_for_quiet(max_load: float, max_wait: float) -> tuple[float, float]:
    """Wait (at most ``max_wait`` s) for the 1-minute load to drop below ``max_load``; (load, seconds waited)."""
    start = time.monotonic()
    while os.getloadavg()[0] >= max_load and time.monotonic() - start < max_wait:
        time.sleep(15)
    return os.getloadavg()[0], time.monotonic() - start


def run_all(args: argparse.Namespace) -> list[dict]:
    rows = []
    for context in args.contexts:
        for what in ("generate", "train"):
            for kind in KINDS:
                load, waited = _wait_for_quiet(args.max_load, args.max_wait)
                cmd = [sys.executable, __file__, "--one", kind, what, str(context), "--repeats", str(args.repeats),
                       "--new-tokens", str(args.new_tokens), "--threads", str(args.threads)]
                proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ,
                                                                               "OMP_NUM_THREADS": str(args.threads)})
                if proc.returncode == 0:
                    row = json.loads(proc.stdout.strip().splitlines()[-1])
                else:  # out of memory or killed: say so in the table
                    reason = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
                    row = {"kind": kind, "what": what, "context": context, "failed": reason[:200]}
                row.update(load_before=round(load, 2), load_after=round(os.getloadavg()[0], 2), waited_s=round(waited))
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def _cell(row: dict, what: str) -> str:
    if "failed" in row:
        return f"did not run: {row['failed'][:60]}"
    unit = 1e3 if what == "generate" else 1.0
    return f"{row['median_s'] * unit:.3g}"


def table(rows: list[dict]) -> str:
    """The markdown table of RESULTS.md: one line per context, both kinds side by side."""
    by = {(r["kind"], r["what"], r["context"]): r for r in rows}
    lines = ["| context | generation, ms/token (CPU): softmax (KV cache) | linear (state) | decoding memory per "
             "sequence: KV cache | state | training step, s (CPU): softmax (SDPA) | linear (prefix sums) | training "
             "memory, MiB (saved for backward / peak RSS growth): softmax | linear | load (1 min) |",
             "|" + "---|" * 10]
    for context in sorted({r["context"] for r in rows}):
        g = [by[(k, "generate", context)] for k in KINDS]
        t = [by[(k, "train", context)] for k in KINDS]
        mem = [f"{r['cache_bytes'] / 2**20:.3g} MiB" if r.get("cache_bytes") else "-" for r in g]
        rss = [f"{r['saved_for_backward_mb']:.0f} / {r['peak_rss_growth_mb']:.0f}" if "failed" not in r else "-"
               for r in t]
        loads = [r["load_before"] for r in g + t]
        lines.append(f"| {context:,} | {_cell(g[0], 'generate')} | {_cell(g[1], 'generate')} | {mem[0]} | {mem[1]} | "
                     f"{_cell(t[0], 'train')} | {_cell(t[1], 'train')} | {rss[0]} | {rss[1]} | "
                     f"{min(loads):.2f}-{max(loads):.2f} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = [("generate", "median_s", 1e3, "generation: ms per new token (CPU time)"),
              ("train", "median_s", 1.0, "training: s per step, batch 1 (CPU time)"),
              ("generate", "cache_bytes", 2.0 ** -20, "decoding: KV cache or state per sequence, MiB"),
              ("train", "saved_for_backward_mb", 1.0, "training: activations kept for backward, MiB")]
    for ax, (what, key, scale, title) in zip(axes.flat, panels):
        for kind, style in zip(KINDS, ("o-", "s--")):
            pts = sorted((r["context"], r[key] * scale) for r in rows
                         if r["kind"] == kind and r["what"] == what and r.get(key))
            label = {"softmax": "softmax (SDPA, KV cache)", "linear": "linear (prefix sums, state)"}[kind]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
        ax.set(xscale="log", yscale="log", xlabel="context length (tokens)", title=title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Softmax vs linear attention, GPT d_model 128, 2 layers, batch 1, 1 CPU thread", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    # 16 colours (two series on white): a third of a 256-colour file, and results/ stays small
    Image.open(path).convert("RGB").quantize(colors=16, method=Image.Quantize.FASTOCTREE,
                                             dither=Image.Dither.NONE).save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contexts", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-load", type=float, default=1.5)
    parser.add_argument("--max-wait", type=float, default=600)
    parser.add_argument("--out", default="results/linear-attention")
    parser.add_argument("--one", nargs=3, metavar=("KIND", "WHAT", "CONTEXT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.one:  # a child process: one configuration, one JSON line
        kind, what, context = args.one
        print(json.dumps(measure(kind, what, int(context), args.repeats, args.new_tokens)))
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = run_all(args)
    meta = {"model": MODEL, "batch": 1, "threads": args.threads, "repeats": args.repeats,
            "new_tokens": args.new_tokens, "torch": torch.__version__, "cpus": os.cpu_count()}
    (out / "linear_attention.json").write_text(json.dumps({"setup": meta, "rows": rows}, indent=1) + "\n")
    (out / "linear_attention.txt").write_text(table(rows) + "\n")
    plot(rows, out / "linear_attention.png")
    print(table(rows))


if __name__ == "__main__":
    main()
