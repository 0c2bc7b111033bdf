"""What stands between the network and the API: the checks every request passes before it is read, and the body read
within limits of size, depth and time.

    the host        on a loopback address, only requests addressed to a loopback name (a web page elsewhere cannot
                    reach the server by rebinding a domain name to 127.0.0.1); a Host that is no address: a 400
    the origin      a request a browser sends from a page of another site (its ``Origin`` is not this server): refused;
                    without it, any page could make the server generate by a form or a ``text/plain`` POST, which a
                    browser sends with no preflight. The chat page, served from here, has this server's origin
    the API key     with one, every ``/v1`` request must bring it (``Authorization: Bearer KEY``, compared in constant
                    time)
    the body        a POST must say ``Content-Type: application/json`` (what a form or a ``text/plain`` POST cannot);
                    at most ``max_body`` bytes, all of them within ``READ_TIMEOUT`` seconds; JSON nested at most as
                    deep as Python's parser reads, and text that is text (no lone surrogate such as ``\\ud800``)

Every refusal is a 4xx in OpenAI's error form; a client that leaves during its upload gets nothing.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scratchformer.app.serve.api_errors import ApiError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
READ_TIMEOUT = 30  # seconds: a request's head, and then its body, must arrive within it, or the connection is closed
HEADERS = [(b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; "
            b"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
           (b"cache-control", b"no-store")]


class ClientGone(Exception):
    """The client closed its connection before its body was whole: there is no one to answer."""


def error_response(err: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=headers)


class Guard:
    """ASGI middleware: the host, origin, API key and content-type checks, and the security headers."""

    def __init__(self, app: ASGIApp, *, api_key: str | None, loopback: bool) -> None:
        self.app, self.api_key, self.loopback = app, api_key, loopback

    def _refusal(self, scope: Scope) -> ApiError | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            host = urlsplit("//" + headers.get("host", "")).hostname or ""
        except ValueError:  # "[": not a host at all
            return ApiError(400, "the Host header is not a host name or address", code="bad_host")
        if self.loopback and host not in LOOPBACK:
            return ApiError(403, "this server answers only requests for 127.0.0.1 or localhost", code="forbidden_host")
        origin = headers.get("origin")
        if origin is not None and origin.partition("://")[2].lower() != headers.get("host", "").lower():
            return ApiError(403, f"requests from the page of another site ({origin[:80]}) are refused; call the API "
                            "from a program, or use the chat page this server serves", code="forbidden_origin")
        if self.api_key and scope["path"].startswith("/v1"):
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
                return ApiError(401, "a valid API key is needed: send the header 'Authorization: Bearer KEY'",
                                code="invalid_api_key")
        kind = headers.get("content-type", "").partition(";")[0].strip().lower()
        if scope["method"] == "POST" and kind != "application/json":
            return ApiError(415, f"the body must be JSON, sent with 'Content-Type: application/json' (not "
                            f"{kind[:60] or 'none'!r})", code="unsupported_media_type")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await error_response(refusal)(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


async def read_json(request: Request, limit: int, timeout: float = READ_TIMEOUT) -> Any:
    """The body as JSON, at most ``limit`` bytes, whole within ``timeout`` seconds (``ApiError`` otherwise;
    ``ClientGone`` if the client leaves first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the request body is {declared} bytes; this server takes at most {limit}")
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for part in request.stream():
                body += part
                if len(body) > limit:
                    raise ApiError(413, f"the request body is over {limit} bytes, the most this server takes")
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout:g} seconds", code="timeout") from None
    except ClientDisconnect:
        raise ClientGone from None
    try:
        value = json.loads(body.decode("utf-8"))
    except RecursionError:
        raise ApiError(400, "the body is not JSON this server reads: it is nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ApiError(400, f"the body is not JSON: {str(err).splitlines()[0][:120]}") from None
    try:  # a lone surrogate ("\ud800") is valid JSON and no text: no tokenizer can read it
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as err:
        raise ApiError(400, f"the body holds a lone surrogate ({err.object[err.start:err.end]!a}), which is not "
                       "text") from None
    except RecursionError:
        raise ApiError(400, "the body is not JSON this server reads: it is nested too deeply") from None
    return value
