"""How many tokens a second does `scratchformer serve` give 1, 4 and 16 clients at once, against the same requests one
after another and against `transformers serve`?

    python bench/speed/serve_load.py                                  # both models, the three servers, 1 round
    python bench/speed/serve_load.py --models instruct --rounds 3 --json results/bench/serve_load.json

The load: 16 completion requests (16 different openings of Tiny Shakespeare lines, 9 to 33 tokens), each asking for
64 tokens at temperature 0, streamed (server-sent events), sent by 1, 4 or 16 clients at once; a client sends its next
request when its answer is complete. Reported per server and number of clients: the tokens of all answers over the
wall time (tokens/s), the time to each answer's first token (median and slowest), and the ratio to the same
server's one-client rate. Traffic goes to 127.0.0.1 only.

The models, random weights in a Hugging Face GPT-2 folder that every server reads (the same file for all, so the
answers must be the same text: checked and printed):

- ``gpt2-small``: GPT-2 small's shape (d 768, 12 layers, 12 heads, 1,024 positions, GPT-2's vocabulary of 50,257);
  its tokenizer a byte-level BPE of 8,000 tokens learnt from Tiny Shakespeare (GPT-2's own cannot be downloaded
  here; the vocabulary size, which sets the cost of the output layer, is GPT-2's);
- ``instruct``: the instruction-tuned GPT of the fine-tuning section of RESULTS.md (4 layers, d 128, 4 heads, d_ff 512,
  256 positions, a BPE of 2,000 tokens learnt from Tiny Shakespeare), with GPT-2's biases. Weights change the
  answers, not the cost of a token.

The servers, each a process of its own started as a user starts it, taking turns round by round:

- ``scratchformer``: ``scratchformer serve --ckpt FOLDER`` (continuous batching, up to 16 requests a step);
- ``transformers``: ``transformers serve FOLDER`` (transformers' own OpenAI-compatible server; ``pip install
  "transformers[serving]"``), which generates one request at a time;
- ``transformers-cb``: ``transformers serve FOLDER --continuous-batching`` (its paged-attention batching).

Every server runs with ``--threads`` PyTorch threads (``OMP_NUM_THREADS``, default 1: on a machine shared with other
work, more threads than free cores make every small matrix product wait for the slowest). A server that is not
installed is left out, said in one line. ``--json FILE`` writes the figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SHAPES = {"gpt2-small": dict(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257, tokens=8000),
          "instruct": dict(n_embd=128, n_layer=4, n_head=4, n_inner=512, n_positions=256, vocab_size=2000,
                           tokens=2000)}
NEW_TOKENS, REQUESTS, CLIENTS = 64, 16, (1, 4, 16)


def make_folder(name: str, root: Path, text: str) -> Path:
    """A random GPT-2 folder of the shape ``name`` with a byte-level BPE learnt from ``text``."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    shape = dict(SHAPES[name])
    folder = root / name
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text.splitlines(), trainers.BpeTrainer(
        vocab_size=shape.pop("tokens"), special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    torch.manual_seed(0)
    eos = tok.token_to_id("<|endoftext|>")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**shape, bos_token_id=eos, eos_token_id=eos))
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process on a free port of 127.0.0.1, ready when /v1/models answers."""

    def __init__(self, kind: str, folder: Path, threads: int, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        command = {"scratchformer": [sys.executable, "-m", "scratchformer", "serve", "--ckpt", str(folder)],
                   "transformers": ["transformers", "serve", str(folder)],
                   "transformers-cb": ["transformers", "serve", str(folder), "--continuous-batching"]}[kind]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "OMP_NUM_THREADS": str(threads)}
        self.proc = subprocess.Popen([*command, "--port", str(self.port), *extra], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=env)
        self.model = str(folder)
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if self.get("/v1/models")[0] == 200:
                    return
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"{kind} did not start on port {self.port}")

    def get(self, path: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()

    def peak_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 1024

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def stream_one(port: int, model: str, prompt: str) -> dict:
    """One streamed completion: its text, its tokens (the usage, else the chunks), seconds to its first token."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0, "stream": True,
                       "stream_options": {"include_usage": True}})
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"HTTP {response.status}: {response.read()[:300]!r}")
    first, text, chunks, usage = None, [], 0, None
    for raw in response:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        usage = event.get("usage") or usage
        piece = event["choices"][0].get("text", "") if event.get("choices") else ""
        if piece:
            first = first if first is not None else time.perf_counter() - start
            text.append(piece)
            chunks += 1
    conn.close()
    tokens = usage["completion_tokens"] if usage else chunks
    return {"text": "".join(text), "tokens": tokens, "ttft": first if first is not None else float("nan")}


def load(server: Server, prompts: list[str], clients: int) -> dict:
    """``clients`` clients sending the requests, each its next when its answer is complete."""
    queue = list(enumerate(prompts))
    lock, results = threading.Lock(), [None] * len(prompts)

    def client() -> None:
        while True:
            with lock:
                if not queue:
                    return
                i, prompt = queue.pop(0)
            results[i] = stream_one(server.port, server.model, prompt)

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - start
    # an answer with no text (a random model may write only tokens that decode to nothing) has no first token's time
    ttfts = sorted(r["ttft"] for r in results if r["ttft"] == r["ttft"]) or [float("nan")]
    return {"tokens": sum(r["tokens"] for r in results), "seconds": wall,
            "tokens_per_s": sum(r["tokens"] for r in results) / wall, "ttft_median": statistics.median(ttfts),
            "ttft_max": ttfts[-1], "texts": [r["text"] for r in results]}


def available(kind: str) -> bool:
    if kind == "scratchformer":
        return True
    try:
        import fastapi  # noqa: F401
        import transformers  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print(f"{kind}: left out (pip install \"transformers[serving]\")")
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2-small,instruct")
    parser.add_argument("--servers", default="scratchformer,transformers,transformers-cb")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's threads in every server (OMP_NUM_THREADS)")
    parser.add_argument("--json")
    args = parser.parse_args()
    from scratchformer.data.named import load_tinyshakespeare

    text = "\n".join(load_tinyshakespeare())
    lines = text.splitlines()
    openings = [line for line in lines if len(line) > 40][:REQUESTS * 7:7]
    prompts = [" ".join(line.split()[:4 + i % 6]) for i, line in enumerate(openings)]
    kinds = [k for k in args.servers.split(",") if available(k)]
    figures: dict = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                     "threads": args.threads,
                     "new_tokens": NEW_TOKENS, "requests": REQUESTS, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            folder = make_folder(name, Path(tmp), text)
            runs: dict = {kind: {c: [] for c in CLIENTS} for kind in kinds}
            texts, peaks = {}, {}
            for _ in range(args.rounds):
                for kind in kinds:  # taking turns, round by round
                    server = Server(kind, folder, args.threads)
                    try:
                        load(server, prompts[:2], 2)  # warm-up
                        for clients in CLIENTS:
                            got = load(server, prompts, clients)
                            runs[kind][clients].append(got)
                            texts.setdefault(kind, got["texts"])
                        peaks[kind] = server.peak_mb()
                    finally:
                        server.stop()
            report(name, runs, texts, peaks, figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}")


def report(name: str, runs: dict, texts: dict, peaks: dict, figures: dict) -> None:
    """The table of one model: each server's median round for each number of clients."""
    same = {kind: texts[kind] == texts["scratchformer"] for kind in texts if "scratchformer" in texts}
    print(f"\n{name}: {REQUESTS} requests of {NEW_TOKENS} tokens; same greedy text as scratchformer: "
          + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items()))
    print("| server | clients | tokens/s | x one client | first token, median (s) | first token, slowest (s) | "
          "peak memory (MB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = {}
    for kind, by_clients in runs.items():
        median = {c: sorted(rounds, key=lambda r: r["tokens_per_s"])[len(rounds) // 2] for c, rounds in
                  by_clients.items()}  # each number of clients: its median round (the higher of two)
        for clients, best in median.items():
            rows[f"{kind}/{clients}"] = {k: v for k, v in best.items() if k != "texts"}
            print(f"| {kind} | {clients} | {best['tokens_per_s']:.1f} | "
                  f"{best['tokens_per_s'] / median[1]['tokens_per_s']:.2f}x | {best['ttft_median']:.3f} | "
                  f"{best['ttft_max']:.3f} | {peaks[kind]:.0f} |")
    figures["runs"][name] = {"rows": rows, "same_text": same, "peak_mb": peaks}


if __name__ == "__main__":
    main()
