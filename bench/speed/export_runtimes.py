"""Decoding outside PyTorch, side by side: PyTorch's cached ``generate``, the onnxruntime loop of
``--format onnx`` (``onnx_decode.py``), Hugging Face's PyTorch ``generate`` and llama.cpp on the f32 / f16 / Q8_0
GGUF files, on two models, at batch 1 and batch 8.

    python bench/speed/export_runtimes.py                      # 3 rounds, both models, batch 1 and 8
    python bench/speed/export_runtimes.py --rounds 1 --models char --json out.json
    python bench/speed/export_runtimes.py --profile            # where the onnxruntime loop's time goes

Models (random weights: the times do not depend on them, and every runtime holds the same ones):

- ``char``: the ``shakespeare-char`` preset's GPT (d 128, 4 layers, 4 heads, no biases, context 64, 69 ids: the 65
  characters of Tiny Shakespeare and 4 special ids); prompts of 8 tokens (batch 8: 4 to 32, left-padded), 32 new
  tokens (the context ends at 64);
- ``gpt2``: GPT-2-shaped (d 384, 6 layers, 6 heads, d_ff 1536, vocabulary 50,257, context 1024, GELU tanh);
  prompts as above, 128 new tokens. One Hugging Face ``GPT2LMHeadModel`` is made and loaded into scratchformer
  (``gpt2_from_pretrained``), so Hugging Face's ``generate`` runs the very same weights.

``optimum``'s onnxruntime model (``optimum-onnx``) is not among them: its only release (0.1.0) needs transformers
< 4.58 and this project runs transformers 5, so it does not install beside it; Hugging Face's PyTorch ``generate``
stands in as the Hugging Face contestant.

Each measurement is a fresh subprocess (``--worker``), so that peak memory is per runtime: the peak resident memory
(``VmHWM``) of the whole process, the runtime's libraries included, as a deployment would see it. Rounds: every
(model, batch, runtime) runs once per round, in turn, and the median of the rounds is reported, so that slow phases
of a shared machine hit all of them. Every runtime gets the same threads (``--threads``, default 2). Reported:
tokens/s (batch x new tokens / the whole call, prompt included), first-token latency (the prompt's forward pass
and the first token), the peak memory, and whether its greedy tokens equal PyTorch's.
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

import numpy as np

RUNTIMES = ("pytorch", "onnxruntime", "hf-pytorch", "llama.cpp-f32", "llama.cpp-f16", "llama.cpp-q8_0")
CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # Tiny Shakespeare's 65
NEW_TOKENS = {"char": 32, "gpt2": 128}


def vocab_size(model: str) -> int:
    return 50257 if model == "gpt2" else len(CHARS) + 4


def prompts(batch: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch 1: 8 tokens. Batch B: rows of 4 to 32 real tokens, left-padded with id 0, and the real-token mask."""
    rng = np.random.default_rng(1)
    lengths = [8] if batch == 1 else np.linspace(4, 32, batch).round().astype(int).tolist()
    ids, mask = np.zeros((batch, max(lengths)), np.int64), np.zeros((batch, max(lengths)), np.int64)
    for row, n in enumerate(lengths):
        ids[row, -n:], mask[row, -n:] = rng.integers(4, vocab, n), 1
    return ids, mask


# ============================================================================================ setup

def make_models(root: Path, which: list[str]) -> None:
    """Write each model's checkpoint-free pieces into ``root/NAME``: the ONNX folder and the three GGUF files (and
    for gpt2 the Hugging Face folder the others were loaded from)."""
    import torch

    from scratchformer import GPT, ModelConfig
    from scratchformer.interop import export_gguf, export_onnx_cached
    from scratchformer.tokenizers.char import CharTokenizer

    for name in which:
        out = root / name
        out.mkdir()
        torch.manual_seed(0)
        if name == "char":
            tokenizer = CharTokenizer(list(CHARS))
            model = GPT(ModelConfig(arch="gpt", vocab_size=tokenizer.vocab_size, d_model=128, n_heads=4, n_layers=4,
                                    d_ff=512, max_len=64, dropout=0.0, bias=False)).eval()
            torch.save(model.state_dict(), out / "model.pt")
            (out / "config.json").write_text(model.config.to_json())
        else:
            model = _gpt2_model(out)
            tokenizer = CharTokenizer([chr(0x100 + i) for i in range(model.config.vocab_size - 4)])
        export_onnx_cached(model, out / "onnx")
        for kind in ("f32", "f16", "q8_0"):
            export_gguf(model, out / f"{kind}.gguf", tokenizer=tokenizer, gguf_type=kind)


def _gpt2_model(out: Path):
    import torch
    import transformers

    from scratchformer.interop import gpt2_from_pretrained

    transformers.utils.logging.set_verbosity_error()
    cfg = transformers.GPT2Config(vocab_size=50257, n_positions=1024, n_embd=384, n_layer=6, n_head=6,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None,
                                  eos_token_id=None)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(out / "hf")
    return gpt2_from_pretrained(out / "hf").eval()


# =========================================================================================== worker

def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _runner(runtime: str, folder: Path, threads: int, batch: int):
    """``(ids, mask, n) -> tokens (B, T + n)`` for one runtime."""
    if runtime == "onnxruntime":
        sys.path.insert(0, str(folder / "onnx"))
        import onnx_decode as od  # the copy the export wrote: no scratchformer, no torch

        model = od.CachedModel(folder / "onnx", threads=threads)
        return lambda ids, mask, n: _timed_ort(od, model, ids, mask, n)
    if runtime.startswith("llama.cpp"):
        from scratchformer.interop.llamacpp import LlamaCpp

        llm = LlamaCpp(folder / f"{runtime.split('-')[1]}.gguf", batch=batch, n_ctx=1024 if "gpt2" in str(folder)
                       else 64, threads=threads)
        return lambda ids, mask, n: _timed_llama(llm, ids, mask, n)
    import torch

    torch.set_num_threads(threads)
    if runtime == "hf-pytorch":
        import transformers

        hf = transformers.GPT2LMHeadModel.from_pretrained(folder / "hf").eval()
        return lambda ids, mask, n: _timed_hf(hf, ids, mask, n)
    return _torch_runner(folder)


def _torch_runner(folder: Path):
    import torch

    from scratchformer import GPT, ModelConfig, generate
    from scratchformer.interop import gpt2_from_pretrained

    if (folder / "hf").is_dir():
        model = gpt2_from_pretrained(folder / "hf").eval()
    else:
        model = GPT(ModelConfig.from_json((folder / "config.json").read_text())).eval()
        model.load_state_dict(torch.load(folder / "model.pt", weights_only=True))

    return lambda ids, mask, n: generate(model, torch.from_numpy(ids), n, attention_mask=torch.from_numpy(mask)).numpy()


def _timed_ort(od, model, ids, mask, n):
    return od.generate(model, ids, n, attention_mask=mask)


def _timed_hf(hf, ids, mask, n):
    import torch

    kw = dict(do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None, min_new_tokens=0)
    with torch.no_grad():
        return hf.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), max_new_tokens=n,
                           **kw).numpy()


def _timed_llama(llm, ids, mask, n):
    rows = [list(r[m.astype(bool)]) for r, m in zip(ids, mask)]  # no padding: each sequence its own positions
    logits = llm.start(rows)
    new = []
    for i in range(n):
        nxt = logits.argmax(-1).tolist()
        new.append(nxt)
        if i + 1 < n:
            logits = llm.step(nxt)
    return np.concatenate([ids, np.array(new, np.int64).T], 1)


def worker(args: argparse.Namespace) -> None:
    folder = Path(args.dir) / args.model
    ids, mask = prompts(args.batch, vocab_size(args.model))
    n = NEW_TOKENS[args.model]
    run = _runner(args.worker, folder, args.threads, args.batch)
    run(ids, mask, 4)  # warm-up
    firsts = []
    for _ in range(3):  # the prompt's forward pass and the first token
        t0 = time.perf_counter()
        run(ids, mask, 1)
        firsts.append(time.perf_counter() - t0)
    first = statistics.median(firsts)
    t0 = time.perf_counter()
    tokens = run(ids, mask, n)
    seconds = time.perf_counter() - t0
    print(json.dumps({"tokens_per_s": args.batch * n / seconds, "first_token_ms": first * 1e3,
                      "peak_mb": _peak_mb(), "tokens": tokens[:, -n:].tolist()}))


# ============================================================================================= main

def measure(root: Path, model: str, batch: int, runtime: str, threads: int) -> dict | None:
    cmd = [sys.executable, __file__, "--worker", runtime, "--model", model, "--batch", str(batch),
           "--dir", str(root), "--threads", str(threads)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        print(f"{runtime} failed on {model} batch {batch}:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict, models: list[str], batches: list[int]) -> str:
    lines = ["| model | batch | runtime | tokens/s | x PyTorch | first token (ms) | peak memory (MiB) "
             "| tokens = PyTorch's |",
             "|---|---|---|---|---|---|---|---|"]
    for model in models:
        for batch in batches:
            base = results.get((model, batch, "pytorch"))
            for runtime in RUNTIMES:
                runs = results.get((model, batch, runtime))
                if not runs:
                    continue
                tps = statistics.median(r["tokens_per_s"] for r in runs)
                ratio = tps / statistics.median(r["tokens_per_s"] for r in base) if base else float("nan")
                same = "yes" if base and runs[0]["tokens"] == base[0]["tokens"] else "no"
                lines.append(f"| {model} | {batch} | {runtime} | {tps:.0f} | {ratio:.2f} | "
                             f"{statistics.median(r['first_token_ms'] for r in runs):.1f} | "
                             f"{max(r['peak_mb'] for r in runs):.0f} | {same} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", nargs="+", choices=["char", "gpt2"], default=["char", "gpt2"])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    p.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="write the measurements here")
    p.add_argument("--profile", action="store_true", help="profile the onnxruntime loop (bench/speed/profile_ort.py)")
    p.add_argument("--worker", choices=RUNTIMES, help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_models(root, args.models)
        results: dict = {}
        for r in range(args.rounds):
            for model in args.models:
                for batch in args.batches:
                    for runtime in args.runtimes:
                        if runtime == "hf-pytorch" and model != "gpt2":
                            continue  # Hugging Face's GPT-2 class has biases; the char model has none
                        out = measure(root, model, batch, runtime, args.threads)
                        if out is not None:
                            results.setdefault((model, batch, runtime), []).append(out)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        print(table(results, args.models, args.batches))
        if args.profile:
            from profile_ort import profile_report

            runs = {name: (prompts(1, vocab_size(name))[0], NEW_TOKENS[name]) for name in args.models}
            print(profile_report(root, runs, args.threads))
    if args.json:  # the numbers of every round; the tokens only as whether they equal PyTorch's
        def kept(key: tuple, run: dict) -> dict:
            base = results.get((*key[:2], "pytorch"), [run])[0]["tokens"]
            numbers = {k: round(v, 2) for k, v in run.items() if k != "tokens"}
            return {**numbers, "tokens_equal_pytorch": run["tokens"] == base}

        rows = [f' "{"/".join(map(str, k))}": [' + ", ".join(json.dumps(kept(k, run), separators=(",", ":"))
                                                           for run in v) + "]" for k, v in results.items()]
        Path(args.json).write_text("{\n" + ",\n".join(rows) + "\n}\n")  # one line per runtime


if __name__ == "__main__":
    main()
