"""``scratchformer serve`` as a user runs it: started on a free port of 127.0.0.1, talked to with the official
``openai`` client (``max_retries=0``). Its greedy answers are ``generate``'s, streamed or not, alone or eight at once;
a model without a chat template refuses chat and still completes; a malformed request is a 4xx with OpenAI's error
JSON and the server goes on; an API key is enforced; the chat page answers in Chromium. The fault tests (clients
dropping mid-stream, memory, SIGTERM) are in ``test_serve_faults.py``."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scratchformer.app.cli import main

openai = pytest.importorskip("openai", reason="the official client is a dev dependency")
pytest.importorskip("starlette", reason="the serve extra")

QUESTIONS = ["Add 1 and 2.", "Add 4 and 3.", "Spell the word backwards."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``scratchformer serve --ckpt CKPT --host 127.0.0.1 --port N`` in a process of its own, as a user starts it."""

    def __init__(self, ckpt: Path, log: Path, *extra: str) -> None:
        self.port = free_port()
        self.log = log
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        # a process: a server listening on a port while the test is its client, stopped by SIGTERM (its exit code)
        self.proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", "--ckpt", str(ckpt), "--host",
                                      "127.0.0.1", "--port", str(self.port), *extra], stdout=subprocess.PIPE,
                                     stderr=log.open("w"), text=True, env=env)
        self.lines = []
        while not self.lines or not self.lines[-1].startswith("OpenAI API at"):
            line = self.proc.stdout.readline()
            assert line, f"the server ended before it listened: {self.lines} {log.read_text()[-2000:]}"
            self.lines.append(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def client(self, key: str = "none") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=120)

    def request(self, method: str, path: str, body: bytes | str | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {**({"Content-Type": "application/json"} if body is not None else {}), **(headers or {})}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        status, data = response.status, response.read()
        conn.close()
        return status, json.loads(data) if data.startswith(b"{") else {"raw": data}

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and what it printed after its first lines."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        return self.proc.returncode, out


@pytest.fixture(scope="module")
def runs(serve_runs) -> dict[str, Path]:
    """The instruction-tuned run (Alpaca's template), the Llama folder with a chat template and the plain GPT run
    (words, never its end-of-text token) that the servers serve: conftest's ``serve_runs``, made once per test run."""
    return serve_runs


@pytest.fixture(scope="module")
def servers(runs, tmp_path_factory):
    logs = tmp_path_factory.mktemp("serve-logs")
    started = {name: Server(path, logs / f"{name}.log") for name, path in runs.items()}
    yield started
    for server in started.values():
        code, out = server.stop()
        assert code == 0 and "stopped" in out, (code, out, server.log.read_text()[-2000:])
        assert "Traceback" not in server.log.read_text()


def cli(capsys, *argv: str) -> str:
    """What ``scratchformer ARGV`` prints on standard output, stripped."""
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out.strip()


def chat(client, question: str, stream: bool, **kw) -> tuple[str, str, dict | None]:
    """(text, finish reason, usage) of a chat completion of one user message at temperature 0, max 24 tokens."""
    args = dict(model="any", messages=[{"role": "user", "content": question}], temperature=0, max_tokens=24, **kw)
    if not stream:
        done = client.chat.completions.create(**args)
        return done.choices[0].message.content, done.choices[0].finish_reason, done.usage.model_dump()
    parts, finish, usage = [], None, None
    for event in client.chat.completions.create(**args, stream=True, stream_options={"include_usage": True}):
        if event.usage is not None:
            usage = event.usage.model_dump()
        for choice in event.choices:
            parts.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    return "".join(parts), finish, usage


def complete(client, prompt: str, stream: bool, max_tokens: int = 24) -> str:
    args = dict(model="any", prompt=prompt, temperature=0, max_tokens=max_tokens)
    if not stream:
        return client.completions.create(**args).choices[0].text
    return "".join(c.choices[0].text for c in client.completions.create(**args, stream=True) if c.choices)


@pytest.mark.parametrize("name", ["instruct", "llama"])
def test_a_chat_is_generate_s_greedy_answer_streamed_or_not(servers, runs, name, capsys):
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.tasks.inference import chat_prompt_ids

    ckpt = load_checkpoint(runs[name])
    client = servers[name].client()
    answers = []
    for question in QUESTIONS:
        expected = cli(capsys, "generate", "--ckpt", str(runs[name]), "--instruction", question, "--greedy",
                       "--max-new-tokens", "24")
        whole, finish, usage = chat(client, question, stream=False)
        streamed, finish_streamed, usage_streamed = chat(client, question, stream=True)
        assert whole.strip() == expected == streamed.strip(), (question, whole, streamed, expected)
        answers.append(expected)
        assert finish == finish_streamed and finish in ("stop", "length")
        reused = usage_streamed.pop("prompt_tokens_details")["cached_tokens"]
        assert usage.pop("prompt_tokens_details") is not None and usage == usage_streamed
        assert reused == usage["prompt_tokens"] - 1  # asked again: all but its last token read from the kept row
        prompt = chat_prompt_ids(ckpt, [{"role": "user", "content": question}])
        assert usage["prompt_tokens"] == len(prompt) and usage["completion_tokens"] <= 24
        assert (finish == "length") == (usage["completion_tokens"] == 24)
    assert any(answers)  # answers, not only empty texts


@pytest.mark.parametrize("name", ["instruct", "llama", "lm"])
def test_a_completion_is_generate_s_greedy_continuation_streamed_or_not(servers, runs, name, capsys):
    for prompt in ("Add 2 and", "the quick brown"):
        if name != "llama" and "q" in prompt:
            continue  # the character models' vocabulary has no q
        printed = cli(capsys, "generate", "--ckpt", str(runs[name]), "--prompt", prompt, "--greedy",
                      "--max-new-tokens", "24")
        assert printed.startswith(prompt.strip())
        client = servers[name].client()
        whole, streamed = complete(client, prompt, False), complete(client, prompt, True)
        assert (prompt + whole).strip() == printed == (prompt + streamed).strip(), (prompt, whole, streamed, printed)
        assert whole.strip() or name == "instruct"  # words (an instruction model may end a bare text at once)


def test_eight_at_once_each_get_what_one_alone_gets_and_are_decoded_together(servers):
    client = servers["llama"].client()
    prompts = ["the quick brown", "fox jumps", "over the lazy dog", "and then", "some more words", "the", "lazy fox",
               "quick"]
    alone = [complete(client, p, False, 40) for p in prompts]
    same = complete(client, prompts[0], False, 40)
    peak_before = servers["llama"].request("GET", "/health")[1]["peak_running"]
    with ThreadPoolExecutor(16) as pool:
        mixed = list(pool.map(lambda i: complete(client, prompts[i % 8], i % 2 == 1, 40), range(8)))
        eight = list(pool.map(lambda i: complete(client, prompts[0], i % 2 == 1, 40), range(8)))
    assert mixed == alone and eight == [same] * 8
    health = servers["llama"].request("GET", "/health")[1]
    assert health["peak_running"] > max(1, peak_before) and health["running"] == health["waiting"] == 0
    chats = list(ThreadPoolExecutor(8).map(lambda i: chat(client, QUESTIONS[0], i % 2 == 0)[0], range(8)))
    assert chats == [chat(client, QUESTIONS[0], False)[0]] * 8


def test_a_model_without_a_template_refuses_chat_and_completes(servers):
    client = servers["lm"].client()
    with pytest.raises(openai.BadRequestError) as refused:
        chat(client, "Add 1 and 2.", stream=False)
    assert refused.value.status_code == 400 and refused.value.code == "model_not_chat"
    assert "has no chat template" in refused.value.body["message"]
    card = client.models.list().data[0]
    assert card.id == "lm" and card.model_extra["chat"] is False and card.model_extra["context_window"] == 256
    assert servers["instruct"].client().models.retrieve("instruct").model_extra["template"] == "alpaca"
    assert complete(client, "Add 2 and", False)  # completions still served


@pytest.mark.parametrize(("method", "path", "body", "headers", "status", "needle"), [
    ("POST", "/v1/chat/completions", '{"messages": [', {}, 400, "not JSON"),
    ("POST", "/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "n": 9}', {}, 400,
     "between 1 and 8"),
    ("POST", "/v1/completions", '"Add"', {}, 400, "JSON object"),
    ("POST", "/v1/completions", json.dumps({"prompt": "A" * 2_000_000}), {}, 413, "at most"),
    ("POST", "/v1/completions", json.dumps({"prompt": "Add " * 200}), {}, 400, "reads at most 256 tokens"),
    ("GET", "/v1/chat/completions", None, {}, 405, "not allowed"),
    ("GET", "/v1/models/other", None, {}, 404, "no model"),
    ("GET", "/etc/passwd", None, {}, 404, "no endpoint"),
    ("GET", "/../../etc/passwd", None, {}, 404, "no endpoint"),
    ("GET", "/v1/models", None, {"Host": "attacker.example"}, 403, "only requests for 127.0.0.1"),
])
def test_a_malformed_request_is_a_4xx_in_openai_s_form_and_the_server_goes_on(servers, method, path, body, headers,
                                                                             status, needle):
    got, data = servers["instruct"].request(method, path, body, headers)
    assert got == status and needle in data["error"]["message"], (got, data)
    assert set(data["error"]) == {"message", "type", "param", "code"}
    assert complete(servers["instruct"].client(), "Add 2 and", False) is not None  # still serving


def raw(port: int, data: bytes) -> bytes:
    """What the server answers to ``data`` sent as it is on a connection of its own, until it closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        got = b""
        while part := s.recv(65536):
            got += part
    return got


def test_a_message_cannot_forge_the_template_s_special_tokens(servers):
    """``<|endoftext|>`` is the Llama folder's special token: typed in a message it is text (many tokens), as
    ``<|endofteyt|>`` is, not one token."""
    client = servers["llama"].client()

    def prompt_tokens(text: str) -> int:
        done = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}], max_tokens=1)
        return done.usage.prompt_tokens

    assert prompt_tokens("<|endoftext|>" * 10) >= 0.7 * prompt_tokens("<|endofteyt|>" * 10)


@pytest.mark.parametrize(("headers", "body", "status", "needle"), [
    ({"Content-Type": "text/plain"}, {"prompt": "Add"}, 415, "Content-Type: application/json"),
    ({"Content-Type": "application/x-www-form-urlencoded"}, "prompt=Add", 415, "Content-Type: application/json"),
    ({"Origin": "http://evil.example"}, {"prompt": "Add"}, 403, "another site"),
    ({}, "[" * 10_000 + "]" * 10_000, 400, "nested too deeply"),
    ({}, {"prompt": "Add", "n": True}, 400, "'n' must be an integer, got true"),
    ({}, {"prompt": "Add", "n": 1.0}, 400, "'n' must be an integer, got 1.0"),
    ({}, {"prompt": "Add", "frequency_penalty": 0.5}, 400, "(send null or leave it out)"),
    ({}, {"prompt": "Add", "logprobs": True}, 400, "'logprobs' must be an integer from 0 to 5"),
    ({}, {"prompt": "".join(chr(0x4E00 + i % 20_000) for i in range(330_000))}, 400, "and 19,990 more"),
])
def test_a_request_from_another_site_or_a_client_s_mistake_is_a_4xx_in_one_line(servers, headers, body, status,
                                                                                 needle):
    """A cross-origin form or text POST, a foreign Origin, JSON nested 10,000 deep, numbers that are no numbers, a
    megabyte of characters the model never saw (refused in a short answer)."""
    server = servers["lm"]
    data = body.encode() if isinstance(body, str) else json.dumps(body, ensure_ascii=False).encode()
    got, answer = server.request("POST", "/v1/completions", data, headers)
    assert got == status and set(answer["error"]) == {"message", "type", "param", "code"}, (got, answer)
    assert needle in answer["error"]["message"] and len(json.dumps(answer)) < 2000, answer


def test_the_500s_of_before_are_400s_a_client_gone_is_nothing_and_the_console_has_no_traceback(servers):
    server = servers["llama"]
    got, answer = server.request("POST", "/v1/chat/completions",
                                 '{"messages": [{"role": "user", "content": "\\ud800"}]}')
    assert got == 400 and "lone surrogate" in answer["error"]["message"], answer
    head = raw(server.port, b"GET /health HTTP/1.1\r\nHost: [\r\nConnection: close\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b'"bad_host"' in head, head
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:  # gone during its upload
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 500\r\n\r\n{\"pro")
    origin = {"Origin": f"http://127.0.0.1:{server.port}"}  # the chat page's own origin
    assert server.request("POST", "/v1/completions", json.dumps({"prompt": "the", "max_tokens": 2}), origin)[0] == 200
    assert "Traceback" not in server.log.read_text()


def test_the_fields_of_the_current_openai_client_are_accepted_where_they_change_nothing(servers):
    client = servers["instruct"].client()
    fields = dict(safety_identifier="someone", prompt_cache_key="k", reasoning_effort="low", verbosity="low",
                  modalities=["text"], store=False, metadata={"a": "b"}, service_tier="auto")
    plain = chat(client, QUESTIONS[0], False)
    assert chat(client, QUESTIONS[0], False, **fields) == plain
    streamed = chat(client, QUESTIONS[0], True, extra_body={"stream_options": {"include_usage": True,
                                                                               "include_obfuscation": False}})
    assert streamed[:2] == plain[:2]


def test_the_api_key_is_required_when_set_and_the_cli_refuses_in_one_line(runs, tmp_path, capsys):
    server = Server(runs["lm"], tmp_path / "key.log", "--api-key", "s3cret", "--name", "my-model")
    try:
        with pytest.raises(openai.AuthenticationError):
            server.client("wrong").models.list()
        assert server.request("GET", "/v1/models")[0] == 401
        assert server.client("s3cret").models.list().data[0].id == "my-model"
        assert complete(server.client("s3cret"), "Add 2 and", False) is not None
        status, page = server.request("GET", "/")  # the page itself is public; it asks for the key
        assert status == 200 and b'id="api_key"' in page["raw"]
        capsys.readouterr()
        assert main(["serve", "--ckpt", str(runs["lm"]), "--port", str(server.port)]) == 2  # the port is taken
        err = capsys.readouterr().err
        assert err.startswith(f"scratchformer: error: cannot listen on 127.0.0.1:{server.port}")
        assert err.count("\n") == 1
    finally:
        assert server.stop()[0] == 0
    from scratchformer.checkpoints import save_checkpoint
    from scratchformer.models import EncoderClassifier
    from scratchformer.nn.config import ModelConfig
    from scratchformer.settings.config import TrainConfig
    from scratchformer.tokenizers import CharTokenizer

    tok = CharTokenizer(list("ab"))
    cfg = ModelConfig(arch="encoder", vocab_size=tok.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                      max_len=8, n_classes=2)
    save_checkpoint(tmp_path / "cls", EncoderClassifier(cfg), tok, cfg, TrainConfig(task="classify").__dict__, step=1)
    assert main(["serve", "--ckpt", str(tmp_path / "cls"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "does not write text; 'serve' needs a language model" in err and err.count("\n") == 1


# =================================================================================== the chat page


@pytest.fixture(scope="module")
def browser():
    from test_explore import browser as explore_browser

    yield from explore_browser.__wrapped__()


def _ask_on_the_page(driver, url: str, text: str, settings: dict[str, str]):
    """Open the page, set the settings, send ``text``; the answer's bubble once it has finished."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: "tokens of context" in d.find_element(By.ID, "model-summary").text)
    for field, value in settings.items():
        box = driver.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.ID, "input").send_keys(text)
    driver.find_element(By.ID, "send").click()
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".message[data-finish]"))
    return driver.find_elements(By.CSS_SELECTOR, ".message[data-finish]")[-1]


def test_the_chat_page_answers_what_the_api_answers_and_its_stop_button_stops(browser, servers, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = servers["instruct"]
    question = "Add 4 and 3."
    bubble = _ask_on_the_page(browser, server.url + "/", question, {"temperature": "0", "max_tokens": "24"})
    expected, finish, usage = chat(server.client(), question, stream=False)
    assert bubble.find_element(By.CSS_SELECTOR, ".reply").text == expected.strip()
    assert bubble.get_attribute("data-finish") == finish
    assert f"{usage['completion_tokens']} token" in bubble.find_element(By.CSS_SELECTOR, ".meta").text
    assert [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".message.user .reply")] == [question]
    browser.save_screenshot(str(tmp_path / "chat.png"))
    # Stop: the request is abandoned (the server frees its row), the page says so and takes the next message
    browser.find_element(By.ID, "input").send_keys("Spell the word backwards.")
    browser.execute_script("document.getElementById('send').click(); document.getElementById('stop').click();")
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "status").text == "stopped")
    assert not browser.find_element(By.ID, "send").get_property("disabled")
    assert server.request("GET", "/health")[1]["running"] == 0
    assert browser.find_element(By.ID, "input").get_property("value") == "Spell the word backwards."  # to send again
    # a new conversation, and a setting the server refuses (five stop texts): its one line, on the page
    browser.find_element(By.ID, "clear").click()
    assert not browser.find_elements(By.CSS_SELECTOR, ".message")
    browser.find_element(By.ID, "input").clear()
    browser.find_element(By.ID, "stop_texts").send_keys("a\nb\nc\nd\ne")
    browser.find_element(By.ID, "input").send_keys("Add 1 and 1.")
    browser.find_element(By.ID, "send").click()
    WebDriverWait(browser, 20).until(lambda d: "at most 4 texts" in d.find_element(By.ID, "status").text)
    assert "error" in browser.find_element(By.ID, "status").get_attribute("class")
    assert browser.find_element(By.ID, "input").get_property("value") == "Add 1 and 1."  # given back to send again


def test_the_page_of_a_model_without_a_template_continues_a_text(browser, servers):
    from selenium.webdriver.common.by import By

    bubble = _ask_on_the_page(browser, servers["lm"].url + "/", "Add 2 and", {"temperature": "0",
                                                                             "max_tokens": "24"})
    assert "continues your text" in browser.find_element(By.ID, "model-summary").text
    assert bubble.find_element(By.CSS_SELECTOR, ".prompt").text == "Add 2 and"
    assert bubble.find_element(By.CSS_SELECTOR, ".reply").get_attribute("textContent") == complete(
        servers["lm"].client(), "Add 2 and", False)
