"""What memory and time do preparing and training on a paper-scale corpus take, beside Hugging Face `tokenizers`?

Corpora at the paper's scale: memory and time of preparing and training, beside Hugging Face ``tokenizers``.

    python bench/speed/corpus_scale.py synth lm --mb 1000 --out /tmp/corpora/lm-1000.txt
    python bench/speed/corpus_scale.py synth pairs --pairs 4500000 --out /tmp/corpora/pairs-4500k.tsv
    python bench/speed/corpus_scale.py run lm /tmp/corpora/lm-1000.txt --work /tmp/corpora/work \
        --json results/bench/corpus_scale.json
    python bench/speed/corpus_scale.py run pairs /tmp/corpora/pairs-4500k.tsv --work /tmp/corpora/work --json ...

``synth`` makes a corpus from the shared data ($SCRATCHFORMER_DATA): for ``lm`` the lines of Tiny Shakespeare,
Multi30k (both languages) and SST-2, shuffled and repeated to the size asked; for ``pairs`` Multi30k's
29,000 training pairs drawn with replacement (WMT 2014 has 4.5M pairs). Keep it out of the repository.

``run`` measures, each in a process of its own under ``/usr/bin/time -v`` (peak resident memory):

1. ``hf``: Hugging Face ``tokenizers`` alone, the issue's baseline: the same byte-level BPE (NFKC, GPT-2
   pre-tokenizer, 16,000 tokens) trained from a stream of 1 MB chunks (both sides of each pair for ``pairs``),
   then ``encode_batch`` of ~1 MB of lines at a time into a ``uint16`` memmap (and int64 offsets for pairs);
2. ``prepare``: ``scratchformer prepare`` into an empty cache folder (hashing, tokenizer training from the
   stream, encoding, writing, checksums: everything);
3. ``train``: ``scratchformer train`` on the same files (the corpus now prepared: a second run), timed from
   the process's start to its data summary (data opened, model built) and to its first logged step, then a
   few hundred steps of a small model (d_model 128, 2 layers, batches of 8 x 64 tokens: the 16,000-token
   output layer of a bigger batch alone takes a gigabyte of activations, which is the model, not the data).

Each row records the machine's load and thread counts beside the numbers. Results are appended to ``--json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]


# ------------------------------------------------------------------------------------------ synthesis


def shared_data() -> Path:
    path = Path(os.environ.get("SCRATCHFORMER_DATA", "../shared/data"))
    if not (path / "tinyshakespeare.txt").is_file():
        sys.exit(f"corpus_scale: the shared data is not in {path}; set SCRATCHFORMER_DATA")
    return path


def synth_lm(mb: float, out: Path, seed: int = 0) -> None:
    data = shared_data()
    lines = (data / "tinyshakespeare.txt").read_text(encoding="utf-8").split("\n")
    for name in ("train.de.gz", "train.en.gz"):
        lines += gzip.open(data / "multi30k" / name, "rt", encoding="utf-8").read().split("\n")
    lines += [row.split("\t")[0] for row in (data / "sst2" / "train.tsv").read_text(encoding="utf-8").split("\n")[1:]]
    lines = [line for line in lines if line.strip()]
    rng, written = random.Random(seed), 0
    with open(out, "w", encoding="utf-8") as f:
        while written < mb * 1e6:
            rng.shuffle(lines)
            block = "\n".join(lines) + "\n"
            block = block[: int(mb * 1e6 - written) + 1] if written + len(block) > mb * 1e6 else block
            f.write(block)
            written += len(block.encode("utf-8"))


def synth_pairs(n: int, out: Path, seed: int = 0) -> None:
    folder = shared_data() / "multi30k"
    de, en = ([line.replace("\t", " ") for line in gzip.open(folder / f"train.{lang}.gz", "rt", encoding="utf-8")
               .read().strip("\n").split("\n")] for lang in ("de", "en"))  # one German line holds a tab
    rng = random.Random(seed)
    with open(out, "w", encoding="utf-8") as f:
        for start in range(0, n, 100_000):
            rows = [rng.randrange(len(de)) for _ in range(min(100_000, n - start))]
            f.write("".join(f"{de[i]}\t{en[i]}\n" for i in rows))


# ------------------------------------------------------------------------------------------ the HF baseline


def hf_baseline(kind: str, path: Path, vocab: int, out: Path) -> dict:
    """The issue's baseline, in this process: BPE from a stream of 1 MB chunks, then encode_batch to a memmap."""
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)

    def chunks():
        with open(path, encoding="utf-8") as f:
            while chunk := f.read(1 << 20):
                yield chunk.replace("\t", "\n") if kind == "pairs" else chunk

    started = time.perf_counter()
    tok.train_from_iterator(chunks(), trainer)
    trained = time.perf_counter()
    size = path.stat().st_size
    fields = ("source", "target") if kind == "pairs" else ("text",)
    ids = {name: np.memmap(out / f"{name}.bin", dtype=np.uint16, mode="w+", shape=(size,)) for name in fields}
    done = dict.fromkeys(fields, 0)
    offsets: dict[str, list] = {name: [] for name in fields}
    with open(path, encoding="utf-8") as f:
        while lines := f.readlines(1 << 20):
            columns = list(zip(*(line.rstrip("\n").split("\t") for line in lines))) if kind == "pairs" else [lines]
            for name, texts in zip(fields, columns):
                encoded = tok.encode_batch(list(texts), add_special_tokens=False)
                flat = np.concatenate([np.array(e.ids, dtype=np.uint16) for e in encoded])
                ids[name][done[name]:done[name] + len(flat)] = flat
                if kind == "pairs":
                    offsets[name].append(done[name] + np.cumsum([len(e.ids) for e in encoded]))
                done[name] += len(flat)
    for name in fields:
        ids[name].flush()
        del ids[name]
        os.truncate(out / f"{name}.bin", done[name] * 2)
        if offsets[name]:
            np.concatenate([[0], *offsets[name]]).astype(np.int64).tofile(out / f"{name}.idx")
    ended = time.perf_counter()
    return {"train_s": trained - started, "encode_s": ended - trained, "tokens": done}


# ------------------------------------------------------------------------------------------ measuring


def machine() -> dict:
    load = os.getloadavg()
    return {"load_1m": round(load[0], 2), "load_5m": round(load[1], 2), "cpus": os.cpu_count(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "RAYON_NUM_THREADS": os.environ.get("RAYON_NUM_THREADS", f"unset ({os.cpu_count()} threads)")}


def timed(cmd: list[str], env: dict, first_step: bool = False) -> dict:
    """Run ``cmd`` under /usr/bin/time -v; its wall time, peak RSS, output, and (``first_step``) the seconds
    from its start to the end of its data summary (the data ready, the model built) and to its first step."""
    started = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-v", *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    first = ready = None
    err_lines: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:
        err_lines.append(line)
        if first_step and ready is None and line.startswith("schedule:"):
            ready = time.perf_counter() - started
        if first_step and first is None and re.match(r"step 1/", line):
            first = time.perf_counter() - started
    out = proc.stdout.read() if proc.stdout else ""
    proc.wait()
    wall = time.perf_counter() - started
    err = "".join(err_lines)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    if proc.returncode != 0:
        sys.exit(f"corpus_scale: {' '.join(cmd)} failed:\n{err[-3000:]}")
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None,
            "first_step_s": round(first, 2) if first is not None else None,
            "ready_s": round(ready, 2) if ready is not None else None, "stdout": out, "stderr": err,
            "machine_before": machine()}


def run(kind: str, data: Path, work: Path, vocab: int, steps: int, json_out: Path | None) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SCRATCHFORMER_CORPORA": str(work / f"cache-{data.stem}")}
    size = data.stat().st_size
    task = "lm" if kind == "lm" else "translate"
    hf_out = work / f"hf-{data.stem}"
    hf_out.mkdir(exist_ok=True)
    row: dict = {"kind": kind, "file": data.name, "bytes": size, "bpe_vocab_size": vocab, "commit": _commit(),
                 "when": time.strftime("%Y-%m-%d %H:%M:%S")}
    hf = timed([sys.executable, __file__, "hf", kind, str(data), "--vocab", str(vocab), "--out", str(hf_out)], env)
    row["hf"] = {**_pick(hf), **json.loads(hf["stdout"])}
    settings = [f"task={task}", "tokenizer=bpe", f"bpe_vocab_size={vocab}"]
    prep = timed([sys.executable, "-m", "scratchformer", "prepare", "--data", str(data), *settings], env)
    row["prepare"] = {**_pick(prep), **_phases(prep["stderr"])}
    model = ["d_model=128", "n_heads=4", "n_layers=2", "d_ff=512", "max_len=64", "batch_size=8", "max_tokens=0",
             f"max_steps={steps}", "log_every=1", f"eval_every={steps}", "eval_batches=2", "eval_decode=0",
             "eval_limit=2000", "test_at_end=false", "num_threads=2"]
    out = work / f"run-{data.stem}-{time.time_ns()}"
    train = timed([sys.executable, "-m", "scratchformer", "train", "--data", str(data), *settings, *model,
                   "--out", str(out)], env, first_step=True)
    row["train"] = _pick(train)
    for part in (row["hf"], row["prepare"]):
        part["mb_per_s"] = round(size / 1e6 / part["wall_s"], 2)
    row["prepare_vs_hf"] = round(row["prepare"]["mb_per_s"] / row["hf"]["mb_per_s"], 3)
    print(json.dumps(row, indent=1))
    if json_out is not None:
        rows = json.loads(json_out.read_text()) if json_out.is_file() else []
        json_out.write_text(json.dumps([*rows, row], indent=1) + "\n")
    return row


def _commit() -> str | None:
    """The commit measured: $BENCH_COMMIT (a copy of the tree outside git), else the checkout's HEAD."""
    if os.environ.get("BENCH_COMMIT"):
        return os.environ["BENCH_COMMIT"]
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          cwd=Path(__file__).parent)
    return head.stdout.strip() or None


def _pick(result: dict) -> dict:
    return {k: v for k, v in result.items() if k in ("wall_s", "peak_rss_mb", "first_step_s", "ready_s",
                                                     "machine_before") and v is not None}


def _phases(stderr: str) -> dict:
    """Seconds of the tokenizer training and of the encoding, as ``prepare`` reports them."""
    trained = re.search(r"^trained a .* in (\d+) s$", stderr, re.M)
    prepared = re.search(r"^prepared .* in ([\d.]+) s; ", stderr, re.M)
    return {"tokenizer_s": float(trained.group(1)) if trained else None,
            "encode_s": float(prepared.group(1)) if prepared else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("synth")
    p.add_argument("kind", choices=["lm", "pairs"])
    p.add_argument("--mb", type=float, default=100.0)
    p.add_argument("--pairs", type=int, default=450_000)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("hf")
    p.add_argument("kind", choices=["lm", "pairs"])
    p.add_argument("data", type=Path)
    p.add_argument("--vocab", type=int, default=16_000)
    p.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("run")
    p.add_argument("kind", choices=["lm", "pairs"])
    p.add_argument("data", type=Path)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--vocab", type=int, default=16_000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "synth":
        (synth_lm(args.mb, args.out) if args.kind == "lm" else synth_pairs(args.pairs, args.out))
    elif args.command == "hf":
        print(json.dumps(hf_baseline(args.kind, args.data, args.vocab, args.out)))
    else:
        run(args.kind, args.data, args.work, args.vocab, args.steps, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
