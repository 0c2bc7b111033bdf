"""How much memory does a sliding-window layer's cache hold as a sequence grows, beside a full layer's?

    python bench/research/sliding_cache.py [--window 64] [--longest 512] [--figure docs/figures/sliding_window.png]

A Gemma-3-shaped GPT (random weights: the cache's size does not depend on them) of two layers, one sliding with a
window of ``--window`` positions and one global, 2 heads of keys and values of 64 each, decodes one answer in the
decoding engine (``generation/engine.py``, what ``generate``, the evaluations and ``serve`` step) to each length; each
layer's cache bytes are read from the engine's pool (``KVPool``: the global layer's rows grow by doubling, the sliding
layer's are a ring of W columns) and, for ``generate``'s cache, from ``WindowKVCache`` against ``KVCache``. Prints one
row a length and writes the figure (bytes against length, sliding beside full) to ``--figure``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import scratchformer
from scratchformer.generation import Engine, Request, Sampling, Stop
from scratchformer.nn.config import ModelConfig


def model(window: int, longest: int) -> scratchformer.GPT:
    cfg = ModelConfig(arch="gpt", vocab_size=256, d_model=128, n_heads=4, n_kv_heads=2, head_size=64, n_layers=2,
                      d_ff=256, max_len=longest + 1, positional="rotary", norm_type="rmsnorm", activation="geglu_tanh",
                      qk_norm=True, norm_plus_one=True, sandwich_norm=True, scale_embeddings=True, tie_embeddings=True,
                      sliding_window=window, sliding_layers=[0], local_rope_base=10_000.0, rope_base=1_000_000.0,
                      dropout=0.0)
    torch.manual_seed(0)
    return scratchformer.GPT(cfg).eval()


def nbytes(cache) -> int:
    return cache.keys.numel() * cache.keys.element_size() + cache.values.numel() * cache.values.element_size()


def measure(gpt: scratchformer.GPT, length: int) -> dict[str, int]:
    """Each layer's cache bytes once a 4-token prompt has grown to ``length`` positions: the engine's pool, and
    ``generate``'s cache (read as it stands after the last token)."""
    engine = Engine(gpt, max_rows=1)
    engine.add(Request([1, 2, 3, 4], length - 4, Sampling(), Stop(())))
    while engine.busy:
        engine.step()
        if engine.pool.rows:
            pool = [nbytes(layer) for layer in engine.pool.layers]
    cache = gpt.new_cache(1, length)
    with torch.no_grad():
        gpt(torch.randint(0, 256, (1, length)), cache=cache)
    sliding, full = cache.self_attn
    return {"length": length, "pool_sliding": pool[0], "pool_full": pool[1],
            "generate_sliding": nbytes(sliding), "generate_full": full.length * nbytes(full) // full.keys.size(2)}


def figure(rows: list[dict[str, int]], window: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["length"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(x, [r["pool_full"] / 1024 for r in rows], "o-", label="global layer (the engine's rows, doubling)")
    ax.plot(x, [r["generate_full"] / 1024 for r in rows], ":", color="C0", label="global layer (every position)")
    ax.plot(x, [r["pool_sliding"] / 1024 for r in rows], "s-", label=f"sliding layer, W = {window} (a ring of W)")
    ax.axvline(window, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("sequence length (positions)")
    ax.set_ylabel("KV cache of one layer (KiB)")
    ax.set_title("One answer's cache: sliding beside full")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--longest", type=int, default=512)
    parser.add_argument("--figure", default="docs/figures/sliding_window.png")
    parser.add_argument("--json")
    args = parser.parse_args()
    gpt = model(args.window, args.longest)
    lengths = [n for n in (16, 32, 48, 64, 96, 128, 192, 256, 384, 512) if n <= args.longest]
    rows = [measure(gpt, n) for n in lengths]
    print("length  pool sliding  pool full  generate sliding  generate full   (bytes)")
    for r in rows:
        print(f"{r['length']:6d}  {r['pool_sliding']:12,d}  {r['pool_full']:9,d}  {r['generate_sliding']:16,d}  "
              f"{r['generate_full']:13,d}")
    at = {r["length"]: r for r in rows}
    if args.window in at and 4 * args.window in at:
        w, four = at[args.window], at[4 * args.window]
        print(f"sliding layer at 4x the window ({4 * args.window}): {four['pool_sliding']:,} bytes in the pool, "
              f"{four['generate_sliding']:,} in generate's cache; at the window: {w['pool_sliding']:,} and "
              f"{w['generate_sliding']:,}; the global layer's grew {four['pool_full'] / w['pool_full']:.0f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    figure(rows, args.window, Path(args.figure))


if __name__ == "__main__":
    main()
