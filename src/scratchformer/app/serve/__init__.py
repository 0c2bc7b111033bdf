"""``scratchformer serve``: a model behind OpenAI's HTTP API (``/v1/chat/completions``, ``/v1/completions``,
``/v1/models``) and a chat page, with many clients decoded together (continuous batching).

    model.py    the model served: what it can do, and a request's messages or text as prompt ids
    api.py      OpenAI's request fields, checked; its answers, stream chunks and errors
    worker.py   the decoding thread, a request's tokens in the event loop, text cut at stop texts
    server.py   the ASGI app (Starlette): routes, the API key, limits, streams
    run.py      the command: bind the address, run uvicorn, stop cleanly on SIGTERM or Ctrl-C
    static/     the chat page

It needs the ``serve`` extra (Starlette, uvicorn, jinja2): ``pip install -e ".[serve]"``.
"""
