"""The decoding engine (``generation/engine.py``, ``requests.py``, ``scheduler.py``, ``pool.py``, ``stops.py``) and the
server's pieces that need no server: each answer gets the tokens ``generate`` gives it alone, whoever joins or leaves
the batch around it; prompts admitted together are read in one pass, and ``n`` answers to one prompt read it once; a
cancelled request frees its rows at the next step; a stop text is found as the tokens come, equal to the whole text cut
at it; OpenAI's request fields are checked and refused as ``api.py`` says; nothing outside ``models/`` computes logits
from hidden states."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from conftest import tiny
from scratchformer import GPT
from scratchformer.generation import generate
from scratchformer.generation.engine import Engine
from scratchformer.generation.pool import KVPool
from scratchformer.generation.requests import Request, Sampling, Stop, choice_seed
from scratchformer.generation.stops import TextStop, cut_at_stop

SHAPES = {"gpt-2": {}, "llama": dict(positional="rotary", n_kv_heads=2, norm_type="rmsnorm", activation="swiglu",
                                    bias=False), "linear": dict(attention="linear", positional="rotary")}
SRC = Path(__file__).resolve().parents[1] / "src" / "scratchformer"


def _model(shape: str) -> GPT:
    torch.manual_seed(0)
    return GPT(tiny("gpt", vocab_size=50, max_len=64, **SHAPES[shape])).eval()


def _alone(model: GPT, request: Request, index: int = 0) -> list[int]:
    """``generate``'s tokens for one answer of ``request`` alone (answer ``index``'s seed)."""
    s, stop = request.sampling, min(request.stop.ids, default=None)
    seed = None if s.seed is None else choice_seed(s.seed, index)
    out = generate(model, torch.tensor([request.prompt]), request.max_new_tokens, do_sample=not s.greedy,
                   temperature=s.temperature if not s.greedy else 1.0, top_k=s.top_k, top_p=s.top_p, seed=seed,
                   eos_id=stop)[0, len(request.prompt):].tolist()
    return out[:out.index(stop)] if stop is not None and stop in out else out


@pytest.mark.parametrize("shape", SHAPES)
def test_each_answer_gets_the_tokens_generate_gives_it_alone(shape):
    """Six prompts of different lengths arrive one a step into three rows, greedy and sampled (each with its own
    seed), ending at different lengths: each gets exactly ``generate``'s tokens for it alone."""
    model = _model(shape)
    g = torch.Generator().manual_seed(1)
    requests = [Request(torch.randint(0, 50, (n,), generator=g).tolist(), new, sampling)
                for n, new, sampling in [(3, 20, Sampling()), (7, 10, Sampling(0.9, 0.9, None, 5)),
                                         (1, 30, Sampling()), (12, 5, Sampling(1.2, None, 10, 3)),
                                         (5, 40, Sampling()), (9, 25, Sampling())]]
    engine = Engine(model, max_rows=3)
    widths = []
    for request in requests:
        engine.add(request)
        engine.step()
        widths.append(len(engine.live))
    while engine.busy:
        engine.step()
    assert max(widths) == 3  # the rows were shared: at most three at once, the others waited
    for request in requests:
        choice = request.choices[0]
        assert choice.tokens == _alone(model, request) and choice.finish_reason == "length"
    assert engine.counts() == {"running": 0, "waiting": 0, "peak_running": 3,
                               "tokens_generated": sum(r.max_new_tokens for r in requests)}


def test_prompts_admitted_together_are_read_in_one_pass_within_the_token_budget():
    """Five waiting prompts (4 + 6 + 3 + 8 + 2 tokens) and a budget of 14 prompt tokens a step: the first step reads
    the first three in one pass (13 tokens), the next the last two; every answer is still ``generate``'s."""
    model = _model("llama")
    passes = []
    hook = model.decoder.register_forward_hook(lambda m, args, out: passes.append(tuple(args[0].shape[:2])))
    requests = [Request(list(range(1, n + 1)), 6) for n in (4, 6, 3, 8, 2)]
    engine = Engine(model, max_rows=8, prefill_tokens=14)
    for request in requests:
        engine.add(request)
    engine.step()
    engine.step()
    hook.remove()
    assert passes[0] == (3, 6) and passes[2] == (2, 8)  # (rows, longest prompt): one pass each
    while engine.busy:
        engine.step()
    assert all(r.choices[0].tokens == _alone(model, r) for r in requests)


def test_n_answers_read_their_prompt_once_and_each_draws_from_its_own_seed():
    """``n=4`` greedy answers equal the one answer; ``n=8`` sampled answers with a seed differ from each other, each
    is ``generate``'s with the seed of its index (the first: the seed itself), and the whole is the same again; the
    prompt is read once (one prefill pass of one row), its cache row copied for the others."""
    model = _model("gpt-2")
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    one = Engine(model).run([Request(prompt, 12)])[0].choices[0].tokens
    greedy = Engine(model).run([Request(prompt, 12, n=4)])[0]
    assert [c.tokens for c in greedy.choices] == [one] * 4
    rows = []
    hook = model.decoder.register_forward_hook(lambda m, args, out: rows.append(args[0].shape[0]))
    sampled = Engine(model, max_rows=8).run([Request(prompt, 12, Sampling(1.0, seed=1), n=8)])[0]
    hook.remove()
    assert rows[0] == 1 and rows[1] == 8  # the prompt read by one row, then eight rows decoded
    answers = [c.tokens for c in sampled.choices]
    assert len({tuple(a) for a in answers}) > 1
    assert all(a == _alone(model, sampled, i) for i, a in enumerate(answers))
    again = Engine(model, max_rows=8).run([Request(prompt, 12, Sampling(1.0, seed=1), n=8)])[0]
    assert [c.tokens for c in again.choices] == answers
    assert len({choice_seed(1, i) for i in range(8)}) == 8 and choice_seed(7, 0) == 7


def test_a_stop_token_ends_an_answer_and_its_row_goes_to_the_next():
    model = _model("gpt-2")
    probe = Engine(model, max_rows=1).run([Request([4, 5, 6], 30)])[0].choices[0]
    stop = probe.tokens[3]  # a token it writes: stopping there leaves the three before it
    first, second = Request([4, 5, 6], 30, stop=Stop(frozenset({stop}))), Request([7, 8], 6)
    engine = Engine(model, max_rows=1)
    for request in (first, second):
        engine.add(request)
    steps = 0
    while engine.busy:
        engine.step()
        steps += 1
    assert first.choices[0].tokens == probe.tokens[:probe.tokens.index(stop)]
    assert first.choices[0].finish_reason == "stop" and second.choices[0].tokens == _alone(model, second)
    assert steps <= len(first.choices[0].tokens) + 1 + len(second.choices[0].tokens)  # the second waited for a row


def test_a_cancelled_request_frees_its_rows_at_the_next_step_and_the_others_go_on():
    model = _model("llama")
    requests = [Request([1 + i, 2, 3], 40) for i in range(4)]
    waiting = Request([9, 9], 12)
    engine = Engine(model, max_rows=4)
    for request in [*requests, waiting]:
        engine.add(request)
    engine.step()
    engine.step()
    assert len(engine.live) == 4 and len(engine.scheduler) == 1
    engine.cancel(requests[1])
    engine.step()  # the cancelled row is freed first, then the waiting request is admitted into it
    assert requests[1].choices[0].finish_reason == "cancelled" and any(r is waiting for r, _ in engine.live)
    assert len(requests[1].choices[0].tokens) == 3  # two steps: the prefill's token and one decoded, then nothing more
    while engine.busy:
        engine.step()
    for request in [requests[0], requests[2], requests[3], waiting]:
        assert request.choices[0].tokens == _alone(model, request)
    gone = engine.add(Request([1, 2], 5))
    engine.cancel(gone)  # cancelled before it ever ran: never admitted
    engine.step()
    assert gone.choices[0].finish_reason == "cancelled" and not gone.choices[0].tokens and not engine.busy


def test_the_pool_masks_each_row_to_its_own_length_keeps_rows_packed_and_forks_a_row():
    model = _model("gpt-2")
    pool = KVPool(model.new_cache(1, 1), capacity=4, max_len=64)
    for n in (2, 5, 3):
        prefilled = model.new_cache(1, n)
        model.hidden_states(torch.arange(1, n + 1)[None], cache=prefilled)
        pool.add(prefilled, 0, n)
    positions, mask = pool.step_inputs()
    assert positions[:, 0].tolist() == [2, 5, 3] and mask.tolist() == [
        [True] * 3 + [False] * 3, [True] * 6, [True] * 4 + [False] * 2]
    row2 = pool.layers[0].keys[2, :, :3].clone()
    assert pool.fork(1) == 3 and pool.lengths == [2, 5, 3, 5]
    torch.testing.assert_close(pool.layers[0].keys[3, :, :5], pool.layers[0].keys[1, :, :5], rtol=0, atol=0)
    pool.remove(3)
    assert pool.remove(0) == 2 and pool.lengths == [3, 5]  # the last row moved into the freed one
    torch.testing.assert_close(pool.layers[0].keys[0, :, :3], row2, rtol=0, atol=0)
    pool.remove(1)
    assert pool.step_inputs()[1] is None  # one length: the model's unmasked path, as generate's
    with pytest.raises(ValueError, match="do not fit"):
        Engine(model).add(Request([1] * 60, 10))
    with pytest.raises(ValueError, match="1 to 2 answers"):
        Engine(model, max_rows=2).add(Request([1], 5, n=3))


def test_a_prompt_that_begins_with_a_kept_answer_reads_only_the_rest_and_writes_the_same():
    """A chat's next turn: the first turn's prompt and answer, then more. With kept rows (``kept``), its first tokens
    come from the first answer's cache (``cached_tokens``) and only the rest is read; the greedy answer is the same
    as an engine without kept rows gives it, and the same as ``generate``'s."""
    model = _model("llama")
    first = Request([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], 12)
    engine = Engine(model, max_rows=2, context=64, kept=2)
    engine.run([first])
    follow = [*first.prompt, *first.choices[0].tokens, 7, 7, 8]
    second = Request(follow, 10)
    read = []
    hook = model.decoder.register_forward_hook(lambda m, args, out: read.append(args[0].shape[1]))
    engine.run([second])
    hook.remove()
    assert second.cached_tokens == len(first.prompt) + len(first.choices[0].tokens) - 1  # its row's cache reached
    assert read[0] == len(follow) - second.cached_tokens  # only the rest of the prompt was read
    fresh = Engine(model, max_rows=2).run([Request(follow, 10)])[0]
    assert second.choices[0].tokens == fresh.choices[0].tokens == _alone(model, second)
    unrelated = Engine(model, max_rows=2, context=64, kept=2)
    unrelated.run([first, Request([9] * 12, 4)])
    assert unrelated.run([Request([9] * 3 + [1] * 9, 4)])[0].cached_tokens == 0  # 3 shared tokens: read again


def test_memory_decided_at_start_and_a_failed_admission_ends_its_request_alone(monkeypatch):
    """A pool of a fixed width is reserved whole at start and never grows; a request that could never fit is refused;
    an allocation that fails while one request is admitted ends that request with an error, and every other one,
    live or admitted beside it, completes as it would have, and later prompts are served."""
    model = _model("gpt-2")
    engine = Engine(model, max_rows=3, context=40, kept=1)
    reserved = engine.pool.nbytes
    assert reserved == 4 * 40 * KVPool.bytes_per_position(model.new_cache(1, 1))  # 3 rows and 1 kept, 40 each
    with pytest.raises(ValueError, match="do not fit the model's 40 positions"):
        engine.add(Request([1] * 30, 20))
    real = KVPool.add

    def failing(self, prefilled, index, length):
        if length == 7:  # the request with a prompt of 7 tokens
            raise MemoryError("no room")
        return real(self, prefilled, index, length)

    monkeypatch.setattr(KVPool, "add", failing)
    live = engine.add(Request([5, 6, 7], 20))
    engine.step()
    bad, beside = engine.add(Request([1] * 7, 5, n=2)), engine.add(Request([2, 3], 6))
    while engine.busy:
        engine.step()
    assert [c.finish_reason for c in bad.choices] == ["error", "error"] and "MemoryError: no room" in bad.error
    for request in (live, beside):
        assert request.choices[0].finish_reason == "length" and request.choices[0].tokens == _alone(model, request)
    monkeypatch.setattr(KVPool, "add", real)
    later = engine.run([Request([4] * 30, 9)])[0]  # a long prompt after the failure
    assert later.choices[0].tokens == _alone(model, later) and engine.pool.nbytes == reserved


# ------------------------------------------------------------------------------------ stop texts, as tokens come


class Pieces:
    """A tokenizer whose token i is ``pieces[i]`` (decode joins them), or bytes (decode as UTF-8)."""

    def __init__(self, pieces: list[str] | None = None) -> None:
        self.pieces, self.vocab_size = pieces, len(pieces) if pieces else 256

    def decode(self, ids) -> str:
        if self.pieces is None:
            return bytes(ids).decode("utf-8", errors="replace")
        return "".join(self.pieces[i] for i in ids)


def test_a_stop_text_is_found_as_the_tokens_come_and_half_a_character_waits():
    pieces = ["He", "llo wo", "rld. ", "STO", "P! more"]
    stop = TextStop(Pieces(pieces), ("STOP", "xyz"))
    shown = []
    for i in range(5):
        stop.add(i)
        shown.append(stop.shown)
    assert shown == ["He", "Hello wo", "Hello world. ", "Hello world. ", "Hello world. "] and stop.stopped
    assert stop.text == stop.final() == "Hello world. "  # "STO" was held back: it may start "STOP"
    utf8 = TextStop(Pieces(), ())
    euro = list("€".encode())
    for token in [65, *euro[:2]]:
        utf8.add(token)
    assert utf8.shown == "A"  # half a character is not shown
    utf8.add(euro[2])
    assert utf8.shown == "A€"
    assert utf8.add(999) == "" and utf8.ids[-1] == euro[2]  # past the vocabulary: no text, dropped here


def test_incremental_stop_texts_equal_the_whole_text_cut_at_them():
    """Random byte tokens with stop texts that span tokens: the incremental text at every step equals the whole
    text decoded again and cut (``cut_at_stop``), and it stops at the same token."""
    g = torch.Generator().manual_seed(0)
    tok = Pieces(["a", "b", "ab", "ba", " ", "\n", "##", "#"])
    stops = ("a #", "##\n", "bb")
    for _ in range(200):
        ids = torch.randint(0, 8, (30,), generator=g).tolist()
        stop = TextStop(tok, stops)
        for k, i in enumerate(ids, 1):
            stop.add(i)
            whole = tok.decode(ids[:k])
            assert stop.text == cut_at_stop(whole, stops)
            if stop.stopped:
                assert any(s in whole for s in stops) and not any(s in tok.decode(ids[:k - 1]) for s in stops)
                break


def test_no_line_outside_models_computes_logits_from_hidden_states():
    """The model owns its logits (``GPT.output_logits``): a softcap or a head bias added to it reaches every caller."""
    pattern = re.compile(r"F\.linear\([^\n]*output_weight\(\)|@ out_t\b|output_matrix\(")
    found = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py") if p.parts[len(SRC.parts)] != "models"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert found == []


# ------------------------------------------------------------------------------------ the engine's callers


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    transformers = pytest.importorskip("transformers", reason="the hf extra writes the Llama folder")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      bos_token_id=1, eos_token_id=2)
    model = transformers.LlamaForCausalLM(config).eval()
    folder = tmp_path_factory.mktemp("llama") / "llama"
    model.save_pretrained(folder)
    return folder, model


def test_the_engine_generate_and_transformers_decode_a_llama_folder_alike(llama_folder):
    """Greedy tokens of prompts of three lengths, through the engine (two rows, so prompts wait), the tensor-level
    ``generate`` and ``transformers``' ``generate``, each until the end-of-text id (one prompt's first): token for
    token."""
    from scratchformer import load_model

    folder, theirs = llama_folder
    ours = load_model(str(folder))
    prompts = [[1, 5, 9, 13, 17], [1, 40, 41], [1, 7, 7, 7, 8, 9, 10, 11], [1, 2, 3]]
    engine = Engine(ours, max_rows=2).run([Request(p, 24, stop=Stop(frozenset({2}))) for p in prompts])
    assert sum(len(r.choices[0].tokens) for r in engine) > 24  # not all ended at once
    for prompt, request in zip(prompts, engine):
        tensor = generate(ours, torch.tensor([prompt]), 24, eos_id=2)[0, len(prompt):].tolist()
        with torch.no_grad():
            hf = theirs.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                                 pad_token_id=0)[0, len(prompt):].tolist()
        assert request.choices[0].tokens + [2] * (request.choices[0].finish_reason == "stop") == tensor == hf


# ------------------------------------------------------------------------------- the server's pieces, no server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    pytest.importorskip("starlette", reason="the serve extra")
    from scratchformer.app.serve.model import load_served
    from scratchformer.checkpoints import save_checkpoint
    from scratchformer.settings.config import TrainConfig
    from scratchformer.tokenizers import CharTokenizer

    tok = CharTokenizer(list("abcdefghij ."))
    model = GPT(tiny("gpt", vocab_size=tok.vocab_size, max_len=40)).eval()
    root = tmp_path_factory.mktemp("served")
    save_checkpoint(root / "lm", model, tok, model.config, TrainConfig(task="lm").__dict__, step=1)
    save_checkpoint(root / "chat", model, tok, model.config, TrainConfig(task="instruct").__dict__, step=1,
                    extra={"template": {"name": "chat", "source": "{% for m in messages %}{{ m['content'] }}."
                                        "{% endfor %}", "origin": "test"}})
    return {"lm": load_served(root / "lm"), "chat": load_served(root / "chat")}


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({"messages": []}, 400, "non-empty list"),
    ({"messages": [{"role": "robot", "content": "x"}]}, 400, "is not one of system, user, assistant, tool"),
    ({"messages": [{"role": "user", "content": 3}]}, 400, "must be text"),
    ({"messages": [{"role": "user", "content": "abc"}], "n": 9}, 400, "between 1 and 8"),
    ({"messages": [{"role": "user", "content": "abc"}], "n": True}, 400, "an integer"),
    ({"messages": [{"role": "user", "content": "abc"}], "temperature": 3}, 400, "between 0 and 2"),
    ({"messages": [{"role": "user", "content": "abc"}], "max_tokens": True}, 400, "an integer"),
    ({"messages": [{"role": "user", "content": "abc"}], "stop": ["a"] * 5}, 400, "at most 4"),
    ({"messages": [{"role": "user", "content": "abc"}], "presence_penalty": 1}, 400, "not supported"),
    ({"messages": [{"role": "user", "content": "abc"}], "max_new_tokens": 5}, 400, "unrecognized request argument"),
    ({"messages": [{"role": "user", "content": "abc"}], "stream_options": {"include_usage": True}}, 400, "stream=true"),
    ({"messages": [{"role": "user", "content": "xyz"}]}, 400, "vocabulary has no"),
    ({"messages": [{"role": "user", "content": "a" * 60}]}, 400, "reads at most 40 tokens"),
    ([1, 2], 400, "JSON object"),
])
def test_a_bad_chat_request_is_refused_naming_its_field(served, body, status, needle):
    from scratchformer.app.serve.api import parse_chat
    from scratchformer.app.serve.api_errors import ApiError

    with pytest.raises(ApiError) as refused:
        parse_chat(body, served["chat"])
    assert refused.value.status == status and needle in refused.value.message
    assert set(refused.value.body()["error"]) == {"message", "type", "param", "code"}


def test_a_request_is_read_into_the_prompt_the_budget_and_the_sampling(served):
    from scratchformer.app.serve.api import parse_chat, parse_completion
    from scratchformer.app.serve.api_errors import ApiError

    ask = parse_chat({"model": "any", "messages": [{"role": "developer", "content": "ab"}, {"role": "user", "content": [
        {"type": "text", "text": "c"}, {"type": "text", "text": "d"}]}], "max_tokens": 100, "temperature": 0,
        "stop": "j", "seed": -1, "user": "me"}, served["chat"])
    assert served["chat"].decode(ask.ids) == "ab.cd."  # the model's template, the text parts joined
    assert ask.max_tokens == 40 - 6 and "capped to 34" in ask.warning  # the window holds prompt and answer
    assert ask.sampling.greedy and ask.stop == ("j",) and ask.sampling.seed == (1 << 63) - 1
    with pytest.raises(ApiError, match="has no chat template") as refused:
        parse_chat({"messages": [{"role": "user", "content": "ab"}]}, served["lm"])
    assert refused.value.status == 400 and refused.value.code == "model_not_chat"
    ask = parse_completion({"prompt": ["abc"], "echo": True}, served["lm"])
    assert ask.ids == served["lm"].ckpt.tokenizer.encode("abc") and ask.max_tokens == 16 and ask.echo == "abc"
    assert parse_completion({"prompt": ask.ids}, served["lm"]).ids == ask.ids  # token ids as OpenAI takes them
    with pytest.raises(ApiError, match="one request per prompt"):
        parse_completion({"prompt": ["ab", "cd"]}, served["lm"])


def test_the_address_is_said_to_be_this_computer_s_only_on_loopback_and_a_bad_one_is_one_line():
    from scratchformer.app.serve.run import bind, is_loopback, url_of
    from scratchformer.errors import ConfigError

    sock = bind("127.0.0.1", 0)
    try:
        assert is_loopback(sock) and url_of(sock).startswith("http://127.0.0.1:")
    finally:
        sock.close()
    with pytest.raises(ConfigError, match="cannot listen on 256.0.0.1:80"):
        bind("256.0.0.1", 80)


def test_every_connection_sends_its_writes_at_once_nagle_off():
    """TCP_NODELAY on each connection the server accepts: asyncio sets it only on a socket made with its protocol
    named, which ``bind``'s is not, and with Nagle's algorithm on, a kept connection's next answer (its head and body
    two writes) waited for the client's delayed acknowledgement: 40 ms more for every request after the first."""
    import asyncio
    import socket

    uvicorn = pytest.importorskip("uvicorn", reason="the server needs the serve extra")
    from scratchformer.app.serve.run import bind, timed_protocol

    async def app(scope, receive, send):  # never called: no request is sent
        raise AssertionError(scope)

    seen: list[int] = []

    class Seen(timed_protocol(30)):
        def connection_made(self, transport, *args):
            super().connection_made(transport, *args)
            seen.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    async def connect_once():
        config = uvicorn.Config(app, lifespan="off", log_level="error")
        config.load()
        state = uvicorn.server.ServerState()
        sock = bind("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(
            lambda: Seen(config=config, server_state=state, app_state={}), sock=sock)
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(connect_once())
    assert len(seen) == 1 and seen[0] != 0


def test_past_its_connections_the_server_answers_a_503_in_openai_s_form():
    """More connections open than the limit: a request is a 503 in OpenAI's form (``overloaded``) and its connection
    is closed (uvicorn's own limit answered in plain text); once the others close, requests are answered again."""
    import http.client
    import json
    import threading
    import time

    uvicorn = pytest.importorskip("uvicorn", reason="the server needs the serve extra")
    from scratchformer.app.serve.run import bind, timed_protocol

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})

    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="error", http=timed_protocol(30, most=2)))
    sock = bind("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    address = sock.getsockname()[:2]

    def get(conn: http.client.HTTPConnection) -> tuple[int, str | None, bytes]:
        conn.request("GET", "/")
        response = conn.getresponse()
        return response.status, response.getheader("connection"), response.read()

    try:
        for _ in range(250):
            if server.started:
                break
            time.sleep(0.02)
        kept = [http.client.HTTPConnection(*address, timeout=10) for _ in range(3)]
        assert get(kept[0])[0] == get(kept[1])[0] == 200  # two connections open, kept
        status, connection, body = get(kept[2])
        error = json.loads(body)["error"]
        assert status == 503 and connection == "close" and error["code"] == "overloaded", (status, body)
        assert error["type"] == "server_error" and "more than 2 connections" in error["message"]
        for conn in kept:
            conn.close()
        for _ in range(100):  # the server sees the two close
            fresh = http.client.HTTPConnection(*address, timeout=10)
            status = get(fresh)[0]
            fresh.close()
            if status == 200:
                break
            time.sleep(0.05)
        assert status == 200
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_failed_admission_in_the_server_is_a_500_or_an_error_event_and_the_others_are_answered(served,
                                                                                                   monkeypatch):
    """Through HTTP, in a server in this process: an allocation that fails while a request is admitted (injected)
    ends that request alone, a 500 in OpenAI's form (streamed: an error event, then ``[DONE]``); a stream decoding
    beside it and a request admitted with it are answered whole, and a long prompt is served after."""
    import http.client
    import json
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from scratchformer.app.serve.run import bind, make_server
    from scratchformer.app.serve.server import make_app

    real = KVPool.add

    def failing(self, prefilled, index, length):
        if length == 7:  # the prompt "jjjjjjj"
            raise MemoryError("no room")
        return real(self, prefilled, index, length)

    monkeypatch.setattr(KVPool, "add", failing)
    sock = bind("127.0.0.1", 0)
    server = make_server(make_app(served["lm"], max_batch=4, kept=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def post(body: dict) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(*sock.getsockname()[:2], timeout=60)
        conn.request("POST", "/v1/completions", json.dumps({"temperature": 0, **body}),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        got = (response.status, response.read())
        conn.close()
        return got

    try:
        for _ in range(200):
            if server.started:
                break
            threading.Event().wait(0.02)
        with ThreadPoolExecutor(4) as pool:
            asked = [{"prompt": "abc", "max_tokens": 30, "stream": True}, {"prompt": "jjjjjjj", "max_tokens": 5},
                     {"prompt": "jjjjjjj", "max_tokens": 5, "stream": True}, {"prompt": "ab", "max_tokens": 6}]
            (stream, stream_body), (failed, failed_body), (cut, cut_body), (beside, beside_body) = pool.map(post, asked)
        assert stream == 200 and stream_body.count(b'"finish_reason":"length"') == 1, stream_body[-300:]
        error = json.loads(failed_body)["error"]
        assert failed == 500 and error["type"] == "server_error" and set(error) == {"message", "type", "param", "code"}
        assert cut == 200 and b'"type":"server_error"' in cut_body and cut_body.endswith(b"data: [DONE]\n\n")
        assert beside == 200 and json.loads(beside_body)["choices"][0]["finish_reason"] == "length"
        monkeypatch.setattr(KVPool, "add", real)
        later, later_body = post({"prompt": "abcdefghij " * 3, "max_tokens": 5})
        assert later == 200 and json.loads(later_body)["usage"]["prompt_tokens"] == 33
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_a_token_past_the_tokenizer_s_vocabulary_has_no_text(served):
    """A model's table is often padded past its tokenizer (Qwen3's 151,936 rows for 151,669 tokens): a random or
    unlucky model may pick such a row, which the server writes as nothing instead of failing the request."""
    model = served["lm"]
    ids = model.ckpt.tokenizer.encode("abc")
    assert model.decode([*ids, model.ckpt.tokenizer.vocab_size + 3]) == "abc"


# ------------------------------------------------------------------------------------ n answers through the server


@pytest.fixture(scope="module")
def server(serve_runs, tmp_path_factory):
    pytest.importorskip("openai", reason="the server is tested with the official openai client (the dev extra)")
    from test_serve import Server

    started = Server(serve_runs["instruct"], tmp_path_factory.mktemp("engine-serve") / "log")
    yield started
    code, _ = started.stop()
    assert code == 0


def test_the_server_answers_n_times_one_prompt_read_once(server):
    """``n=4`` at temperature 0: four choices, each the ``n=1`` answer; ``n=8`` at temperature 1 with a seed: eight
    choices, not all alike, the same again for the same seed; a streamed chat with ``n=2``: chunks of both indices,
    each answer streamed whole."""
    client = server.client()
    one = client.completions.create(model="m", prompt="Add 1 and 2.", max_tokens=12, temperature=0)
    four = client.completions.create(model="m", prompt="Add 1 and 2.", max_tokens=12, temperature=0, n=4)
    assert [c.index for c in four.choices] == [0, 1, 2, 3]
    assert [c.text for c in four.choices] == [one.choices[0].text] * 4
    assert four.usage.completion_tokens == 4 * one.usage.completion_tokens
    eight = client.completions.create(model="m", prompt="Add 1 and 2.", max_tokens=12, temperature=1, seed=1, n=8)
    texts = [c.text for c in eight.choices]
    assert len(texts) == 8 and len(set(texts)) > 1
    again = client.completions.create(model="m", prompt="Add 1 and 2.", max_tokens=12, temperature=1, seed=1, n=8)
    assert [c.text for c in again.choices] == texts
    whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Add 4 and 3."}],
                                           max_tokens=12, temperature=1, seed=5, n=2)
    streamed = {0: "", 1: ""}
    finished = set()
    for event in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Add 4 and 3."}],
                                                max_tokens=12, temperature=1, seed=5, n=2, stream=True):
        for choice in event.choices:
            streamed[choice.index] += choice.delta.content or ""
            if choice.finish_reason:
                finished.add(choice.index)
    assert finished == {0, 1} and [streamed[0], streamed[1]] == [c.message.content for c in whole.choices]


def test_a_chat_s_second_turn_reads_the_first_from_memory_and_answers_as_a_fresh_server(server, serve_runs,
                                                                                       tmp_path):
    """The second turn of a chat (the first turn's answer in it) gives the same greedy answer as the same messages
    sent to a fresh server without kept answers, with ``usage.prompt_tokens_details.cached_tokens`` above 0."""
    from test_serve import Server

    client = server.client()
    turn = [{"role": "user", "content": "Add 4 and 3."}]
    first = client.chat.completions.create(model="m", messages=turn, max_tokens=20, temperature=0)
    messages = [*turn, {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "Add 1 and 2."}]
    second = client.chat.completions.create(model="m", messages=messages, max_tokens=20, temperature=0)
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    fresh = Server(serve_runs["instruct"], tmp_path / "fresh.log", "--prefix-cache", "0")
    try:
        again = fresh.client().chat.completions.create(model="m", messages=messages, max_tokens=20, temperature=0)
    finally:
        assert fresh.stop()[0] == 0
    assert again.choices[0].message.content == second.choices[0].message.content
    assert again.usage.prompt_tokens_details.cached_tokens == 0
