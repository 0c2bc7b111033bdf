"""How fast does `evaluate --benchmark` score ARC-Easy and HellaSwag against lm-evaluation-harness's `HFLM`, and in
how much memory?

    python bench/speed/benchmark_speed.py                       # ARC-Easy (570) and 1,000 HellaSwag, 1 round
    python bench/speed/benchmark_speed.py --arc 100 --hellaswag 100 --rounds 2 --json speed.json

The model: a GPT-2-shaped folder (GPT-2 small: 12 layers, 12 heads, d_model 768, 1,024 positions, a 50,257-token
output layer), random weights saved by ``transformers``, with a byte-level BPE tokenizer trained on Tiny
Shakespeare and MMLU's dev questions (GPT-2's own cannot be downloaded here: its texts take more tokens than GPT-2's
would, the same for both contestants). Both score the same folder, from the data folder's files
(``$SCRATCHFORMER_DATA``):

- ``ours``: ``benchmarks.evaluate_benchmarks`` (a question's prompt read once into the KV cache, its choices continued
  from it, logits only where a continuation's token is predicted);
- ``hflm``: ``lm_eval.simple_evaluate`` with ``HFLM(pretrained=FOLDER, batch_size=--hf-batch)``, on the harness's own
  ``arc_easy`` and ``hellaswag`` YAMLs with their data pointed at the same local files (offline).

Each (contestant, benchmark) runs in a fresh child process: a run of 5 questions, then a run of N; the rate is
(N - 5) / (time of N - time of 5), so the start-up of each (loading, building the task, the first batches) is taken
off. The contestants take turns, benchmark by benchmark (the order flips each round), so a slow phase of a shared
machine hits both. Peak memory: the child's peak resident memory (Linux ``VmHWM``) over the whole run, and its
resident memory once the model is loaded. The accuracies of the two must agree (printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("SCRATCHFORMER_DATA") or REPO.parent / "shared" / "data")
FILES = {"arc_easy": ("arc/arc_easy.yaml", "arc_easy_validation.jsonl.gz", "training_split: null\ntest_split: null"),
         "hellaswag": ("hellaswag/hellaswag.yaml", "hellaswag_validation.jsonl.gz", "training_split: null")}


def _memory(field: str) -> int:
    """Kilobytes of ``field`` (VmHWM, VmRSS) of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def make_folder(folder: Path) -> None:
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from scratchformer.data.benchmark_files import read_jsonl

    folder.mkdir(parents=True)
    texts = (DATA / "tinyshakespeare.txt").read_text().split("\n\n")
    texts += [r["question"] for _, r in read_jsonl(DATA / "benchmarks" / "mmlu_dev.jsonl.gz")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=16000, special_tokens=["<|endoftext|>"],
                                                        show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast",
                                                              "eos_token": "<|endoftext|>"}))
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(bos_token_id=0, eos_token_id=0)).save_pretrained(folder)


def _ours(folder: Path, name: str, n: int) -> tuple[float, float, float]:
    from scratchformer.benchmarks import evaluate_benchmarks
    from scratchformer.checkpoints import load_checkpoint

    ckpt = load_checkpoint(folder)
    times, acc = [], 0.0
    for limit in (5, n):
        start = time.perf_counter()
        acc = evaluate_benchmarks(ckpt, [name], limit=limit, data_dir=DATA, log=lambda s: None)[name]["acc"]
        times.append(time.perf_counter() - start)
    return times[0], times[1], acc


def _hflm(folder: Path, name: str, n: int, batch: int) -> tuple[float, float, float]:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import lm_eval
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    base, data, extra = FILES[name]
    tasks = Path(tempfile.mkdtemp())
    (tasks / "t.yaml").write_text(f"include: {Path(lm_eval.__file__).parent / 'tasks' / base}\ntask: {name}_local\n"
                                  f"tag: []\ndataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n"
                                  f"    validation: {DATA / 'benchmarks' / data}\n{extra}\n")
    lm = HFLM(pretrained=str(folder), batch_size=batch, device="cpu")
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    times, acc = [], 0.0
    for limit in (5, n):
        start = time.perf_counter()
        out = simple_evaluate(model=lm, tasks=[f"{name}_local"], task_manager=manager, limit=limit)
        times.append(time.perf_counter() - start)
        acc = out["results"][f"{name}_local"]["acc,none"]
    return times[0], times[1], acc


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    loaded = _memory("VmRSS")
    if args.child == "ours":
        t5, tn, acc = _ours(Path(args.folder), args.bench, args.n)
    else:
        t5, tn, acc = _hflm(Path(args.folder), args.bench, args.n, args.hf_batch)
    print(json.dumps({"t5": t5, "tn": tn, "acc": acc, "peak_mb": _memory("VmHWM") / 1024,
                      "start_mb": loaded / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arc", type=int, default=570, help="ARC-Easy questions (default: all 570)")
    parser.add_argument("--hellaswag", type=int, default=1000, help="HellaSwag questions (default 1,000)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--hf-batch", type=int, default=16, help="HFLM's batch_size (default 16)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child"), parser.add_argument("--folder"), parser.add_argument("--bench")
    parser.add_argument("--n", type=int)
    args = parser.parse_args()
    if args.child:
        return child(args)
    folder = Path(tempfile.mkdtemp()) / "gpt2-shaped"
    make_folder(folder)
    runs: dict[str, list[dict]] = {}
    for round_ in range(args.rounds):
        for bench, n in (("arc_easy", args.arc), ("hellaswag", args.hellaswag)):
            order = ("ours", "hflm") if round_ % 2 == 0 else ("hflm", "ours")
            for who in order:
                cmd = [sys.executable, __file__, "--child", who, "--folder", str(folder), "--bench", bench, "--n",
                       str(n), "--threads", str(args.threads), "--hf-batch", str(args.hf_batch)]
                done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
                if done.returncode:
                    sys.exit(done.stderr[-3000:])
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                figures["rate"] = (n - 5) / (figures["tn"] - figures["t5"])
                runs.setdefault(f"{who} {bench}", []).append({**figures, "n": n})
                print(f"round {round_ + 1}, {who:>4} {bench:<9} {n:>5} questions: {figures['rate']:6.2f} questions/s, "
                      f"acc {figures['acc']:.4f}, peak {figures['peak_mb']:,.0f} MB", flush=True)
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads} threads; "
          f"HFLM batch_size={args.hf_batch}")
    print(f"{'benchmark':<10} {'questions':>9} {'ours q/s':>9} {'HFLM q/s':>9} {'ratio':>6} {'ours peak MB':>13} "
          f"{'HFLM peak MB':>13}")
    for bench in ("arc_easy", "hellaswag"):
        ours, theirs = runs[f"ours {bench}"], runs[f"hflm {bench}"]
        mine = sorted(r["rate"] for r in ours)[len(ours) // 2]
        ref = sorted(r["rate"] for r in theirs)[len(theirs) // 2]
        print(f"{bench:<10} {ours[0]['n']:>9,} {mine:>9.2f} {ref:>9.2f} {mine / ref:>5.2f}x "
              f"{max(r['peak_mb'] for r in ours):>13,.0f} {max(r['peak_mb'] for r in theirs):>13,.0f}")
        assert all(r["acc"] == theirs[0]["acc"] for r in ours + theirs), "the two disagree on accuracy"
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
