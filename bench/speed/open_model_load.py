"""How fast, and in how much memory, does a Qwen3-0.6B-shaped folder load and decode, against `transformers`?

    python bench/speed/open_model_load.py                        # makes the folder once (random weights), 3 rounds
    python bench/speed/open_model_load.py --folder DIR --rounds 5 --threads 2 --new-tokens 32

The folder: ``Qwen3ForCausalLM`` with Qwen3-0.6B's shape (vocabulary 151,936, d_model 1,024, 28 layers, 16 query
heads and 8 of keys and values of size 128, d_ff 3,072, tied output), random weights saved in bfloat16 by
``transformers`` (``save_pretrained``, made once in ``--folder``, default a folder under the system's temporary
directory). No real weights are needed: loading and decoding cost the same for any numbers.

Every measurement runs in a fresh child process, the contestants taking turns round by round (the median is
reported), with the same number of threads:

- **load**: ``scratchformer.load_model(DIR)`` against ``AutoModelForCausalLM.from_pretrained(DIR, dtype="auto")``,
  both keeping bfloat16, then 16 greedy tokens from an 8-token prompt in that same dtype. Seconds of the library's
  import and the load; the rise of peak resident memory (Linux ``VmHWM``) right after loading, over the child as it
  stood after ``import torch`` alone (the library's import counts in the rise); and the peak resident memory of the
  whole process once the 16 tokens are made, which counts every weight the decoding touched. Goal: that peak at most
  1.05x ``transformers``'.
- **decode**: each loads in float32 (``dtype=float32``; this CPU multiplies bfloat16 slowly), then greedy decoding
  of ``--new-tokens`` tokens from an 8-token prompt, batch 1, KV cache: first-token latency (the prompt and one
  token, its own call) and tokens per second of the whole call; both must give the same tokens (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
             num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
             rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)
PROMPT = [785, 1207, 315, 264, 42, 2310, 13, 576]


def make_folder(folder: Path, layers: int) -> None:
    """Random Qwen3-0.6B-shaped weights saved in bfloat16 by transformers (once)."""
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    config = transformers.Qwen3Config(**{**SHAPE, "num_hidden_layers": layers})
    transformers.Qwen3ForCausalLM(config).save_pretrained(folder)


def peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def _hf_dtype_kw(dtype: object) -> dict:
    import transformers

    return {"dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype": dtype}


def _load(who: str, folder: str, dtype: object) -> tuple[object, object]:
    """(model, greedy generate(ids, n)) of ``who``, the weights in ``dtype`` ("auto": as stored)."""
    import torch

    if who == "ours":
        import scratchformer
        from scratchformer.generation import generate

        model = scratchformer.load_model(folder, **({} if dtype == "auto" else {"dtype": dtype}))
        return model, lambda ids, n: generate(model, ids, n)
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, **_hf_dtype_kw(dtype)).eval()
    model.generation_config.pad_token_id = 0
    return model, lambda ids, n: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                                min_new_tokens=n, do_sample=False)


def child(kind: str, who: str, folder: str, threads: int, new_tokens: int) -> dict:
    """One measurement in this (fresh) process."""
    import torch

    torch.set_num_threads(threads)
    base = peak_kib()
    ids = torch.tensor([PROMPT])
    if kind == "load":
        start = time.perf_counter()
        model, run = _load(who, folder, "auto")
        seconds, loaded = time.perf_counter() - start, peak_kib()
        with torch.no_grad():
            run(ids, 16)
        return {"seconds": seconds, "rise_mb": (loaded - base) / 1024, "peak_mb": peak_kib() / 1024,
                "dtype": str(next(model.parameters()).dtype)}
    model, run = _load(who, folder, torch.float32)
    with torch.no_grad():
        run(ids, 2)  # warm-up
        start = time.perf_counter()
        run(ids, 1)
        first = time.perf_counter() - start
        start = time.perf_counter()
        tokens = run(ids, new_tokens)
        seconds = time.perf_counter() - start
    return {"first_token_s": first, "tokens_per_s": new_tokens / seconds, "tokens": tokens[0].tolist()}


def measure(kind: str, who: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, who, "--folder", str(args.folder), "--threads",
           str(args.threads), "--new-tokens", str(args.new_tokens)]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TRANSFORMERS_VERBOSITY": "error",
           "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"{who} {kind} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "scratchformer-qwen3-0.6b-shaped")
    p.add_argument("--layers", type=int, default=28, help="layers of a folder made now (28: Qwen3-0.6B's)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--json", type=Path, help="also write the figures here")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, str(args.folder), args.threads, args.new_tokens)))
        return
    if not (args.folder / "config.json").is_file():
        print(f"making {args.folder} (random weights, bfloat16)...", file=sys.stderr)
        make_folder(args.folder, args.layers)
    size_mb = sum(f.stat().st_size for f in args.folder.glob("*.safetensors")) / 2**20
    runs: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.rounds):
        for kind in ("load", "decode"):
            for who in (("ours", "hf") if r % 2 == 0 else ("hf", "ours")):  # taking turns
                runs.setdefault((kind, who), []).append(measure(kind, who, args))
    med = {key: {m: statistics.median(x[m] for x in xs) for m in xs[0] if m not in ("tokens", "dtype")}
           for key, xs in runs.items()}
    same = all(x["tokens"] == runs[("decode", "hf")][0]["tokens"] for x in runs[("decode", "ours")])
    print(f"folder: {args.folder} ({size_mb:,.0f} MB of safetensors, {runs[('load', 'ours')][0]['dtype']}); "
          f"{args.threads} threads; medians of {args.rounds} rounds, each in a fresh process")
    print("| measure | scratchformer | transformers | ratio (transformers / scratchformer) |")
    print("|---|---|---|---|")
    rows = [("load, seconds", "load", "seconds", "{:.2f}", False),
            ("load, peak memory rise (MB)", "load", "rise_mb", "{:,.0f}", False),
            ("load + 16 tokens, peak memory (MB)", "load", "peak_mb", "{:,.0f}", False),
            ("decode, first token (s)", "decode", "first_token_s", "{:.3f}", False),
            ("decode, tokens/s", "decode", "tokens_per_s", "{:.2f}", True)]
    for label, kind, key, fmt, higher in rows:
        a, b = med[(kind, "ours")][key], med[(kind, "hf")][key]
        ratio = a / b if higher else b / a
        print(f"| {label} | {fmt.format(a)} | {fmt.format(b)} | {ratio:.2f}x |")
    ours, hf = med[("load", "ours")], med[("load", "hf")]
    print(f"peak memory, loading and 16 tokens in {runs[('load', 'ours')][0]['dtype']}: scratchformer / transformers "
          f"{ours['peak_mb'] / hf['peak_mb']:.2f}x (goal <= 1.05x); rise right after loading / file size: "
          f"scratchformer {ours['rise_mb'] / size_mb:.2f}x, transformers {hf['rise_mb'] / size_mb:.2f}x; "
          f"float32 greedy tokens equal: {same}")
    for (kind, who), xs in sorted(runs.items()):  # the spread behind each median
        spread = {m: f"{min(x[m] for x in xs):.3g}-{max(x[m] for x in xs):.3g}" for m in xs[0]
                  if m not in ("tokens", "dtype")}
        print(f"  {kind} {who}: " + ", ".join(f"{m} {v}" for m, v in spread.items()))
    if args.json:
        args.json.write_text(json.dumps({"size_mb": size_mb, "runs": {f"{k}/{w}": v for (k, w), v in runs.items()},
                                         "same_tokens": same}, indent=1))


if __name__ == "__main__":
    main()
