"""What does one optimizer step cost: AdamW against Muon, Newton-Schulz in float32 and in bfloat16?

What one optimizer step costs: AdamW against Muon, with its Newton-Schulz iteration in float32 and in bfloat16.

    python bench/research/muon_step.py [--threads 1] [--repeat 30]

The models are those of the ``shakespeare-char`` preset (4 layers, d 128) and the ``multi30k`` preset (3 + 3
layers, d 256, a vocabulary of 8,000); every parameter gets a random gradient and the optimizer steps
``--repeat`` times after 5 warm-up steps. Muon's cost does not depend on the batch: five Newton-Schulz
iterations of three matrix products per weight matrix, every step. ``MuonAdamW`` orthogonalises all the
blocks of one shape in one batched call; bfloat16 is used where the CPU multiplies it natively (AVX512-BF16
or AMX; ``fast_ns_dtype``), and this script says which it found.
"""

from __future__ import annotations

import argparse
import time

import torch

from scratchformer.models import build_model
from scratchformer.nn.config import ModelConfig
from scratchformer.train.muon import MuonAdamW, fast_ns_dtype, muon_groups
from scratchformer.train.optim import param_groups

MODELS = {
    "shakespeare-char": dict(arch="gpt", vocab_size=65, max_len=64, n_layers=4, n_heads=4, d_model=128, d_ff=512,
                             dropout=0.0, bias=False),
    "multi30k": dict(arch="seq2seq", vocab_size=8000, max_len=128, n_layers=3, n_heads=4, d_model=256, d_ff=1024),
}


def time_steps(opt: torch.optim.Optimizer, repeat: int) -> float:
    """Milliseconds per ``opt.step()``."""
    for _ in range(5):
        opt.step()
    start = time.perf_counter()
    for _ in range(repeat):
        opt.step()
    return (time.perf_counter() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s); native bfloat16 here: "
          f"{fast_ns_dtype(torch.device('cpu')) == 'bfloat16'}")
    for name, kw in MODELS.items():
        model = build_model(ModelConfig(**kw))
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        adamw = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3)
        row = {"AdamW": time_steps(adamw, args.repeat)}
        for dtype in ("float32", "bfloat16"):
            groups = muon_groups(model, lr=1e-3, muon_lr=0.02, weight_decay=0.1, betas=(0.9, 0.99), eps=1e-8)
            for g in groups:
                g["ns_dtype"] = dtype
            row[f"Muon ({dtype})"] = time_steps(MuonAdamW(groups, lr=1e-3), args.repeat)
        print(f"{name:<17} " + "  ".join(f"{k} {v:6.1f} ms" for k, v in row.items()))


if __name__ == "__main__":
    main()
