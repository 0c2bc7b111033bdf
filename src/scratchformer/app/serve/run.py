"""The ``serve`` command: load the model, bind the address (one line if it cannot), say where the server listens,
run uvicorn until SIGTERM or Ctrl-C, then stop cleanly: answers in progress get ``--grace`` seconds (5) to finish,
then end themselves (a stream with an error event, a waiting request with a 503) before uvicorn cancels what is left.

Limits on connections: a request's head must arrive within ``--read-timeout`` seconds (30) of the connection's
opening (or of its last answer) and its body within as many again, or the connection is closed (uvicorn itself waits
for ever); an idle connection is closed after ``KEEP_ALIVE`` seconds; at most ``MAX_CONNECTIONS`` connections at once
(a request on one more is a 503 in OpenAI's form, its connection closed)."""

from __future__ import annotations

import asyncio
import ipaddress
import math
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError
from scratchformer.extras import require

GRACE_SECONDS = 5  # at SIGTERM, how long answers in progress may take to finish before they are cut
MAX_CONNECTIONS = 320  # open at once: the decoding rows (16), the waiting requests (256) and room for pages
KEEP_ALIVE = 5  # seconds an idle connection is kept open (uvicorn's default)
# seconds a thread holds the interpreter while another waits (Python's default: 0.005). The decoding thread lets go of
# it at every PyTorch operation and must take it back after; at 5 ms, each time the event loop has it, a small
# model's step waits: a chat's second turn on the instruction-tuned GPT's shape took 10 ms at 5 ms, 7 ms at 1 ms
SWITCH_INTERVAL = 0.001


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
    ``max_batch``; none for a model with sliding layers, ``KVPool.reuses_prefixes``) for prefix reuse, each of
    ``context`` positions (default: the model's window, cut so that the cache takes at most a quarter of the
    computer's memory); a sliding layer's ring of W positions a row, whatever the context."""
    from scratchformer.generation.pool import KVPool

    probe = model.new_cache(1, 1)
    holds = KVPool.holds(probe)
    kept = 0 if not holds or not KVPool.reuses_prefixes(probe) else max_batch if kept is None else kept
    per, ring = (KVPool.bytes_per_position(probe), KVPool.bytes_per_row(probe)) if holds else (0, 0)
    rows, window = max_batch + kept, model.config.max_len
    if context is None:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        context = window if not per else max(2, min(window, (memory // 4 - ring * rows) // (per * rows)))
    context = min(context, window)
    return context, kept, (per * context + ring) * rows


def timed_protocol(timeout: float, most: int = MAX_CONNECTIONS) -> type:
    """uvicorn's HTTP protocol, which also closes a connection whose request head has not arrived whole within
    ``timeout`` seconds of the connection's opening or its last answer (ten half-sent heads would otherwise hold ten
    connections for ever); once a head is whole, the body's time is the app's (``guard.read_json``). A request that
    comes while more than ``most`` connections are open is a 503 in OpenAI's form, its connection closed (uvicorn's
    own limit answers in plain text)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Timed(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        head_timer: asyncio.TimerHandle | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.app = within(self.app, self.server_state, most)

        def connection_made(self, transport: Any, *args: Any) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # each write sent at once: asyncio sets TCP_NODELAY only on a socket made with the protocol named
                # (``socket.create_server``'s is not), and with Nagle's algorithm a kept connection's next answer
                # waited for the client's delayed acknowledgement of its head: 40 ms added to every request after
                # a connection's first (an OpenAI client keeps its connections)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport, *args)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self.head_timer is not None:
                self.head_timer.cancel()
            self.head_timer = self.loop.call_later(timeout, self._late)

        def _late(self) -> None:
            cycle = getattr(self, "cycle", None)
            if (cycle is None or cycle.response_complete) and not self.transport.is_closing():
                self.transport.close()  # no head within the time: nothing to answer

    return Timed


def within(app: Any, state: Any, most: int) -> Any:
    """``app``, answering instead a 503 in OpenAI's form (``overloaded``, the connection closed) while more than
    ``most`` connections, or requests, are open in uvicorn's ``state``."""

    async def limited(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and max(len(state.connections), len(state.tasks)) > most:
            from scratchformer.app.serve.api_errors import ApiError
            from scratchformer.app.serve.guard import error_response

            refusal = ApiError(503, f"the server is busy: more than {most} connections are open; try again shortly",
                               kind="server_error", code="overloaded")
            await error_response(refusal, {"connection": "close"})(scope, receive, send)
            return
        await app(scope, receive, send)

    return limited


def make_server(app: Any, verbose: bool = False, read_timeout: float = 30, grace: float = GRACE_SECONDS) -> Any:
    """A uvicorn server for ``app`` with the limits above, which at SIGTERM lets the answers in progress run for
    ``grace`` seconds and then ends them itself (``app.stop_answers``): uvicorn would cancel their tasks before the
    app's end, cutting a stream mid-body and answering a waiting request with a plain-text 500."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            loop = asyncio.get_running_loop()
            late = loop.call_later(grace, lambda: loop.run_in_executor(None, app.stop_answers))
            try:
                await super().shutdown(sockets)
            finally:
                late.cancel()

    return Server(uvicorn.Config(app, log_level="info" if verbose else "warning", access_log=verbose, lifespan="on",
                                 timeout_graceful_shutdown=math.ceil(grace) + 3, http=timed_protocol(read_timeout),
                                 timeout_keep_alive=KEEP_ALIVE))


def serve(ckpt: str | Path, host: str = "127.0.0.1", port: int = 8000, *, api_key: str | None = None,
          name: str | None = None, max_batch: int = 16, max_body: int = 1 << 20, verbose: bool = False,
          context: int | None = None, prefix_cache: int | None = None, read_timeout: float = 30,
          grace: float = GRACE_SECONDS) -> None:
    """Serve ``ckpt`` until SIGTERM or Ctrl-C (see ``server.py`` for the endpoints)."""
    require("starlette", "serve")
    require("uvicorn", "serve")

    from scratchformer.app.serve.model import load_served
    from scratchformer.app.serve.server import make_app

    model = load_served(ckpt, name)
    model.context, kept, reserved = cache_plan(model.ckpt.model, max_batch, context, prefix_cache)
    sock = bind(host, port)
    loopback = is_loopback(sock)
    app = make_app(model, api_key=api_key, max_batch=max_batch, max_body=max_body, loopback=loopback, kept=kept,
                   read_timeout=read_timeout)
    server = make_server(app, verbose, read_timeout, grace)
    talk = (f"chat in its {model.template.name} template and completions" if model.template is not None
            else "completions only (it has no chat template)")
    print(f"serving {model.name}: {talk}, {model.max_len} tokens of context, up to {max_batch} answers at once")
    cfg = model.ckpt.model.config
    reuse = (f"no prefix reuse (its sliding layers keep a ring of their last {cfg.sliding_window} positions)"
             if cfg.sliding_layers else f"{kept} kept for prefix reuse")
    print(f"cache reserved at start: {max_batch} rows and {reuse}, {model.max_len:,} positions each: "
          f"{reserved / 2**20:,.0f} MiB (--context, --max-batch, --prefix-cache)")
    if not loopback:
        print(f"listening on {host}, reachable from other machines: "
              + ("every /v1 request needs the API key" if api_key else "anyone who reaches it can use the model "
                 "(--api-key KEY to require a key)"))
    url = url_of(sock)
    print(f"OpenAI API at {url}/v1, the chat page at {url}/ (Ctrl-C or SIGTERM to stop)", flush=True)
    # a signal before uvicorn's own handlers are in place stops it once started (it would be lost otherwise); after
    # them, uvicorn handles it and raises it again here when it is done
    previous = {sig: signal.signal(sig, lambda number, frame: setattr(server, "should_exit", True))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        server.run(sockets=[sock])
    finally:
        sys.setswitchinterval(switch)
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
          max_body=args.max_body, verbose=args.verbose, context=args.context, prefix_cache=args.prefix_cache,
          read_timeout=args.read_timeout, grace=args.grace)
    return 0
