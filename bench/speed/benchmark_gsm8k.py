"""How long does `evaluate --benchmark gsm8k` take per problem against lm-evaluation-harness's `HFLM`, on the same
folder, and do the two write the same answers?

    scratchformer export --ckpt runs/ts-instruct --format hf --out runs/ts-instruct-hf
    python bench/speed/benchmark_gsm8k.py --folder runs/ts-instruct-hf --problems 200

Both answer GSM8K's test problems from the data folder's files (``$SCRATCHFORMER_DATA``) in the plain form, 5-shot,
greedy, until a stop sequence or the end-of-text token:

- ``ours``: ``benchmarks.evaluate_benchmarks(ckpt, ["gsm8k"], chat="no")`` (batched by a token budget with the KV
  cache; a row leaves its batch as soon as its answer ends);
- ``hflm``: ``lm_eval.simple_evaluate`` with ``HFLM(pretrained=FOLDER, batch_size=--hf-batch)`` on the harness's own
  ``gsm8k.yaml``, its data pointed at the same local files (offline).

The answers' budget is the harness's 256 tokens, or half the window where 256 do not fit in it (the harness would
refuse such a model: its prompts get ``max_length - max_gen_toks`` tokens; the YAML then sets ``max_gen_toks`` to the
same half, so both read the same prompts). Each (contestant) runs in a fresh child process: 5 problems, then N; the
time per problem is (time of N - time of 5) / (N - 5), so the start-up is taken off; the two take turns (the order
flips each round); each child first answers 5 problems untimed, to warm up. Peak memory: the child's peak
resident memory (Linux ``VmHWM``). The answers of the two are compared problem by problem
(printed: how many are the same text).
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


def _memory(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _budget(folder: Path) -> int:
    from scratchformer.checkpoints import load_checkpoint

    window = load_checkpoint(folder).model.config.max_len
    return 256 if window > 256 else window // 2


def _ours(folder: Path, n: int) -> tuple[float, float, list[str], float]:
    from scratchformer.benchmarks import BENCHMARKS
    from scratchformer.benchmarks.generated import answer_problems, prompt_texts
    from scratchformer.benchmarks.gsm8k import score_answers
    from scratchformer.benchmarks.run import load_questions
    from scratchformer.checkpoints import load_checkpoint

    ckpt = load_checkpoint(folder)
    times, outputs, score = [], [], 0.0
    for limit in (5, 5, n):  # the first run warms up (files read, first products): not timed
        start = time.perf_counter()
        problems = load_questions(BENCHMARKS["gsm8k"], limit=limit, data_dir=DATA)
        outputs, _ = answer_problems(ckpt, prompt_texts(ckpt, problems, chat=False))
        score = score_answers(problems, outputs)[0]["exact_match,flexible-extract"]
        times.append(time.perf_counter() - start)
    return times[1], times[2], outputs, score


def _hflm(folder: Path, n: int, batch: int) -> tuple[float, float, list[str], float]:
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import lm_eval
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    tasks, bench = Path(tempfile.mkdtemp()), DATA / "benchmarks"
    (tasks / "t.yaml").write_text(
        f"include: {Path(lm_eval.__file__).parent / 'tasks/gsm8k/gsm8k.yaml'}\ntask: gsm8k_local\ntag: []\n"
        f"dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n"
        f"    test: {bench / 'gsm8k_test.jsonl.gz'}\n    train: {bench / 'gsm8k_train.jsonl.gz'}\n"
        "generation_kwargs:\n  until:\n    - 'Question:'\n    - '</s>'\n    - '<|im_end|>'\n  do_sample: false\n"
        f"  temperature: 0.0\n  max_gen_toks: {_budget(folder)}\n")
    lm = HFLM(pretrained=str(folder), batch_size=batch, device="cpu")
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    times, outputs, score = [], [], 0.0
    for limit in (5, 5, n):
        start = time.perf_counter()
        out = simple_evaluate(model=lm, tasks=["gsm8k_local"], task_manager=manager, limit=limit, log_samples=True)
        times.append(time.perf_counter() - start)
        samples = sorted((s for s in out["samples"]["gsm8k_local"] if s["filter"] == "strict-match"),
                         key=lambda s: s["doc_id"])
        outputs = [s["resps"][0][0] for s in samples]
        score = out["results"]["gsm8k_local"]["exact_match,flexible-extract"]
    return times[1], times[2], outputs, score


def child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    if args.child == "ours":
        t5, tn, outputs, score = _ours(Path(args.folder), args.n)
    else:
        t5, tn, outputs, score = _hflm(Path(args.folder), args.n, args.hf_batch)
    print(json.dumps({"t5": t5, "tn": tn, "outputs": outputs, "score": score, "peak_mb": _memory("VmHWM") / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", required=True, help="a Hugging Face folder both can load (export --format hf)")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--hf-batch", type=int, default=16, help="HFLM's batch_size (default 16)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child"), parser.add_argument("--n", type=int)
    args = parser.parse_args()
    if args.child:
        return child(args)
    runs: dict[str, list[dict]] = {"ours": [], "hflm": []}
    for round_ in range(args.rounds):
        for who in ("ours", "hflm") if round_ % 2 == 0 else ("hflm", "ours"):
            cmd = [sys.executable, __file__, "--child", who, "--folder", args.folder, "--n", str(args.problems),
                   "--threads", str(args.threads), "--hf-batch", str(args.hf_batch)]
            done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
            if done.returncode:
                sys.exit(done.stderr[-3000:])
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            figures["per_problem"] = (figures["tn"] - figures["t5"]) / (args.problems - 5)
            runs[who].append(figures)
            print(f"round {round_ + 1}, {who:>4}: {figures['per_problem']:.3f} s a problem, flexible-extract "
                  f"{figures['score']:.4f}, peak {figures['peak_mb']:,.0f} MB", flush=True)
    mine = sorted(r["per_problem"] for r in runs["ours"])[len(runs["ours"]) // 2]
    ref = sorted(r["per_problem"] for r in runs["hflm"])[len(runs["hflm"]) // 2]
    same = sum(a == b for a, b in zip(runs["ours"][0]["outputs"], runs["hflm"][0]["outputs"]))
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.threads} threads; HFLM "
          f"batch_size={args.hf_batch}; {args.problems} problems, answers of at most {_budget(Path(args.folder))} "
          f"tokens\nours {mine:.3f} s a problem, HFLM {ref:.3f} s: {ref / mine:.2f}x; peak memory "
          f"{max(r['peak_mb'] for r in runs['ours']):,.0f} MB against {max(r['peak_mb'] for r in runs['hflm']):,.0f} "
          f"MB; the same answer text for {same} of {args.problems} problems")


if __name__ == "__main__":
    main()
