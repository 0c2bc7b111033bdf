"""Several answers to one prompt: ``n=8`` in one request against eight requests for one answer each, sent at once,
through ``scratchformer serve``.

    python bench/speed/serve_n.py                     # both models of serve_load.py, 3 rounds
    python bench/speed/serve_n.py --models instruct --rounds 5

The prompt: 200 tokens of Tiny Shakespeare (as token ids); each answer 32 tokens at temperature 1 (a seed each, so
the answers differ). ``n=8``: one request, the prompt read once and its cache row copied for the other seven answers.
``8 x n=1``: eight requests sent together by eight clients, the prompt read once for each (together in one pass
when they arrive together). Reported: the wall time of each, scaled to 8 x 32 tokens should an answer end early (the
median round; the two take turns round by round) and its ratio. The models are ``serve_load.py``'s (random weights in
Hugging Face GPT-2 folders: GPT-2 small's shape, and the instruction-tuned GPT's), one server for both ways, one
PyTorch thread (``--threads``), started with ``--prefix-cache 0``: with kept rows, the eight requests would find the
prompt in the previous round's answers and read it once too (prefix reuse, ``serve_prefix.py``'s subject).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, make_folder  # noqa: E402  (the load benchmark's models and server)

PROMPT_TOKENS, NEW_TOKENS, N = 200, 32, 8


def complete(port: int, model: str, prompt: list[int], n: int, seed: int) -> int:
    """One completion request (not streamed): the tokens of all its answers."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 1, "seed": seed,
                       "n": n})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    if response.status != 200:
        raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
    return json.loads(data)["usage"]["completion_tokens"]


def one_request(server: Server, prompt: list[int]) -> tuple[float, int]:
    start = time.perf_counter()
    tokens = complete(server.port, server.model, prompt, N, 1)
    return time.perf_counter() - start, tokens


def eight_requests(server: Server, prompt: list[int]) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(N) as pool:
        tokens = sum(pool.map(lambda i: complete(server.port, server.model, prompt, 1, i), range(N)))
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2-small,instruct")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    from scratchformer.data.named import load_tinyshakespeare

    text = "\n".join(load_tinyshakespeare())
    print(f"n={N} answers of {NEW_TOKENS} tokens to one prompt of {PROMPT_TOKENS} tokens, against {N} requests of "
          f"one answer sent at once; scratchformer serve, {args.threads} thread(s), median of {args.rounds} rounds")
    print("| model | n=8, one request (s) | 8 requests of n=1 (s) | n=8 faster by |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            folder = make_folder(name, Path(tmp), text)
            prompt = Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text[:5000]).ids[:PROMPT_TOKENS]
            server = Server("scratchformer", folder, args.threads, ("--prefix-cache", "0"))  # module docstring
            try:
                one_request(server, prompt[:20])  # warm-up
                together, apart = [], []
                for _ in range(args.rounds):  # taking turns; time per answer token (an answer may end early)
                    seconds, tokens = one_request(server, prompt)
                    together.append(seconds * N * NEW_TOKENS / tokens)
                    seconds, tokens = eight_requests(server, prompt)
                    apart.append(seconds * N * NEW_TOKENS / tokens)
            finally:
                server.stop()
            a, b = statistics.median(together), statistics.median(apart)
            print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")


if __name__ == "__main__":
    main()
