"""How fast is `beam_search` against Hugging Face BART's `generate(num_beams=4)`, side by side in one process?

Seq2seq beam-search speed: scratchformer's ``beam_search`` against Hugging Face
``BartForConditionalGeneration.generate(num_beams=4)``, side by side in one process.

    python bench/speed/beam_speed.py                     # 200 Multi30k test sentences, 3 rounds
    python bench/speed/beam_speed.py --limit 64 --repeats 2 --threads 1

Data: the German sources of the Multi30k test set (test_2016_flickr), found like every named dataset
(``$SCRATCHFORMER_DATA``, then the user cache, else downloaded), tokenized with a byte-level BPE of 8,000
tokens trained on the Multi30k training set (German + English), with eos appended as the trainer does.
The first ``--limit`` sentences are sorted by length and cut into batches of ``--batch-size``; both
contestants get the same batches.

Models: the ``multi30k`` preset's dimensions (d_model 256, 4 heads, 3 encoder + 3 decoder layers, d_ff
1024, shared vocabulary of 8,000, ReLU, post-LN), random weights. BART is built with the same dimensions
(and ReLU, scaled embeddings, tied embeddings); it differs where BART differs (learned positions, a
LayerNorm on the embeddings), which costs next to nothing.

Fair comparison: beam 4, length penalty 0.6, and with random weights output lengths would be arbitrary,
so both are forced to produce exactly L tokens per sentence, L = the longest source in the batch: eos
is forbidden until then (``min_new_tokens = max_new_tokens = L`` for both), so every beam runs L steps.

Timing: after a warm-up batch, the contestants take turns (round-robin, ``--repeats`` rounds over all
the sentences), median round reported as sentences per second. Peak memory: each contestant also runs
once over all the sentences in a fresh child process; reported is its peak resident memory (Linux
``VmHWM``, reset after loading and warm-up) above its resident memory just before decoding.
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

from scratchformer import ModelConfig, Seq2SeqTransformer
from scratchformer.data import load_multi30k
from scratchformer.data.batching import pad_batch
from scratchformer.generation import beam_search
from scratchformer.tokenizers import BOS_ID, EOS_ID, PAD_ID, BPETokenizer

CONTESTANTS = ("ours", "hf-bart")
BEAM, ALPHA = 4, 0.6
Batch = tuple[torch.Tensor, torch.Tensor, int]  # (src (B, S), mask (B, S), forced output length)


def model_config(vocab: int) -> ModelConfig:
    return ModelConfig(arch="seq2seq", vocab_size=vocab, d_model=256, n_heads=4, n_layers=3, d_ff=1024,
                       max_len=128, dropout=0.0)


def _quiet_transformers() -> None:
    import transformers

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


def make_batches(limit: int, batch_size: int, directory: Path) -> list[Batch]:
    """Tokenize the test sources (the BPE is trained once and cached in ``directory``)."""
    tok_file = directory / "tokenizer.json"
    data = load_multi30k()
    if tok_file.exists():
        from scratchformer.tokenizers import load_tokenizer

        tokenizer = load_tokenizer(directory)
    else:
        tokenizer = BPETokenizer.train((text for pair in data["train"] for text in pair), 8000)
        tokenizer.save(directory)
    sources = tokenizer.encode_batch([de for de, _ in data["test"][:limit]], add_eos=True)
    sources = sorted(sources, key=len)  # similar lengths together, as the trainer batches them
    batches = []
    for i in range(0, len(sources), batch_size):
        src, mask = pad_batch(sources[i:i + batch_size], PAD_ID)
        batches.append((src, mask, src.size(1)))
    return batches


def load_runner(name: str, vocab: int) -> Callable[[Batch], list[int]]:
    """A function ``batch -> output lengths`` for one contestant, random weights from a fixed seed."""
    torch.manual_seed(0)
    if name == "ours":
        model = Seq2SeqTransformer(model_config(vocab)).eval()

        def run_ours(batch: Batch) -> list[int]:
            src, mask, n = batch
            out = beam_search(model, src, mask, bos_id=BOS_ID, eos_id=EOS_ID, beam_size=BEAM, length_penalty=ALPHA,
                              max_new_tokens=n, min_new_tokens=n)
            return [len(h) for h in out]
        return run_ours

    import transformers

    c = model_config(vocab)
    cfg = transformers.BartConfig(
        vocab_size=vocab, d_model=c.d_model, encoder_layers=c.n_layers, decoder_layers=c.n_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff, max_position_embeddings=c.max_len, activation_function="relu", dropout=0.0,
        attention_dropout=0.0, activation_dropout=0.0, scale_embedding=True, tie_word_embeddings=True,
        pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, decoder_start_token_id=BOS_ID,
        forced_bos_token_id=None, forced_eos_token_id=None, no_repeat_ngram_size=0)
    bart = transformers.BartForConditionalGeneration(cfg).eval()

    def run_hf(batch: Batch) -> list[int]:
        src, mask, n = batch
        with torch.no_grad():
            out = bart.generate(input_ids=src, attention_mask=mask.long(), num_beams=BEAM, length_penalty=ALPHA,
                                max_new_tokens=n, min_new_tokens=n, do_sample=False, early_stopping=False,
                                num_return_sequences=1, use_cache=True)
        return [int((row != PAD_ID).sum()) - 1 for row in out]  # minus the decoder start token
    return run_hf


# ----------------------------------------------------------------------------------- memory


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(name: str, directory: Path, limit: int, batch_size: int) -> None:
    """Decode all the sentences once with one contestant in this (fresh) process; print JSON."""
    batches = make_batches(limit, batch_size, directory)
    run = load_runner(name, 8000)
    run(batches[0])  # warm-up
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current RSS
    base = _status_kb("VmRSS")
    for batch in batches:
        run(batch)
    print(json.dumps({"base_mb": base / 1024, "peak_extra_mb": (_status_kb("VmHWM") - base) / 1024}))


def measure_memory(name: str, directory: Path, args: argparse.Namespace) -> dict[str, float] | None:
    if platform.system() != "Linux":
        return None
    cmd = [sys.executable, __file__, "--child", name, "--work-dir", str(directory), "--limit", str(args.limit),
           "--batch-size", str(args.batch_size), "--threads", str(torch.get_num_threads())]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=200, help="test sentences to translate")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3, help="round-robin rounds (median reported)")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--profile", action="store_true", help="print where each contestant's time goes (one batch)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--child", choices=CONTESTANTS, help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    _quiet_transformers()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args.child, args.work_dir, args.limit, args.batch_size)
        return

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        batches = make_batches(args.limit, args.batch_size, directory)
        n_sent = sum(b[0].size(0) for b in batches)
        out_tokens = sum(b[0].size(0) * b[2] for b in batches)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.machine()}, "
              f"{os.cpu_count()} CPUs; d 256, 4 heads, 3+3 layers, d_ff 1024, vocab 8000; beam {BEAM}, "
              f"alpha {ALPHA}; {n_sent} sentences in {len(batches)} batches of <= {args.batch_size}; output "
              f"length forced to the batch's longest source ({out_tokens} output tokens in all)")
        runners = {name: load_runner(name, 8000) for name in CONTESTANTS}
        for run in runners.values():
            run(batches[0])  # warm-up

        times: dict[str, list[float]] = {name: [] for name in CONTESTANTS}
        lengths: dict[str, list[int]] = {}
        for r in range(args.repeats):
            for name, run in runners.items():
                t = time.perf_counter()
                lengths[name] = [n for batch in batches for n in run(batch)]
                times[name].append(time.perf_counter() - t)
            print(f"  round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            for name, run in runners.items():
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    run(batches[0])
                print(f"\n--- profile: {name}, one batch of {batches[0][0].size(0)} sentences ---")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))
        memory = {} if args.no_memory else {name: measure_memory(name, directory, args) for name in CONTESTANTS}

    expected = [b[2] for b in batches for _ in range(b[0].size(0))]
    print(f"\n{'contestant':<10} {'median s':>9} {'sentences/s':>12} {'peak extra MB':>14}")
    med = {name: statistics.median(v) for name, v in times.items()}
    for name in CONTESTANTS:
        mem = memory.get(name)
        mem_s = f"{mem['peak_extra_mb']:.1f}" if mem else "-"
        ok = "lengths as forced" if lengths[name] == expected else "LENGTHS DIFFER FROM THE FORCED ONES"
        spread = f"{min(times[name]):.2f}-{max(times[name]):.2f} s"
        print(f"{name:<10} {med[name]:>9.2f} {n_sent / med[name]:>12.1f} {mem_s:>14}   ({ok}; {spread})")
    print(f"\nours vs hf-bart: {med['hf-bart'] / med['ours']:.2f}x faster (target >= 1.5x)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "setup": f"torch {torch.__version__}, {torch.get_num_threads()} threads; {n_sent} sentences, beam {BEAM}",
            "seconds": times, "median_s": med, "sentences_per_s": {k: n_sent / v for k, v in med.items()},
            "peak_extra_mb": {k: (v or {}).get("peak_extra_mb") for k, v in memory.items()}}, indent=1) + "\n")


if __name__ == "__main__":
    main()
