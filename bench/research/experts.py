"""Does a mixture of experts pay on Tiny Shakespeare against a dense GPT of the same active weights, and how do the
routers spread the tokens over the experts as training goes?

    python bench/research/experts.py [--steps 2000] [--every 200] [--out runs/experts] \
        [--figure docs/figures/experts.png]

Two character-level GPTs with today's blocks (RMSNorm, SwiGLU, rotary positions; d_model 64, 2 layers, 4 heads,
context 64, batch 16), the same seed, data and steps (AdamW, lr 3e-3, cosine after 30 warm-up steps):

- dense: a SwiGLU feed-forward 128 wide in each layer;
- experts: 8 SwiGLU experts 64 wide in each layer, top 2 (their weights renormalised): 2 x 64 = 128 of width work on
  a token, the dense model's active weights, while the layer holds 8 x 64, 4x the dense feed-forward's weights.
  ``router_aux_coef`` 0.01 times the load-balancing loss joins the loss.

At every ``--every`` steps: the validation loss (the same 20 batches of the 10 % held out) and the mean time per
step since the last record; for the experts, the share of the (token, choice) pairs each expert took in each layer
over those steps (1/8 each when even). One thread; the machine is shared, so the times carry other work's noise.
Writes ``experts.json`` and ``experts.txt`` (the table) into ``--out`` and the figure to ``--figure``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from scratchformer.models import GPT
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.experts import moe_blocks, router_aux_loss

TODAY = dict(arch="gpt", norm_type="rmsnorm", activation="swiglu", positional="rotary", bias=False, dropout=0.0,
             d_model=64, n_heads=4, n_layers=2, max_len=64)


def batches(ids: torch.Tensor, n: int, gen: torch.Generator, B: int = 16, T: int = 64):
    for _ in range(n):
        starts = torch.randint(0, len(ids) - T - 1, (B,), generator=gen)
        x = torch.stack([ids[s:s + T] for s in starts])
        yield x, torch.stack([ids[s + 1:s + T + 1] for s in starts])


def run(cfg: ModelConfig, train: torch.Tensor, val: torch.Tensor, steps: int, every: int) -> dict:
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    gen, rows, counts, seconds = torch.Generator().manual_seed(1), [], None, 0.0
    for step, (x, y) in enumerate(batches(train, steps, gen), start=1):
        lr = 3e-3 * min(step / 30, 0.5 * (1 + math.cos(math.pi * step / steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        started = time.perf_counter()
        model.train()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        aux = router_aux_loss(model)
        (loss + (cfg.router_aux_coef * aux if aux is not None else 0)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        seconds += time.perf_counter() - started
        if cfg.n_experts:
            now = torch.stack([b.tokens_per_expert for b in moe_blocks(model)]).float()  # (layers, E)
            counts = now if counts is None else counts + now
        if step % every == 0:
            model.eval()
            with torch.no_grad():
                v = [F.cross_entropy(model(a).flatten(0, 1), b.flatten()).item()
                     for a, b in batches(val, 20, torch.Generator().manual_seed(2))]
            row = {"step": step, "val_loss": sum(v) / len(v), "s_per_step": seconds / every,
                   "router_aux": None if aux is None else aux.item()}
            if counts is not None:
                row["share_per_expert"] = (counts / counts.sum(-1, keepdim=True)).tolist()  # per layer
                counts = None
            rows.append(row)
            seconds = 0.0
            print(json.dumps({k: v for k, v in row.items() if k != "share_per_expert"}), flush=True)
    weights = sum(p.numel() for p in model.parameters())
    return {"rows": rows, "weights": weights}


def rounded(x):  # noqa: ANN001, ANN201 - the JSON's numbers to 5 decimals (results/ stays small)
    if isinstance(x, float):
        return round(x, 5)
    if isinstance(x, (list, dict)):
        return {k: rounded(v) for k, v in x.items()} if isinstance(x, dict) else [rounded(v) for v in x]
    return x


def figure(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["experts"]["rows"]
    steps = [r["step"] for r in rows]
    layers = len(rows[0]["share_per_expert"])
    fig, axes = plt.subplots(1, layers + 1, figsize=(4 * (layers + 1), 3.2))
    for layer in range(layers):
        ax = axes[layer]
        shares = torch.tensor([r["share_per_expert"][layer] for r in rows])  # (records, E)
        ax.stackplot(steps, shares.T.numpy(), labels=[f"expert {i}" for i in range(shares.size(1))])
        ax.set(title=f"layer {layer}: tokens per expert", xlabel="step", ylabel="share of (token, choice) pairs",
               ylim=(0, 1))
    axes[0].legend(fontsize=6, loc="upper right", ncol=2)
    ax = axes[-1]
    for name in ("dense", "experts"):
        ax.plot(steps, [r["val_loss"] for r in result[name]["rows"]], marker="o", label=name)
    ax.set(title="validation loss", xlabel="step")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--data", default=None, help="Tiny Shakespeare (default: $SCRATCHFORMER_DATA's)")
    parser.add_argument("--out", default="runs/experts")
    parser.add_argument("--figure", default="docs/figures/experts.png")
    args = parser.parse_args()
    import os

    torch.set_num_threads(1)
    text = Path(args.data or Path(os.environ.get("SCRATCHFORMER_DATA", "data")) / "tinyshakespeare.txt").read_text()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text])
    cut = int(0.9 * len(ids))
    base = dict(TODAY, vocab_size=len(chars))
    configs = {"dense": ModelConfig(**base, d_ff=128),
               "experts": ModelConfig(**base, d_ff=64, n_experts=8, experts_top_k=2, router_aux_coef=0.01)}
    result = {name: run(cfg, ids[:cut], ids[cut:], args.steps, args.every) for name, cfg in configs.items()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "experts.json").write_text(json.dumps(rounded(result)))
    lines = ["| step | dense val loss | experts val loss | dense s/step | experts s/step |", "|---|---|---|---|---|"]
    for d, e in zip(result["dense"]["rows"], result["experts"]["rows"]):
        lines.append(f"| {d['step']} | {d['val_loss']:.4f} | {e['val_loss']:.4f} | {d['s_per_step']:.4f} | "
                     f"{e['s_per_step']:.4f} |")
    lines.append(f"weights: dense {result['dense']['weights']:,}, experts {result['experts']['weights']:,}")
    (out / "experts.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    figure(result, Path(args.figure))


if __name__ == "__main__":
    main()
