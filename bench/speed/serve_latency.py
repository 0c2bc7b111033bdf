"""What one request costs a client that keeps its connection, as the ``openai`` client does: the median time of a
one-token chat through the official client, and of ``GET /health`` on a kept connection (no model step), on the
instruction-tuned GPT's shape of ``serve_load.py`` (random weights, with a chat template), one PyTorch thread.

    python bench/speed/serve_latency.py --requests 30

Needs the ``openai`` client (the dev extra).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, make_folder  # noqa: E402
from serve_prefix import TEMPLATE  # noqa: E402


def timed(call, n: int) -> float:
    """The median seconds of ``call`` over ``n`` calls, after three unmeasured ones."""
    for _ in range(3):
        call()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()
    import openai

    from scratchformer.data.named import load_tinyshakespeare

    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder("instruct", Path(tmp), "\n".join(load_tinyshakespeare()))
        (folder / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
        server = Server("scratchformer", folder, 1)
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="none")
            chat = timed(lambda: client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hello there"}], max_tokens=1, temperature=0),
                args.requests)
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)

            def health() -> None:
                conn.request("GET", "/health")
                conn.getresponse().read()

            plain = timed(health, args.requests)
            conn.close()
        finally:
            server.stop()
    print(f"median of {args.requests}: a one-token chat through the openai client {1e3 * chat:.1f} ms; "
          f"GET /health on a kept connection {1e3 * plain:.2f} ms")


if __name__ == "__main__":
    main()
