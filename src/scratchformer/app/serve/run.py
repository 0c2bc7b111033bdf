"""The ``serve`` command: load the model, bind the address (one line if it cannot), say where the server listens,
run uvicorn until SIGTERM or Ctrl-C, then stop cleanly (answers in progress get a few seconds to finish)."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError
from scratchformer.extras import require

GRACE_SECONDS = 5  # at SIGTERM, how long answers in progress may take to finish before they are cut


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free one); ``ConfigError`` in one line if it cannot be had."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.create_server(address[:2], family=family)
    except OSError as err:
        reason = (err.strerror or str(err)).lower()
        raise ConfigError(f"cannot listen on {host}:{port}: {reason} (choose another --port or --host)") from None
    return sock


def is_loopback(sock: socket.socket) -> bool:
    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def cache_plan(model, max_batch: int, context: int | None, kept: int | None) -> tuple[int, int, int]:
    """``(context, kept rows, bytes)`` of the cache a server reserves at start: ``max_batch`` rows and ``kept`` (default
    ``max_batch``) for prefix reuse, each of ``context`` positions (default: the model's window, cut so that the cache
    takes at most a quarter of the computer's memory)."""
    from scratchformer.generation.pool import KVPool

    kept = max_batch if kept is None else kept
    per = KVPool.bytes_per_position(model.new_cache(1, 1)) if KVPool.holds(model.new_cache(1, 1)) else 0
    window = model.config.max_len
    if context is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        context = window if not per else max(2, min(window, memory // 4 // (per * (max_batch + kept))))
    context = min(context, window)
    return context, kept, per * context * (max_batch + kept)


def serve(ckpt: str | Path, host: str = "127.0.0.1", port: int = 8000, *, api_key: str | None = None,
          name: str | None = None, max_batch: int = 16, max_body: int = 1 << 20, verbose: bool = False,
          context: int | None = None, prefix_cache: int | None = None) -> None:
    """Serve ``ckpt`` until SIGTERM or Ctrl-C (see ``server.py`` for the endpoints)."""
    require("starlette", "serve")
    require("uvicorn", "serve")
    import uvicorn

    from scratchformer.app.serve.model import load_served
    from scratchformer.app.serve.server import make_app

    model = load_served(ckpt, name)
    model.context, kept, reserved = cache_plan(model.ckpt.model, max_batch, context, prefix_cache)
    sock = bind(host, port)
    loopback = is_loopback(sock)
    app = make_app(model, api_key=api_key, max_batch=max_batch, max_body=max_body, loopback=loopback, kept=kept)
    server = uvicorn.Server(uvicorn.Config(app, log_level="info" if verbose else "warning", access_log=verbose,
                                           timeout_graceful_shutdown=GRACE_SECONDS, lifespan="on"))
    talk = (f"chat in its {model.template.name} template and completions" if model.template is not None
            else "completions only (it has no chat template)")
    print(f"serving {model.name}: {talk}, {model.max_len} tokens of context, up to {max_batch} answers at once")
    print(f"cache reserved at start: {max_batch} rows and {kept} kept for prefix reuse, {model.max_len:,} positions "
          f"each: {reserved / 2**20:,.0f} MiB (--context, --max-batch, --prefix-cache)")
    if not loopback:
        print(f"listening on {host}, reachable from other machines: "
              + ("every /v1 request needs the API key" if api_key else "anyone who reaches it can use the model "
                 "(--api-key KEY to require a key)"))
    url = url_of(sock)
    print(f"OpenAI API at {url}/v1, the chat page at {url}/ (Ctrl-C or SIGTERM to stop)", flush=True)
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, frame: caught.append(number))
                for sig in (signal.SIGINT, signal.SIGTERM)}  # uvicorn handles them, then raises them again here
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    print("stopped", flush=True)


def run_command(args: Any) -> int:
    """``scratchformer serve``'s arguments -> ``serve``."""
    import os

    key = args.api_key or os.environ.get("SCRATCHFORMER_API_KEY") or None
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    serve(args.ckpt, args.host, args.port, api_key=key, name=args.name, max_batch=args.max_batch,
          max_body=args.max_body, verbose=args.verbose, context=args.context, prefix_cache=args.prefix_cache)
    return 0
