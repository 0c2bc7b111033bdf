"""A chat's second turn: how much sooner does its first token come when the server reads the first turn from its
kept rows (prefix reuse) than when it reads the whole conversation again?

    python bench/speed/serve_prefix.py                    # both models of serve_load.py, 5 rounds
    python bench/speed/serve_prefix.py --models instruct --rounds 3

Each round: a first turn (a user message of Tiny Shakespeare, ``FIRST`` tokens of GPT-2 small's shape, 150 of the
instruction-tuned GPT's, whose window is 256), answered greedily in 32 tokens; then the second turn (the first, its
answer, and a short message). Two servers of the same folder take turns round by
round: ``scratchformer serve`` as it starts (kept rows for prefix reuse) and with ``--prefix-cache 0`` (none). The time
to the first token is that of the second turn asked for one token (not streamed: a random model's first token may
have no text to stream), from sending the request to reading the whole answer, measured twice: with a new connection
for each request, and with one connection kept open between requests, as the ``openai`` client keeps its own. Each
conversation's opening is a different part of the text. Reported: the median time to the second turn's first token with
and without, their ratio, the prompt tokens the server says it reused (``usage.prompt_tokens_details.cached_tokens``)
and whether the two servers' second answers are the same text (they must be: the reused keys are the same numbers).
The folders are ``serve_load.py``'s (random weights, GPT-2's layout) with a chat template; one PyTorch thread. Then
the engine alone, in this process: the second turn's prompt read for one token with and without a kept row (the first
turn's, read again before each run; median of 11), what the server adds to it being each request's fixed costs.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import Server, make_folder  # noqa: E402  (the load benchmark's models and server)

FIRST = {"gpt2-small": 400, "instruct": 150}
ANSWER_TOKENS = 32
CONNECTIONS = ("new", "kept")  # a connection for each request, or one kept open (as the openai client keeps one)
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def chat(server: Server, messages: list[dict], max_tokens: int, kept: http.client.HTTPConnection | None) -> dict:
    """One chat completion (not streamed): its text, its seconds, the prompt tokens reused. ``kept``: a connection
    kept open between requests (as the ``openai`` client keeps its connections); None: a new one for this request."""
    body = json.dumps({"model": server.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    start = time.perf_counter()
    conn = kept or http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    try:
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
    except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
        if kept is None:
            raise
        kept.close()  # the server closed it after 5 idle seconds (while the other server answered): opened again
        return chat(server, messages, max_tokens, kept)
    seconds = time.perf_counter() - start
    if kept is None:
        conn.close()
    if response.status != 200:
        raise SystemExit(f"HTTP {response.status}: {data[:300]!r}")
    answer = json.loads(data)
    usage = answer["usage"]
    return {"text": answer["choices"][0]["message"]["content"], "seconds": seconds,
            "cached": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
            "prompt_tokens": usage["prompt_tokens"]}


def conversation(server: Server, opening: str, kept: http.client.HTTPConnection | None) -> dict:
    """The first turn answered, then the second turn asked for its first token (timed: the request's whole time,
    the time to its first token), then for 8 tokens (their text compared between the servers)."""
    turn = [{"role": "user", "content": opening}]
    answer = chat(server, turn, ANSWER_TOKENS, kept)["text"]
    second = [*turn, {"role": "assistant", "content": answer}, {"role": "user", "content": "And what came next?"}]
    first = chat(server, second, 1, kept)
    return {**first, "ttft": first["seconds"], "text": chat(server, second, 8, kept)["text"]}


def engine_alone(folder: Path, opening: str) -> tuple[float, float, int]:
    """The engine alone, in this process, one thread: the median seconds of reading a second turn's prompt for one
    token without kept rows and with them (the first turn kept), and the tokens reused."""
    import torch

    from scratchformer.app.serve.model import load_served
    from scratchformer.generation.engine import Engine
    from scratchformer.generation.requests import Request

    torch.set_num_threads(1)
    model = load_served(folder)
    first = model.chat_ids([{"role": "user", "content": opening}])
    ids = model.chat_ids([{"role": "user", "content": opening}, {"role": "assistant", "content": "Ay, my lord."},
                          {"role": "user", "content": "And what came next?"}])
    times, reused = [], 0
    for kept in (0, 1):  # one kept row: the first turn's, read again before each run (not the last run's prompt)
        engine = Engine(model.ckpt.model, model.ckpt.tokenizer, max_rows=16, context=model.max_len, kept=kept)
        runs = []
        for _ in range(11):
            engine.run([Request(first, 1)])
            start = time.perf_counter()
            reused = engine.run([Request(ids, 1)])[0].cached_tokens
            runs.append(time.perf_counter() - start)
        times.append(statistics.median(runs))
    return times[0], times[1], reused


def rounds(folder: Path, openings: list[str], threads: int) -> dict[tuple[str, str], list[dict]]:
    """Each opening's conversation with both servers, taking turns, on a new connection and on a kept one by turns
    (the last opening is the warm-up's): ``(connection, way) -> conversations``."""
    servers = {"with": Server("scratchformer", folder, threads),
               "without": Server("scratchformer", folder, threads, ("--prefix-cache", "0"))}
    kept = {way: http.client.HTTPConnection("127.0.0.1", server.port, timeout=600) for way, server in servers.items()}
    seen: dict[tuple[str, str], list[dict]] = {}
    try:
        for server in servers.values():
            conversation(server, openings[-1], None)
        for i, opening in enumerate(openings[:-1]):  # each conversation its own opening: nothing kept from another
            connection = CONNECTIONS[i % len(CONNECTIONS)]
            for way, server in servers.items():
                conn = kept[way] if connection == "kept" else None
                seen.setdefault((connection, way), []).append(conversation(server, opening, conn))
    finally:
        for conn in kept.values():
            conn.close()
        for server in servers.values():
            server.stop()
    return seen


def row(name: str, connection: str, on: list[dict], off: list[dict]) -> str:
    """The table's row of one model and one kind of connection."""
    assert all(s["cached"] == 0 for s in off)
    with_s, without_s = (statistics.median(s["ttft"] for s in runs) for runs in (on, off))
    same = all(a["text"] == b["text"] for a, b in zip(on, off))
    prompt, reused = (statistics.median(s[key] for s in on) for key in ("prompt_tokens", "cached"))
    return (f"| {name} | {connection} | {FIRST[name]} | {prompt:.0f} | {reused:.0f} | {1e3 * with_s:.1f} | "
            f"{1e3 * without_s:.1f} | {without_s / with_s:.1f}x | {'yes' if same else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2-small,instruct")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    from tokenizers import Tokenizer

    from scratchformer.data.named import load_tinyshakespeare

    text = "\n".join(load_tinyshakespeare())
    print(f"a chat's second turn, time to its first token: prefix reuse on (as serve starts) against --prefix-cache 0;"
          f" scratchformer serve, {args.threads} thread(s), median of {args.rounds} rounds")
    print("| model | connection | first turn (tokens) | second turn's prompt (tokens) | reused (tokens) | "
          "with reuse (ms) | without (ms) | sooner by | same answers |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    engines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            folder = make_folder(name, Path(tmp), text)
            (folder / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            openings = []
            for r in range(args.rounds * len(CONNECTIONS) + 1):  # one more: the warm-up's
                enc = tok.encode(text[r * 20_000:r * 20_000 + 8_000])
                openings.append(text[r * 20_000:r * 20_000 + enc.offsets[FIRST[name] - 8][1]])  # the template's tokens
            seen = rounds(folder, openings, args.threads)
            for connection in CONNECTIONS:
                print(row(name, connection, seen[(connection, "with")], seen[(connection, "without")]))
            alone = engine_alone(folder, openings[0])
            engines.append(f"{name}: the engine alone, in one process: {1e3 * alone[0]:.2f} ms without kept rows, "
                           f"{1e3 * alone[1]:.2f} ms with ({alone[2]} tokens reused): {alone[0] / alone[1]:.1f}x")
    print("\n".join(engines))


if __name__ == "__main__":
    main()
