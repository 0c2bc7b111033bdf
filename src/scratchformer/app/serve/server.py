"""The OpenAI-compatible server: a Starlette (ASGI) app under uvicorn.

    POST /v1/chat/completions   messages in the model's template -> an answer (or a stream of server-sent events)
    POST /v1/completions        a text to continue -> its continuation
    GET  /v1/models             the one model served (GET /v1/models/ID: it alone)
    GET  /health                {"status": "ok"} and the batch's counts: running, waiting, tokens generated
    GET  /                      the chat page (static/: index.html, chat.css, chat.js; nothing from another host)

Requests are decoded together by one decoding engine (``generation/engine.py``) in its own thread (``worker.py``). A
client that goes away (a closed connection, a stopped stream) cancels its answers at once: the next step frees their
rows. What is safe by default (``guard.py``): a loopback address, and then only requests addressed to a loopback name;
no request from another site's page; with an API key, every ``/v1`` request must bring it; a JSON body of at most
``max_body`` bytes, read within ``guard.READ_TIMEOUT`` seconds; a prompt within the model's window; nothing in a
request is a path, and the pages served are a fixed table of the package's own files. Every refusal is a 4xx with
OpenAI's error JSON; an unexpected failure is a 500 in the same form, its traceback on the console only. At SIGTERM
(``run.py``) the answers in progress have a few seconds to end; then each stream ends with an error event and each
request still waiting is a 503, in OpenAI's form.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scratchformer.app.serve.api import Ask, answer, chunk, parse_chat, parse_completion, usage_chunk
from scratchformer.app.serve.api_errors import ApiError
from scratchformer.app.serve.guard import READ_TIMEOUT, ClientGone, Guard, error_response, read_json
from scratchformer.app.serve.model import ServedModel
from scratchformer.app.serve.structured import logprobs_of, tool_calls
from scratchformer.app.serve.worker import Job, Snapshot, Worker
from scratchformer.generation.engine import Engine
from scratchformer.generation.requests import Request as Asked
from scratchformer.generation.requests import Stop

STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/chat.css": ("chat.css", "text/css; charset=utf-8"),
          "/chat.js": ("chat.js", "text/javascript; charset=utf-8")}


async def until_disconnect(receive: Receive) -> None:
    """Return when the client goes away (the body has been read: what comes next is the disconnect)."""
    message = await receive()
    while message["type"] != "http.disconnect":
        message = await receive()


class Answering:
    """One request's answers, as an ASGI response: a JSON body when they end, or a stream of server-sent events while
    they decode; either way they are cancelled the moment the client goes away."""

    def __init__(self, model: ServedModel, worker: Worker, ask: Ask) -> None:
        self.model, self.ask, self.worker = model, ask, worker
        prefix = "chatcmpl" if ask.kind == "chat" else "cmpl"
        self.head = {"id": f"{prefix}-{uuid.uuid4().hex}", "created": int(time.time()), "model": model.name}
        self.request = Asked(ask.ids, ask.max_tokens, ask.sampling, Stop(model.stop_ids, ask.stop), ask.n,
                             grammar=ask.structure.grammar, logprobs=ask.structure.logprobs)
        self.started = False  # whether the response's head has been sent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.ensure_future(until_disconnect(receive))
        job = Job(self.request, self.worker)
        job.start()
        try:
            if self.ask.stream:
                await self._stream(job, gone, send)
            else:
                await self._whole(job, gone, scope, send)
        except OSError:  # the client went away while we wrote: nothing more to send (finally frees its rows)
            return
        except Exception:  # noqa: BLE001 - a bug: the client gets OpenAI's error form, the console the traceback
            traceback.print_exc(file=sys.stderr)
            failed = ApiError(500, "internal error; the server's console has the details", kind="server_error")
            with contextlib.suppress(Exception):
                if self.started:
                    await send({"type": "http.response.body", "body": f"data: {json.dumps(failed.body())}\n\n"
                                "data: [DONE]\n\n".encode(), "more_body": False})
                else:
                    await error_response(failed)(scope, _no_receive, send)
        finally:
            job.cancel()  # at once, whatever ended the answers: their rows are free at the next step
            gone.cancel()

    async def _whole(self, job: Job, gone: asyncio.Future, scope: Scope, send: Send) -> None:
        last: Snapshot = []
        async for snapshot in job.updates(gone):
            last = snapshot
        finishes = [finish for _, finish, _ in last]
        if not last or None in finishes:  # the client left
            return
        bad = next((f for f in finishes if f not in ("stop", "length")), None)
        if bad is None:
            texts = [text for text, _, _ in last]
            logprobs = [self._logprobs(i, len(c.tokens)) for i, c in enumerate(self.request.choices)]
            response: Response = JSONResponse(answer(self.ask, self.head, texts, finishes,  # type: ignore[arg-type]
                                                     sum(n for _, _, n in last), self.request.cached_tokens,
                                                     logprobs))
        else:
            response = error_response(_failed(bad))
        await response(scope, _no_receive, send)

    def _logprobs(self, i: int, end: int, start: int = 0) -> dict[str, Any] | None:
        """Answer i's log-probabilities of its tokens ``start`` to ``end`` in OpenAI's form (None: not asked)."""
        if self.ask.structure.logprobs is None:
            return None
        return logprobs_of(self.request.choices[i].logprobs[start:end], self.ask.kind, self.model.decode,
                           len(self.ask.echo))

    async def _stream(self, job: Job, gone: asyncio.Future, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"), (b"x-accel-buffering", b"no")]})
        self.started = True

        async def event(data: Any) -> None:
            text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            await send({"type": "http.response.body", "body": f"data: {text}\n\n".encode(), "more_body": True})

        for i in range(self.ask.n):
            await event(chunk(self.ask, self.head, first=True, index=i))
        sent, ended, n_new = [""] * self.ask.n, [False] * self.ask.n, 0
        counted = [0] * self.ask.n  # the tokens whose log-probabilities were sent
        held = self.ask.structure.calls  # with tools, the text is held to its end: a call is sent whole
        async for snapshot in job.updates(gone):
            n_new = sum(n for _, _, n in snapshot)
            for i, (text, finish, n) in enumerate(snapshot):
                if ended[i]:
                    continue
                if finish in (None, "stop", "length"):
                    if held and finish is None:
                        continue
                    content, calls = tool_calls(text, self.ask.structure) if held else (text, [])
                    content = content or ""
                    new = content[len(sent[i]):] if content.startswith(sent[i]) else ""
                    sent[i] = content if content.startswith(sent[i]) else sent[i]
                    if new or calls:
                        await event(chunk(self.ask, self.head, new, index=i, calls=calls,
                                          logprobs=self._logprobs(i, n, counted[i])))
                        counted[i] = n
                    if finish is not None:
                        await event(chunk(self.ask, self.head, finish="tool_calls" if calls else finish, index=i))
                        ended[i] = True
                else:
                    await event(_failed(finish).body())
                    ended = [True] * self.ask.n
                    break
        if gone.done():
            return
        if self.ask.include_usage:
            await event(usage_chunk(self.ask, self.head, n_new, self.request.cached_tokens))
        await event("[DONE]")
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _failed(finish: str) -> ApiError:
    return ApiError(503 if finish == "cancelled" else 500, "the server stopped before the answer was complete"
                    if finish == "cancelled" else "decoding failed; the server's console has the details",
                    kind="server_error")


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such endpoint, a method not allowed, an exception) in OpenAI's form."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    words = {404: f"no endpoint {request.url.path[:80]!r}; see /v1/models, /v1/chat/completions, "
                  "/v1/completions", 405: f"{request.method} is not allowed on {request.url.path[:80]!r}"}
    message = words.get(status, "internal error; the server's console has the details")
    return error_response(ApiError(status, message, kind="invalid_request_error" if status < 500 else "server_error"))


# bytes: a body this short is read in the loop (about a millisecond: less than a thread's hand-off and its wait for
# the interpreter); a longer one's prompt is counted in a thread
PARSED_AT_ONCE = 4096


def _completions(model: ServedModel, worker: Worker, max_batch: int, max_body: int, read_timeout: float) -> Any:
    """The endpoint of both completions: the body read and checked (a long prompt's tokens counted in a thread: the
    loop answers others meanwhile), then its answers."""

    async def complete(request: Request) -> Response | Answering:
        try:
            body = await read_json(request, max_body, read_timeout)
            parse = parse_chat if request.url.path.endswith("chat/completions") else parse_completion
            declared = request.headers.get("content-length", "")
            if declared.isdigit() and int(declared) <= PARSED_AT_ONCE:  # a thread's hand-off costs more
                ask = parse(body, model)
            else:  # a long prompt's tokens, counted in a thread: the loop goes on meanwhile
                ask = await asyncio.to_thread(parse, body, model)
            if ask.n > max_batch:
                raise ApiError(400, f"n={ask.n}: this server decodes at most {max_batch} answers at once (--max-batch)",
                               "n")
            if worker.stopping:
                raise ApiError(503, "the server is stopping", kind="server_error", code="stopping")
            if worker.full:
                raise ApiError(503, "the server is busy: too many requests are waiting; try again shortly",
                               kind="server_error", code="overloaded")
        except ApiError as err:  # a body cut by the time limit leaves the connection unreadable: it is closed
            return error_response(err, {"connection": "close"} if err.status == 408 else None)
        except ClientGone:
            return Response(status_code=400)  # to no one: uvicorn drops what is sent to a closed connection
        return Answering(model, worker, ask)

    return complete


def make_app(model: ServedModel, *, api_key: str | None = None, max_batch: int = 16, max_waiting: int = 256,
             max_body: int = 1 << 20, loopback: bool = True, kept: int = 0, read_timeout: float = READ_TIMEOUT
             ) -> ASGIApp:
    """The server's ASGI app for ``model``: its routes, its decoding thread (started and stopped with the app's
    lifespan), and the ``Guard`` around them. The engine's cache is reserved now: ``max_batch`` rows of
    ``model.max_len`` positions, and ``kept`` more for prefix reuse."""
    engine = Engine(model.ckpt.model, model.ckpt.tokenizer, max_rows=max_batch, context=model.max_len, kept=kept,
                    vocabulary=model.vocabulary)  # the model's, made at the first grammar
    worker = Worker(engine, max_waiting)
    files = {path: (resources.files(__package__).joinpath("static", name).read_bytes(), kind)
             for path, (name, kind) in STATIC.items()}

    complete = _completions(model, worker, max_batch, max_body, read_timeout)

    async def models(request: Request) -> Response:
        wanted = request.path_params.get("name")
        if wanted is not None and wanted != model.name:
            return error_response(ApiError(404, f"no model {wanted!r}; this server serves {model.name!r}", "model",
                                           "model_not_found"))
        card = model.card()
        return JSONResponse(card if wanted else {"object": "list", "data": [card]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", **worker.engine.counts()})

    async def page(request: Request) -> Response:
        body, kind = files[request.url.path]
        return Response(body, media_type=kind)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            worker.stop()

    routes = [Route("/v1/chat/completions", complete, methods=["POST"]),
              Route("/v1/completions", complete, methods=["POST"]), Route("/v1/models", models, methods=["GET"]),
              Route("/v1/models/{name:path}", models, methods=["GET"]), Route("/health", health, methods=["GET"]),
              *[Route(path, page, methods=["GET"]) for path in files]]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error,
                                                                          Exception: http_error})
    app.state.worker = worker
    guarded = Guard(app, api_key=api_key, loopback=loopback)
    guarded.stop_answers = worker.stop  # type: ignore[attr-defined] # run.py ends the answers before uvicorn cuts them
    return guarded
