"""The ``scratchformer`` command: a thin layer over importable functions.

    scratchformer demo [--preset NAME] [key=value ...]

``demo`` builds a model from a preset, checks its parameter count against the analytic formula, runs a
forward pass and KV-cached decoding on random tokens, and prints what happened at each step.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from .config import PRESETS, ConfigError, ModelConfig, count_parameters_formula
from .models import build_model


def parse_overrides(pairs: Sequence[str]) -> dict[str, object]:
    """``["d_model=64", "norm=pre", "bias=false"]`` -> typed values (int, float, bool, None or str)."""
    out: dict[str, object] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ConfigError(f"expected key=value, got {pair!r}")
        key, raw = pair.split("=", 1)
        value: object = raw
        low = raw.lower()
        if low in ("true", "false"):
            value = low == "true"
        elif low in ("none", "null"):
            value = None
        else:
            for cast in (int, float):
                try:
                    value = cast(raw)
                    break
                except ValueError:
                    pass
        out[key] = value
    return out


def demo(preset: str, overrides: dict[str, object], seed: int = 0) -> None:
    torch.manual_seed(seed)
    cfg = ModelConfig.preset(preset, **overrides)
    model = build_model(cfg).eval()
    n = sum(p.numel() for p in model.parameters())
    formula = count_parameters_formula(cfg)
    print(f"preset {preset}: arch={cfg.arch} d_model={cfg.d_model} heads={cfg.n_heads} layers={cfg.n_layers} "
          f"d_ff={cfg.d_ff} norm={cfg.norm} activation={cfg.activation} positions={cfg.positional}")
    print(f"parameters: {n:,} (analytic formula: {formula:,}, {'match' if n == formula else 'MISMATCH'})")
    B, T = 2, min(16, cfg.max_len)
    ids = torch.randint(1, cfg.vocab_size, (B, T))
    with torch.no_grad():
        start = time.perf_counter()
        if cfg.arch == "seq2seq":
            tgt = torch.randint(1, cfg.target_vocab_size, (B, T))
            out = model(ids, tgt)
            print(f"forward: src {tuple(ids.shape)} + tgt {tuple(tgt.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            memory = model.encode(ids)
            cache = model.new_cache(B)
            steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(T)], 1)
        elif cfg.arch == "gpt":
            out = model(ids)
            print(f"forward: input_ids {tuple(ids.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            cache = model.new_cache(B)
            steps = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(T)], 1)
        else:
            out = model(ids)
            hidden = model.encode(ids)
            print(f"forward: input_ids {tuple(ids.shape)} -> hidden {tuple(hidden.shape)} -> class logits "
                  f"{tuple(out.shape)} in {1000 * (time.perf_counter() - start):.1f} ms")
            return
    diff = (steps - out).abs().max().item()
    print(f"KV-cached decoding, one token at a time: max |cached - full| = {diff:.2e}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scratchformer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="build a model, count its parameters, run a forward pass")
    p_demo.add_argument("--preset", default="paper-base", help=f"one of: {', '.join(sorted(PRESETS))}")
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("overrides", nargs="*", metavar="key=value", help="ModelConfig fields to change")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.preset, parse_overrides(args.overrides), args.seed)
    except (ConfigError, ValueError) as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
