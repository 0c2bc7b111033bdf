"""Continuous batching (``generation/continuous.py``, ``generation/slots.py``) and the server's pieces that need no
server: each sequence gets the tokens ``generate`` gives it alone, whoever joins or leaves the batch around it; a
cancelled one frees its row at the next step; OpenAI's request fields are checked and refused as ``api.py`` says;
a stream's text is cut at a stop text and never sends half a character."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny
from scratchformer import GPT
from scratchformer.generation import generate
from scratchformer.generation.continuous import ContinuousBatcher, Sampling, Sequence
from scratchformer.generation.slots import SlotCache

SHAPES = {"gpt-2": {}, "llama": dict(positional="rotary", n_kv_heads=2, norm_type="rmsnorm", activation="swiglu",
                                    bias=False), "linear": dict(attention="linear", positional="rotary")}


def _model(shape: str) -> GPT:
    torch.manual_seed(0)
    return GPT(tiny("gpt", vocab_size=50, max_len=64, **SHAPES[shape])).eval()


def _alone(model: GPT, seq: Sequence) -> list[int]:
    s = seq.sampling
    out = generate(model, torch.tensor([seq.prompt]), seq.max_new_tokens, do_sample=not s.greedy,
                   temperature=s.temperature if not s.greedy else 1.0, top_k=s.top_k, top_p=s.top_p, seed=s.seed,
                   eos_id=min(seq.stop_ids, default=None))[0, len(seq.prompt):].tolist()
    return out[:out.index(min(seq.stop_ids))] if seq.stop_ids and min(seq.stop_ids) in out else out


@pytest.mark.parametrize("shape", SHAPES)
def test_each_sequence_gets_the_tokens_generate_gives_it_alone(shape):
    """Six prompts of different lengths arrive one a step into three rows, greedy and sampled (each with its own
    seed), ending at different lengths: each gets exactly ``generate``'s tokens for it alone."""
    model = _model(shape)
    g = torch.Generator().manual_seed(1)
    seqs = [Sequence(torch.randint(0, 50, (n,), generator=g).tolist(), new, sampling)
            for n, new, sampling in [(3, 20, Sampling()), (7, 10, Sampling(0.9, 0.9, None, 5)), (1, 30, Sampling()),
                                     (12, 5, Sampling(1.2, None, 10, 3)), (5, 40, Sampling()), (9, 25, Sampling())]]
    batcher = ContinuousBatcher(model, max_batch=3)
    widths = []
    for seq in seqs:
        batcher.submit(seq)
        batcher.step()
        widths.append(len(batcher.live))
    while batcher.busy:
        batcher.step()
    assert max(widths) == 3  # the rows were shared: at most three at once, the others waited
    for seq in seqs:
        assert seq.tokens == _alone(model, seq) and seq.finish_reason == "length"
    assert batcher.counts() == {"running": 0, "waiting": 0, "tokens_generated": sum(s.max_new_tokens for s in seqs),
                                "peak_running": 3}


def test_a_stop_token_ends_a_sequence_and_its_row_goes_to_the_next():
    model = _model("gpt-2")
    probe = Sequence([4, 5, 6], 30)
    batcher = ContinuousBatcher(model, max_batch=1)
    batcher.submit(probe)
    while batcher.busy:
        batcher.step()
    stop = probe.tokens[3]  # a token it writes: stopping there leaves the three before it
    first, second = Sequence([4, 5, 6], 30, stop_ids=frozenset({stop})), Sequence([7, 8], 6)
    for seq in (first, second):
        batcher.submit(seq)
    steps = 0
    while batcher.busy:
        batcher.step()
        steps += 1
    assert first.tokens == probe.tokens[:probe.tokens.index(stop)] and first.finish_reason == "stop"
    assert second.tokens == _alone(model, second)
    assert steps <= len(first.tokens) + 1 + len(second.tokens)  # the second waited for the first row only


def test_a_cancelled_sequence_frees_its_row_at_the_next_step_and_the_others_go_on():
    model = _model("llama")
    seqs = [Sequence([1 + i, 2, 3], 40) for i in range(4)]
    waiting = Sequence([9, 9], 12)
    batcher = ContinuousBatcher(model, max_batch=4)
    for seq in [*seqs, waiting]:
        batcher.submit(seq)
    batcher.step()
    batcher.step()
    assert len(batcher.live) == 4 and list(batcher.waiting) == [waiting]
    batcher.cancel(seqs[1])
    batcher.step()  # the cancelled row is freed first, then the waiting sequence is admitted into it
    assert seqs[1].finish_reason == "cancelled" and seqs[1] not in batcher.live and waiting in batcher.live
    assert len(seqs[1].tokens) == 3  # two steps: the prefill's token and one decoded, then nothing more
    while batcher.busy:
        batcher.step()
    for seq in [seqs[0], seqs[2], seqs[3], waiting]:
        assert seq.tokens == _alone(model, seq)
    gone = Sequence([1, 2], 5)
    batcher.submit(gone)
    batcher.cancel(gone)  # cancelled before it ever ran: never admitted
    batcher.step()
    assert gone.finish_reason == "cancelled" and not gone.tokens and not batcher.busy


def test_the_slot_cache_masks_each_row_to_its_own_length_and_keeps_rows_packed():
    model = _model("gpt-2")
    slots = SlotCache(model.new_cache(1, 1), capacity=3, max_len=64)
    for n in (2, 5, 3):
        prefilled = model.new_cache(1, n)
        model.hidden_states(torch.arange(1, n + 1)[None], cache=prefilled)
        slots.add(prefilled, n)
    positions, mask = slots.step_inputs()
    assert positions[:, 0].tolist() == [2, 5, 3] and mask.tolist() == [
        [True] * 3 + [False] * 3, [True] * 6, [True] * 4 + [False] * 2]
    row2 = slots.layers[0].keys[2, :, :3].clone()
    assert slots.remove(0) == 2 and slots.lengths == [3, 5]  # the last row moved into the freed one
    torch.testing.assert_close(slots.layers[0].keys[0, :, :3], row2, rtol=0, atol=0)
    slots.remove(1)
    assert slots.step_inputs()[1] is None  # one length: the model's unmasked path, as generate's
    with pytest.raises(ValueError, match="do not fit"):
        ContinuousBatcher(model).submit(Sequence([1] * 60, 10))


# ------------------------------------------------------------------------- the server's pieces, no server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    pytest.importorskip("starlette", reason="the serve extra")
    from scratchformer.app.serve.model import load_served
    from scratchformer.checkpoint import save_checkpoint
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
    ({"messages": [{"role": "tool", "content": "x"}]}, 400, "role of system, user or assistant"),
    ({"messages": [{"role": "user", "content": 3}]}, 400, "must be text"),
    ({"messages": [{"role": "user", "content": "abc"}], "n": 2}, 400, "only n=1"),
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
    from scratchformer.app.serve.api import ApiError, parse_chat

    with pytest.raises(ApiError) as refused:
        parse_chat(body, served["chat"])
    assert refused.value.status == status and needle in refused.value.message
    assert set(refused.value.body()["error"]) == {"message", "type", "param", "code"}


def test_a_request_is_read_into_the_prompt_the_budget_and_the_sampling(served):
    from scratchformer.app.serve.api import ApiError, parse_chat, parse_completion

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


def test_a_stream_s_text_stops_before_a_stop_text_and_waits_for_whole_characters():
    from scratchformer.app.serve.worker import TextStream

    pieces = ["He", "llo wo", "rld. ", "STO", "P! more"]
    stream = TextStream(lambda ids: "".join(pieces[i] for i in ids), ("STOP", "xyz"))
    sent = [stream.feed(list(range(k)), final=False) for k in range(1, 6)]
    assert sent == ["He", "llo wo", "rld. ", "", ""] and stream.stopped  # "STO" held back: it may start "STOP"
    utf8 = TextStream(lambda ids: bytes(ids).decode("utf-8", errors="replace"), ())
    euro = list("€".encode())
    assert utf8.feed([65, *euro[:2]], final=False) == "A"  # half a character is not sent
    assert utf8.feed([65, *euro], final=False) == "€"


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


def test_a_token_past_the_tokenizer_s_vocabulary_has_no_text(served):
    """A model's table is often padded past its tokenizer (Qwen3's 151,936 rows for 151,669 tokens): a random or
    unlucky model may pick such a row, which the server writes as nothing instead of failing the request."""
    model = served["lm"]
    ids = model.ckpt.tokenizer.encode("abc")
    assert model.decode([*ids, model.ckpt.tokenizer.vocab_size + 3]) == "abc"
