"""How fast is KV-cached `generate` against recomputation and Hugging Face `GPT2LMHeadModel.generate`?

GPT decoding speed: scratchformer's KV-cached ``generate`` against its own recomputation and against
Hugging Face ``GPT2LMHeadModel.generate``, side by side in one process.

    python bench/speed/generate_speed.py                          # 512 new tokens, 3 rounds
    python bench/speed/generate_speed.py --new-tokens 128 --repeats 5 --threads 1

The model: GPT-2 layout with d_model 384, 6 layers, 6 heads, d_ff 1536, GPT-2's vocabulary (50,257) and
1,024 positions, random weights. One Hugging Face model is created, saved with ``save_pretrained`` and
loaded into scratchformer with ``interop.gpt2_from_pretrained``, so both hold the same weights and must
produce the same tokens (checked and printed). Batch 1, greedy decoding of ``--new-tokens`` tokens from
an 8-token prompt, no eos (both always produce exactly ``--new-tokens`` tokens).

With ``--batch 8``: 8 prompts of different lengths (4 to 32 tokens), left-padded, generated together with
their attention masks (each row numbered by its real tokens, as if alone); the uncached contestant is left
out there. ``--profile`` prints, for each contestant, the operators that take the time in one call
(``torch.profiler``, self CPU time): where the time goes. ``--json FILE`` writes the figures.

Contestants:

- ``ours``: ``generate(model, prompt, n)`` (KV cache);
- ``ours-no-cache``: ``generate(..., use_cache=False)``: every step recomputes the whole sequence; this
  one is so slow that it runs in the first ``--uncached-rounds`` round(s) only (default 1);
- ``hf``: ``GPT2LMHeadModel.generate(do_sample=False, max_new_tokens=n, use_cache=True)`` (SDPA).

Timing: after a short warm-up, the contestants take turns (round-robin) so that slow phases of a shared
machine hit all of them; the median round is reported. Peak memory: each contestant also runs once in a
fresh child process, whose peak resident memory (Linux ``VmHWM``, reset after loading and warm-up) is
reported above its resident memory just before generating: the extra memory decoding needs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from scratchformer.generation import generate
from scratchformer.interop import gpt2_from_pretrained

PROMPT_LEN = 8
CONTESTANTS = ("ours", "ours-no-cache", "hf")


def _quiet_transformers() -> None:
    """No progress bars or advice from transformers in the benchmark's output."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def make_hf_model(directory: Path) -> None:
    """Create the random GPT-2 and save it (weights and config) into ``directory``."""
    import transformers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=384, n_layer=6, n_head=6,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  bos_token_id=None, eos_token_id=None)  # no eos: fixed output length
    transformers.GPT2LMHeadModel(cfg).save_pretrained(directory)


Prompt = tuple[torch.Tensor, torch.Tensor]  # token ids (B, T), left-padded, and their mask (1 = real token)


def load_runner(name: str, directory: Path) -> Callable[[Prompt, int], torch.Tensor]:
    """A function ``(prompt, n) -> tokens (B, T + n)`` for one contestant."""
    if name == "hf":
        import transformers

        hf = transformers.GPT2LMHeadModel.from_pretrained(directory).eval()

        def run_hf(prompt: Prompt, n: int) -> torch.Tensor:
            with torch.no_grad():
                return hf.generate(prompt[0], attention_mask=prompt[1], do_sample=False,
                                   max_new_tokens=n, min_new_tokens=0, use_cache=True, pad_token_id=0,
                                   eos_token_id=None)
        return run_hf
    model = gpt2_from_pretrained(directory).eval()
    use_cache = name == "ours"
    return lambda prompt, n: generate(model, prompt[0], n, use_cache=use_cache, attention_mask=prompt[1])


def the_prompt(batch: int = 1) -> Prompt:
    """Batch 1: ``PROMPT_LEN`` tokens. Batch B > 1: rows of 4 to 32 real tokens, left-padded with id 0."""
    g = torch.Generator().manual_seed(1)
    if batch == 1:
        ids = torch.randint(0, 50257, (1, PROMPT_LEN), generator=g)
        return ids, torch.ones_like(ids)
    lengths = torch.linspace(4, 32, batch).round().long().tolist()
    ids = torch.zeros(batch, max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, -n:] = torch.randint(1, 50257, (n,), generator=g)
        mask[row, -n:] = 1
    return ids, mask


def weight_floor(directory: Path, batch: int, repeats: int = 20) -> dict[str, float]:
    """The floor of one decoding step: every weight matrix of the model multiplied by the step's ``batch``
    hidden vectors and nothing else (no attention, norms, Python), each in the layout ``generate`` uses
    (the output matrix transposed to (C, V)). At batch 1 a step reads every weight once and does two FLOPs per
    weight read, so this floor is set by memory bandwidth; ``GB/s`` is the rate it implies."""
    model = gpt2_from_pretrained(directory).eval()
    out_t = model.output_weight().t().contiguous()
    mats = [m.weight for m in model.decoder.modules() if isinstance(m, torch.nn.Linear)]
    nbytes = sum(w.numel() * w.element_size() for w in [*mats, out_t])
    xs = {w.size(1): torch.randn(batch, w.size(1)) for w in mats}
    h = torch.randn(batch, out_t.size(0))

    def once() -> None:
        for w in mats:
            torch.nn.functional.linear(xs[w.size(1)], w)
        h @ out_t

    with torch.no_grad():
        once()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            once()
            times.append(time.perf_counter() - t)
    seconds = statistics.median(times)
    return {"ms_per_step": seconds * 1e3, "weights_mb": nbytes / 2**20, "gb_per_s": nbytes / seconds / 1e9}


def profile(name: str, run: Callable[[Prompt, int], torch.Tensor], prompt: Prompt, n: int, top: int = 12) -> str:
    """The operators that take the time in one call of ``run``: a table of torch.profiler's self CPU time."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        run(prompt, n)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=40)
    return f"\n--- profile: {name}, one call of {n} new tokens ---\n{table}"


# ----------------------------------------------------------------------------------- memory


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(name: str, directory: Path, n: int, batch: int) -> None:
    """Run one contestant once in this (fresh) process; print its extra peak memory as JSON."""
    run = load_runner(name, directory)
    prompt = the_prompt(batch)
    run(prompt, 4)  # one-time initialisation (thread pools, kernels) is not what we measure
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _status_kb("VmRSS")
    run(prompt, n)
    print(json.dumps({"base_mb": base / 1024, "peak_extra_mb": (_status_kb("VmHWM") - base) / 1024}))


def measure_memory(name: str, directory: Path, n: int, threads: int, batch: int) -> dict[str, float] | None:
    if platform.system() != "Linux":
        return None
    cmd = [sys.executable, __file__, "--child", name, "--model-dir", str(directory), "--new-tokens", str(n),
           "--threads", str(threads), "--batch", str(batch)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------- main


def first_difference(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3, help="round-robin rounds (median reported)")
    parser.add_argument("--uncached-rounds", type=int, default=1, help="rounds that include ours-no-cache")
    parser.add_argument("--skip-uncached", action="store_true", help="leave ours-no-cache out entirely")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--batch", type=int, default=1, help="prompts generated together (left-padded when > 1)")
    parser.add_argument("--profile", action="store_true", help="print where each contestant's time goes")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--child", choices=CONTESTANTS, help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    _quiet_transformers()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child, args.model_dir, args.new_tokens, args.batch)
        return

    n = args.new_tokens
    skip_uncached = args.skip_uncached or args.batch > 1
    names = [c for c in CONTESTANTS if not (skip_uncached and c == "ours-no-cache")]
    shape = f"batch 1, prompt {PROMPT_LEN}" if args.batch == 1 else f"batch {args.batch}, prompts of 4-32 (left-padded)"
    header = (f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}, "
              f"{os.cpu_count()} CPUs; GPT d 384, 6 layers, 6 heads, vocab 50257; {shape}, greedy, {n} new tokens")
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        make_hf_model(directory)
        runners = {name: load_runner(name, directory) for name in names}
        prompt = the_prompt(args.batch)
        for run in runners.values():
            run(prompt, 8)  # warm-up

        times: dict[str, list[float]] = {name: [] for name in names}
        outputs: dict[str, list[int]] = {}
        for r in range(args.repeats):
            for name, run in runners.items():
                if name == "ours-no-cache" and r >= args.uncached_rounds:
                    continue
                t = time.perf_counter()
                out = run(prompt, n)
                times[name].append(time.perf_counter() - t)
                outputs[name] = out.flatten().tolist()
            print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items() if len(v) > r))

        floor = weight_floor(directory, args.batch)
        if args.profile:
            for name, run in runners.items():
                print(profile(name, run, prompt, min(n, 64)))
        memory = {} if args.no_memory else {name: measure_memory(name, directory, n, torch.get_num_threads(),
                                                                 args.batch) for name in names}

    print(f"\n{'contestant':<15} {'median s':>9} {'tokens/s':>9} {'peak extra MB':>14}")
    med = {name: statistics.median(v) for name, v in times.items()}
    for name in names:
        mem = memory.get(name)
        mem_s = f"{mem['peak_extra_mb']:.1f}" if mem else "-"
        spread = f"{min(times[name]):.2f}-{max(times[name]):.2f}"
        print(f"{name:<15} {med[name]:>9.2f} {args.batch * n / med[name]:>9.1f} {mem_s:>14}   "
              f"({len(times[name])} runs, {spread} s)")
    print(f"\nfloor (every weight matrix read once per step, matrix products alone): {floor['ms_per_step']:.2f} ms "
          f"per step ({floor['weights_mb']:.0f} MB of weights at {floor['gb_per_s']:.1f} GB/s), "
          f"{args.batch * 1e3 / floor['ms_per_step']:.1f} tokens/s at most")
    for name in names:
        step_ms = med[name] / n * 1e3
        print(f"  {name:<15} {step_ms:7.2f} ms per step = {step_ms / floor['ms_per_step']:.2f}x the floor")
    print(f"\nours vs hf:            {med['hf'] / med['ours']:.2f}x faster (target >= 2x)")
    if "ours-no-cache" in med:
        print(f"ours vs ours-no-cache: {med['ours-no-cache'] / med['ours']:.2f}x faster (target >= 10x)")
    same = {}
    for name in names:
        if name != "ours":
            diff = first_difference(outputs["ours"], outputs[name])
            same[name] = diff is None
            verdict = "identical tokens" if diff is None else f"tokens differ from flat position {diff}"
            print(f"ours vs {name}: {verdict} ({args.batch} x {n} new tokens)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "setup": header, "seconds": times, "median_s": med, "floor": floor,
            "tokens_per_s": {k: args.batch * n / v for k, v in med.items()},
            "peak_extra_mb": {k: (v or {}).get("peak_extra_mb") for k, v in memory.items()},
            "identical_to_ours": same}, indent=1) + "\n")


if __name__ == "__main__":
    main()
