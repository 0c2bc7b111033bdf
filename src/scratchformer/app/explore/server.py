"""The attention explorer's web server: the standard library's ``ThreadingHTTPServer``, no framework.

    GET  /              the page (static/index.html), which loads /explore.css, /figures.js, /lens.js and
                        /explore.js
    GET  /api/model     the model's family, sizes, option defaults and input caps (JSON)
    POST /api/explore   {"text": "...", options...} -> tokens, attention maps, outputs (JSON; model_view.explore)
    POST /api/export    the same, and "view": {"kind", "layer", "head"} to open on -> the page as one HTML file
                        with those numbers inside (standalone.py; what ``explore --export page.html`` writes)

It serves the files of its own package by a fixed table (``STATIC``) and the one checkpoint it was started with;
nothing in a request is ever used as a path. A bad request gets a 4xx with a one-line JSON message
(``{"error": "..."}``), an unexpected failure a 500 whose traceback goes to the server's console only.
Bound to 127.0.0.1 by default, and then it answers only requests addressed to a loopback name, so a web
page elsewhere cannot reach it by rebinding a domain name to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from scratchformer.app.explore.export import choose_view
from scratchformer.app.explore.model_view import (
    DEFAULT_LIMITS,
    Limits,
    RequestError,
    checkpoint_name,
    explore,
    load_explorable,
    model_info,
    parse_request,
)
from scratchformer.app.explore.standalone import standalone_page
from scratchformer.checkpoints import Checkpoint
from scratchformer.errors import ConfigError, DataError

# URL path -> (file in this package's static/ folder, content type). The whole of what is served from disk.
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/explore.css": ("explore.css", "text/css; charset=utf-8"),
    "/figures.js": ("figures.js", "text/javascript; charset=utf-8"),
    "/lens.js": ("lens.js", "text/javascript; charset=utf-8"),
    "/explore.js": ("explore.js", "text/javascript; charset=utf-8"),
}
MAX_BODY = 64 * 1024  # bytes of one request body; the text itself is capped far below this
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
SECURITY_HEADERS = {
    # only this server's own script and style; no inline script, no other origin, no framing
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _static_file(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


class ExploreServer(ThreadingHTTPServer):
    """An HTTP server holding one loaded checkpoint. Requests run in threads; the model one at a time (the
    cores go to one request, and the model's mode is switched to eval around each run)."""

    # Request threads are joined when the server closes (a daemon thread cut off at interpreter exit can abort
    # the process); close() first ends the connections still open, so a browser's idle one does not delay it.
    daemon_threads = False
    block_on_close = True

    def __init__(self, ckpt: Checkpoint, address: tuple[str, int] = ("127.0.0.1", 0), *,
                 limits: Limits = DEFAULT_LIMITS, name: str | None = None, quiet: bool = True) -> None:
        self.ckpt, self.limits, self.quiet = ckpt, limits, quiet
        self.connections: set[socket.socket] = set()
        self.model_lock = threading.Lock()
        self.info = model_info(ckpt, limits, name)
        self.files = {path: (_static_file(file), ctype) for path, (file, ctype) in STATIC.items()}
        super().__init__(address, ExploreHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.connections.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        for connection in list(self.connections):  # wake the threads waiting on a kept-alive connection
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        super().server_close()  # joins the request threads

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}/"

    @property
    def loopback_only(self) -> bool:
        return self.server_address[0] in LOOPBACK_NAMES


class ExploreHandler(BaseHTTPRequestHandler):
    server: ExploreServer
    server_version = "scratchformer-explore"
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds a client may take to send its request: a stalled one does not hold a thread

    def version_string(self) -> str:
        return self.server_version  # not the Python version

    # ------------------------------------------------------------------------------ responses

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, data: Any, extra: dict[str, str] | None = None) -> None:
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", extra)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Every error as one short JSON line (the base class writes an HTML page)."""
        self.close_connection = True
        self._send_json(code, {"error": message or HTTPStatus(code).phrase}, {"Connection": "close"})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if not self.server.quiet:
            super().log_message(format, *args)

    # ------------------------------------------------------------------------------- routing

    def _host_allowed(self) -> bool:
        """On loopback, only requests for a loopback name (a DNS-rebinding page sends its own)."""
        if not self.server.loopback_only:
            return True
        host = urlsplit("//" + self.headers.get("Host", "")).hostname or ""
        return host in LOOPBACK_NAMES

    def _route(self) -> str | None:
        if not self._host_allowed():
            self.send_error(HTTPStatus.FORBIDDEN, "this server answers only requests for 127.0.0.1 or localhost")
            return None
        return urlsplit(self.path).path

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        path = self._route()
        if path is None:
            return
        if path in self.server.files:
            body, ctype = self.server.files[path]
            self._send(HTTPStatus.OK, body, ctype)
        elif path == "/api/model":
            self._send_json(HTTPStatus.OK, self.server.info)
        elif path == "/api/explore":
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "use POST with a JSON body such as {\"text\": \"...\"}")
        else:
            self.send_error(HTTPStatus.NOT_FOUND, f"no page {path[:80]!r}; the explorer is at /")

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        path = self._route()
        if path is None:
            return
        if path not in ("/api/explore", "/api/export"):
            self.send_error(HTTPStatus.NOT_FOUND if path not in self.server.files and path != "/api/model"
                            else HTTPStatus.METHOD_NOT_ALLOWED, f"cannot POST to {path[:80]!r}")
            return
        payload = self._read_json()
        if payload is None:
            return
        try:
            if path == "/api/export":
                page = self._export_page(payload)
            else:
                text, options = parse_request(payload, self.server.ckpt, self.server.limits)
                with self.server.model_lock:
                    result = explore(self.server.ckpt, text, self.server.limits, **options)
        except (RequestError, DataError, ConfigError) as err:
            self.send_error(HTTPStatus.BAD_REQUEST, str(err))
            return
        except Exception:  # noqa: BLE001 - the client gets a line, the console the traceback
            traceback.print_exc(file=sys.stderr)
            self.send_error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error; the server's console has the details")
            return
        if path == "/api/export":
            self._send(HTTPStatus.OK, page, "text/html; charset=utf-8",
                       {"Content-Disposition": 'attachment; filename="attention-view.html"'})
        else:
            self._send_json(HTTPStatus.OK, result)

    def _export_page(self, payload: Any) -> bytes:
        """The page as one file for a request's input, opening on its ``view``."""
        view = payload.pop("view", None) if isinstance(payload, dict) else None
        view = {} if view is None else view
        if not isinstance(view, dict) or not set(view) <= {"kind", "layer", "head"} or not all(
                isinstance(view.get(k, 0), int) and not isinstance(view.get(k), bool) for k in ("layer", "head")):
            raise RequestError("'view' must be an object such as {\"kind\": \"decoder.self_attn\", \"layer\": 0, "
                               "\"head\": 0}")
        text, options = parse_request(payload, self.server.ckpt, self.server.limits)
        with self.server.model_lock:
            result = explore(self.server.ckpt, text, self.server.limits, **options)
        _, initial = choose_view(result["attention"], view.get("kind"), view.get("layer"), view.get("head"),
                                 need_kind=False)
        return standalone_page(self.server.info, [result], initial).encode("utf-8")

    def _read_json(self) -> Any | None:
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") or length is None:
            self.send_error(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
            return None
        try:
            n = int(length)
            if n < 0:
                raise ValueError
        except ValueError:
            self.send_error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
            return None
        if n > MAX_BODY:
            self.send_error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the request body is {n} bytes; at most {MAX_BODY}")
            return None
        raw = self.rfile.read(n)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            self.send_error(HTTPStatus.BAD_REQUEST, f"the body is not JSON: {str(err).splitlines()[0][:120]}")
            return None

    def _unsupported(self) -> None:
        self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not supported; use GET or POST")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _unsupported


def make_server(ckpt_path: str, host: str = "127.0.0.1", port: int = 8000, *, limits: Limits = DEFAULT_LIMITS,
                quiet: bool = True) -> ExploreServer:
    """Load the checkpoint and bind the server (not yet serving). ``CheckpointError`` for a bad checkpoint,
    ``ConfigError`` for an address that cannot be bound."""
    ckpt = load_explorable(ckpt_path)
    try:
        return ExploreServer(ckpt, (host, port), limits=limits, name=checkpoint_name(ckpt_path), quiet=quiet)
    except OSError as err:
        reason = err.strerror or str(err)
        raise ConfigError(f"cannot listen on {host}:{port}: {reason.lower()} "
                          "(choose another --port or --host)") from None


def serve(ckpt_path: str, host: str = "127.0.0.1", port: int = 8000, *, limits: Limits = DEFAULT_LIMITS,
          quiet: bool = True) -> None:
    """Serve until Ctrl-C, then close the socket and return."""
    server = make_server(ckpt_path, host, port, limits=limits, quiet=quiet)
    info = server.info
    print(f"exploring {info['name']}: {info['family_name']}, step {info['step']}")
    print(f"open {server.url} in a browser (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()


__all__ = ["STATIC", "ExploreServer", "make_server", "serve"]
