"""The attention explorer (``scratchformer explore``): the numbers it serves are the library's own (attention
rows that sum to 1 and equal ``viz.attention_maps``; the outputs of ``generate``, beam search and the
classifier), its server answers bad requests with a short 4xx and never serves a file it was not built
with, and in a real browser the heatmap's cells are the JSON endpoint's numbers."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch

from scratchformer import GPT, EncoderClassifier, ModelConfig, Seq2SeqTransformer
from scratchformer.app.cli import main
from scratchformer.app.explore import ExploreServer, Limits, RequestError, explore, model_info, parse_request
from scratchformer.app.explore.server import MAX_BODY, STATIC
from scratchformer.checkpoints import load_checkpoint, save_checkpoint
from scratchformer.errors import DataError
from scratchformer.generation import beam_search, generate
from scratchformer.nn.recording import attention_maps
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.inference import classify_texts, translate_texts
from scratchformer.tokenizers import BOS_ID, EOS_ID, CharTokenizer

ROOT = Path(__file__).resolve().parent.parent
STATIC_DIR = ROOT / "src" / "scratchformer" / "app" / "explore" / "static"
ALPHABET = "abcdefghij ."


def _save(root: Path, arch: str, task: str, **model_kw) -> Path:
    """A tiny random model of ``arch`` saved as a real checkpoint, with a character tokenizer."""
    tok = CharTokenizer(list(ALPHABET))
    cfg = ModelConfig(arch=arch, vocab_size=tok.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=24,
                      dropout=0.0, **model_kw)
    model = {"gpt": GPT, "seq2seq": Seq2SeqTransformer, "encoder": EncoderClassifier}[arch](cfg)
    extra = {"labels": ["neg", "neutral", "pos"]} if task == "classify" else {}
    path = root / f"{arch}-{task}"
    save_checkpoint(path, model.eval(), tok, cfg, TrainConfig(task=task).__dict__, step=7, extra=extra)
    return path


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("explore")
    return {"gpt": _save(root, "gpt", "lm"), "seq2seq": _save(root, "seq2seq", "copy"),
            "encoder": _save(root, "encoder", "classify", n_classes=3), "mlm": _save(root, "encoder", "mlm")}


def _assert_maps_match(view: dict, maps: dict[str, torch.Tensor], n_layers: int) -> None:
    """The view's ``weights[layer][head][q][k]`` are the recorded maps (to the 6 decimals sent) and every
    query's row sums to 1 (one example, no padding: every key is a real token)."""
    stack, attn = view["kind"].split(".")
    expected = torch.stack([maps[f"{stack}.layers.{i}.{attn}"][0] for i in range(n_layers)]).double()
    got = torch.tensor(view["weights"], dtype=torch.float64)  # (L, H, T, S)
    assert got.shape == expected.shape == (n_layers, 4, len(view["queries"]), len(view["keys"]))
    torch.testing.assert_close(got, expected, atol=6e-7, rtol=0)
    torch.testing.assert_close(got.sum(-1), torch.ones(got.shape[:-1], dtype=torch.float64), atol=1e-4, rtol=0)


# ================================================================================= the numbers


def test_gpt_view_is_the_library_maps_next_token_and_continuation(ckpts):
    ckpt = load_checkpoint(ckpts["gpt"])
    text = "abc def.g"
    view = explore(ckpt, text, top_k=5, max_new_tokens=6, temperature=0.7, seed=3)
    ids = ckpt.tokenizer.encode(text)
    assert view["tokens"] == list(text) and view["token_ids"] == ids
    assert [v["kind"] for v in view["attention"]] == ["decoder.self_attn"]
    gpt_view = view["attention"][0]
    assert gpt_view["queries"] == gpt_view["keys"] == list(text)
    _assert_maps_match(gpt_view, attention_maps(ckpt.model, input_ids=torch.tensor([ids])), 2)
    assert all(w == 0 for layer in gpt_view["weights"] for head in layer for q, row in enumerate(head)
               for w in row[q + 1:])  # causal: no weight on a later token

    probs = ckpt.model(torch.tensor([ids]))[0, -1].softmax(-1)
    top = torch.topk(probs, 5)
    assert [t["id"] for t in view["next_tokens"]] == top.indices.tolist()
    torch.testing.assert_close(torch.tensor([t["prob"] for t in view["next_tokens"]]), top.values, atol=1e-6, rtol=0)
    out = generate(ckpt.model, torch.tensor([ids]), 6, do_sample=True, temperature=0.7, seed=3)[0, len(ids):]
    assert view["continuation"]["token_ids"] == out.tolist()
    assert view["continuation"]["text"] == ckpt.tokenizer.decode(out.tolist())


def test_seq2seq_view_has_three_kinds_over_the_beam_search_output(ckpts):
    ckpt = load_checkpoint(ckpts["seq2seq"])
    text = "abcab"
    view = explore(ckpt, text, beam=3, length_penalty=0.6)
    src = ckpt.tokenizer.encode(text, add_eos=True)
    out = beam_search(ckpt.model, torch.tensor([src]), torch.ones(1, len(src), dtype=torch.bool), bos_id=BOS_ID,
                      eos_id=EOS_ID, beam_size=3, length_penalty=0.6,
                      max_new_tokens=min(ckpt.model_config.max_len, len(src) + 50))[0]
    assert view["translation"]["token_ids"] == out
    assert view["translation"]["text"] == translate_texts(ckpt, [text], beam=3)[0]
    tgt = ([BOS_ID] + out)[:ckpt.model_config.max_len]
    maps = attention_maps(ckpt.model, src=torch.tensor([src]), tgt=torch.tensor([tgt]))
    by_kind = {v["kind"]: v for v in view["attention"]}
    assert list(by_kind) == ["encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"]
    src_labels, tgt_labels = [*text, "<eos>"], [ckpt.tokenizer.token_label(i) for i in tgt]
    assert (by_kind["encoder.self_attn"]["queries"], by_kind["encoder.self_attn"]["keys"]) == (src_labels, src_labels)
    assert (by_kind["decoder.self_attn"]["queries"], by_kind["decoder.self_attn"]["keys"]) == (tgt_labels, tgt_labels)
    assert (by_kind["decoder.cross_attn"]["queries"], by_kind["decoder.cross_attn"]["keys"]) == (tgt_labels, src_labels)
    for v in by_kind.values():
        _assert_maps_match(v, maps, 2)


def test_seq2seq_given_target_is_teacher_forced(ckpts):
    ckpt = load_checkpoint(ckpts["seq2seq"])
    view = explore(ckpt, "abc", target="cab")
    assert "translation" not in view and view["target"]["tokens"] == list("cab")
    cross = next(v for v in view["attention"] if v["kind"] == "decoder.cross_attn")
    assert cross["queries"] == ["<bos>", "c", "a", "b"] and cross["keys"] == ["a", "b", "c", "<eos>"]
    maps = attention_maps(ckpt.model, src=torch.tensor([ckpt.tokenizer.encode("abc", add_eos=True)]),
                          tgt=torch.tensor([[BOS_ID, *ckpt.tokenizer.encode("cab")]]))
    _assert_maps_match(cross, maps, 2)


def test_classifier_view_has_the_class_probabilities(ckpts):
    ckpt = load_checkpoint(ckpts["encoder"])
    text = "a bad jig."
    view = explore(ckpt, text)
    ids = ckpt.tokenizer.encode(text)
    _assert_maps_match(view["attention"][0], attention_maps(ckpt.model, input_ids=torch.tensor([ids])), 2)
    assert [c["label"] for c in view["classes"]] == ["neg", "neutral", "pos"]
    probs = [c["prob"] for c in view["classes"]]
    assert sum(probs) == pytest.approx(1, abs=1e-5)
    label, prob = classify_texts(ckpt, [text])[0]
    assert max(view["classes"], key=lambda c: c["prob"]) == {"label": label, "prob": pytest.approx(prob, abs=1e-6)}
    assert model_info(ckpt)["labels"] == ["neg", "neutral", "pos"]

    mlm = explore(load_checkpoint(ckpts["mlm"]), text)  # its head was never trained: no probabilities
    assert mlm["classes"] is None and "untrained" in mlm["note"] and len(mlm["attention"][0]["weights"]) == 2


@pytest.mark.parametrize(("family", "payload", "needle"), [
    ("gpt", ["abc"], "JSON object"),
    ("gpt", {"txt": "abc"}, "missing field 'text'"),
    ("gpt", {"text": 5}, "'text' must be a string"),
    ("gpt", {"text": ""}, "empty"),
    ("gpt", {"text": "a" * 1001}, "1001 characters; the explorer takes at most 1000"),
    ("gpt", {"text": "a" * 25}, "25 tokens; the explorer takes at most 24"),
    ("gpt", {"text": "ab", "beam": 2}, "unknown field 'beam'"),
    ("gpt", {"text": "ab", "top_k": True}, "top_k must be an integer"),
    ("gpt", {"text": "ab", "top_k": 2.0}, "top_k must be an integer"),
    ("gpt", {"text": "ab", "temperature": "hot"}, "temperature must be a number"),
    ("gpt", {"text": "ab", "max_new_tokens": 10_000}, "out of range"),
    ("gpt", {"text": "ab", "temperature": float("nan")}, "out of range"),
    ("seq2seq", {"text": "ab", "beam": 0}, "beam=0 is out of range"),
    ("seq2seq", {"text": "ab", "target": ["x"]}, "target must be a string"),
    ("seq2seq", {"text": "ab", "target": "a" * 1001}, "the target is 1001 characters"),
    ("seq2seq", {"text": "ab", "target": ""}, "'target' is empty"),
    ("seq2seq", {"text": "a" * 24}, "25 tokens"),  # with <eos>
    ("seq2seq", {"text": "ab", "target": "a" * 24}, "target is 24 tokens; the explorer takes at most 23"),
])
def test_bad_inputs_are_refused_in_one_line(ckpts, family, payload, needle):
    """What the server does with a request body: check it, then run the model; refused before the model."""
    ckpt = load_checkpoint(ckpts[family])
    with pytest.raises(RequestError) as err:
        text, options = parse_request(payload, ckpt)
        explore(ckpt, text, **options)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_unknown_characters_and_token_caps(ckpts):
    ckpt = load_checkpoint(ckpts["gpt"])
    with pytest.raises(DataError, match="has no 'z'"):
        explore(ckpt, "abz")
    with pytest.raises(RequestError, match="9 tokens; the explorer takes at most 8"):
        explore(ckpt, "abcdefghi", Limits(max_tokens=8))
    assert model_info(ckpt, Limits(max_tokens=1000))["limits"]["max_tokens"] == 24  # never past max_len


# ==================================================================================== the server


@pytest.fixture(scope="module")
def server(ckpts):
    srv = ExploreServer(load_checkpoint(ckpts["seq2seq"]), ("127.0.0.1", 0), name="tiny/seq2seq")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _request(srv: ExploreServer, method: str, path: str, body: bytes | str | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=30)
    try:
        conn.putrequest(method, path, skip_host="Host" in (headers or {}), skip_accept_encoding=True)
        body = body.encode() if isinstance(body, str) else body
        length = {"Content-Length": str(len(body))} if body is not None else {}
        for key, value in {**length, **(headers or {})}.items():
            conn.putheader(key, value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_server_serves_the_page_its_assets_and_the_model(server):
    status, headers, body = _request(server, "GET", "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'src="/explore.js"' in body and b'href="/explore.css"' in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    for path, (name, ctype) in STATIC.items():
        status, headers, body = _request(server, "GET", path)
        assert (status, headers["Content-Type"]) == (200, ctype)
        assert body == (STATIC_DIR / name).read_bytes()
    status, _, body = _request(server, "GET", "/api/model")
    info = json.loads(body)
    assert status == 200 and info["family"] == "seq2seq" and info["layers"] == {"encoder": 2, "decoder": 2}
    assert info["name"] == "tiny/seq2seq" and info["options"] == {"beam": 4, "length_penalty": 0.6, "target": None}


def test_the_endpoint_serves_the_same_numbers_as_the_function(server):
    status, headers, body = _request(server, "POST", "/api/explore", json.dumps({"text": "abca", "beam": 2}),
                                     {"Content-Type": "application/json"})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(body) == json.loads(json.dumps(explore(server.ckpt, "abca", beam=2)))


@pytest.mark.parametrize(("method", "path", "body", "headers", "status", "needle"), [
    ("POST", "/api/explore", "{not json", None, 400, "not JSON"),
    ("POST", "/api/explore", b"\xff\xfe", None, 400, "not JSON"),
    ("POST", "/api/explore", "{}", None, 400, "missing field 'text'"),
    ("POST", "/api/explore", '{"text": "abc", "beam": "wide"}', None, 400, "beam must be an integer"),
    ("POST", "/api/explore", json.dumps({"text": "x" * 2000}), None, 400, "at most 1000"),
    ("POST", "/api/explore", '{"text": "xyz"}', None, 400, "vocabulary has no"),
    ("POST", "/api/explore", "x" * (MAX_BODY + 1), None, 413, "at most"),
    ("POST", "/api/explore", None, None, 411, "Content-Length"),
    ("GET", "/api/explore", None, None, 405, "use POST"),
    ("POST", "/", "{}", None, 405, "cannot POST"),
    ("PUT", "/api/explore", "{}", None, 405, "not supported"),
    ("GET", "/nope", None, None, 404, "no page"),
    ("GET", "/", None, {"Host": "attacker.example:8000"}, 403, "127.0.0.1 or localhost"),
])
def test_bad_requests_get_a_short_4xx_without_a_traceback(server, method, path, body, headers, status, needle):
    got, response_headers, data = _request(server, method, path, body, headers)
    assert got == status
    assert response_headers["Content-Type"].startswith("application/json")
    message = json.loads(data)["error"]
    assert needle in message and len(message) < 300
    assert b"Traceback" not in data and b"File \"" not in data


@pytest.mark.parametrize("path", [
    "/../pyproject.toml", "/static/../server.py", "/..%2fserver.py", "/%2e%2e/%2e%2e/pyproject.toml",
    "/explore.js/../../server.py", "//etc/passwd", "/static/index.html", "/server.py", "/explore.js?x=/etc/passwd",
])
def test_no_path_of_a_request_reaches_the_disk(server, path):
    status, _, data = _request(server, "GET", path)
    if status == 200:  # only a whitelisted asset, whatever follows '?'
        assert path.split("?")[0] in STATIC and data == (STATIC_DIR / STATIC[path.split("?")[0]][0]).read_bytes()
    else:
        assert status == 404 and b"import" not in data and b"root:" not in data


def test_an_unexpected_failure_is_a_500_line_and_the_traceback_stays_on_the_console(server, monkeypatch, capsys):
    from scratchformer.app.explore import server as server_module

    def broken(*args, **kwargs):
        raise RuntimeError("boom in the model")

    monkeypatch.setattr(server_module, "explore", broken)
    status, _, data = _request(server, "POST", "/api/explore", '{"text": "abc"}')
    assert status == 500 and json.loads(data) == {"error": "internal error; the server's console has the details"}
    assert "boom in the model" not in data.decode()
    assert "RuntimeError: boom in the model" in capsys.readouterr().err


def test_the_static_files_ship_with_the_package_and_fetch_nothing_from_elsewhere():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["scratchformer"]
    for name, _ in STATIC.values():
        assert (STATIC_DIR / name).is_file()
        assert any(fnmatch(f"app/explore/static/{name}", p) for p in patterns), f"{name} is not package data"
        # SVG's namespace name is an identifier written into the saved SVG files, never fetched
        text = (STATIC_DIR / name).read_text(encoding="utf-8").replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


# ======================================================================================= the CLI


def test_cli_refuses_a_bad_checkpoint_and_a_busy_port_in_one_line(ckpts, tmp_path, capsys):
    assert main(["explore", "--ckpt", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scratchformer: error: no checkpoint at") and err.count("\n") == 1
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["explore", "--ckpt", str(ckpts["gpt"]), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scratchformer: error: cannot listen on 127.0.0.1:{port}") and err.count("\n") == 1


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT, which Windows does not have")
def test_cli_prints_the_url_serves_and_stops_cleanly_on_ctrl_c(ckpts):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # a process of its own: a server process that must stop cleanly on the SIGINT sent to it
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "explore", "--ckpt", str(ckpts["encoder"]),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            # Ctrl-C's default even when the tests run as a background job (which ignores it)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[1].startswith("open http://127.0.0.1:"), lines
        url = lines[1].split()[1]
        host, port = url[len("http://"):].rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/api/model")
        assert json.loads(conn.getresponse().read())["labels"] == ["neg", "neutral", "pos"]
        conn.close()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "stopped" in out, (proc.returncode, out, err)
    assert "Traceback" not in err


def test_closing_the_server_ends_a_kept_alive_connection_at_once(ckpts):
    """Request threads are joined when the server closes; a browser's idle keep-alive connection does not hold
    the close up for the handler's 30-second timeout."""
    import time

    from scratchformer.app.explore.server import make_server

    server = make_server(str(ckpts["encoder"]), port=0)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    conn = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
    conn.request("GET", "/api/model")
    assert conn.getresponse().read()  # the connection stays open: HTTP/1.1 keeps it alive
    start = time.perf_counter()
    server.shutdown()
    server.server_close()
    thread.join()
    assert time.perf_counter() - start < 5
    assert not server.connections
    conn.close()


# =================================================================================== the browser


def _find_browser() -> tuple[str | None, str | None]:
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver") or next((p for p in ("/usr/bin/chromedriver",
                                                               "/usr/lib/chromium/chromedriver") if Path(p).is_file()),
                                                  None)
    return browser, driver


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="the browser test needs selenium (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _find_browser()
    if binary is None or driver_path is None:
        pytest.skip("no chromium and chromedriver found (Debian: apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    user_dir = Path(tempfile.mkdtemp(prefix="explore-chromium-"))
    # a closed network: no background fetches, updates or sync that would only fail
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={user_dir}", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()
    shutil.rmtree(user_dir, ignore_errors=True)


def _cells(driver) -> tuple[dict[str, str], dict[tuple[int, int], float]]:
    """The drawn heatmap: its (kind, layer, head) and each cell's value, read from the DOM."""
    found = driver.execute_script("""
        const box = document.getElementById('heatmap');
        return [Object.assign({}, box.dataset),
                [...box.querySelectorAll('.cell')].map(c => [+c.dataset.q, +c.dataset.k, c.dataset.value])];""")
    return found[0], {(q, k): float(v) for q, k, v in found[1]}


def _as_cells(matrix: list[list[float]]) -> dict[tuple[int, int], float]:
    return {(q, k): v for q, row in enumerate(matrix) for k, v in enumerate(row)}


def _run_page(driver, srv: ExploreServer, text: str) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(srv.url)
    WebDriverWait(driver, 20).until(lambda d: "·" in d.find_element(By.ID, "model-summary").text)
    box = driver.find_element(By.ID, "text")
    box.send_keys(text)
    driver.find_element(By.ID, "run").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
    # what the endpoint answers for the same input and the page's default options
    status, _, body = _request(srv, "POST", "/api/explore", json.dumps({"text": text}))
    assert status == 200
    return json.loads(body)


@pytest.fixture
def page_server(ckpts, request):
    srv = ExploreServer(load_checkpoint(ckpts[request.param]), ("127.0.0.1", 0))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("page_server", ["seq2seq"], indirect=True)
def test_browser_draws_the_endpoint_numbers_and_the_picker_changes_them(browser, page_server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    data = _run_page(browser, page_server, "abcab")
    views = {v["kind"]: v for v in data["attention"]}
    assert browser.find_element(By.ID, "translation").text == (data["translation"]["text"] or "(empty)")
    chips = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#tokens .token")]
    assert chips == ["a", "b", "c", "a", "b", "<eos>"]

    where, cells = _cells(browser)  # opens on cross-attention, layer 0, head 0
    assert where == {"kind": "decoder.cross_attn", "layer": "0", "head": "0"}
    assert cells == _as_cells(views["decoder.cross_attn"]["weights"][0][0])

    Select(browser.find_element(By.ID, "layer")).select_by_value("1")
    Select(browser.find_element(By.ID, "head")).select_by_value("2")
    where, changed = _cells(browser)
    assert where == {"kind": "decoder.cross_attn", "layer": "1", "head": "2"}
    assert changed == _as_cells(views["decoder.cross_attn"]["weights"][1][2]) and changed != cells

    browser.find_element(By.CSS_SELECTOR, '#kinds button[data-kind="encoder.self_attn"]').click()
    where, enc = _cells(browser)
    assert where == {"kind": "encoder.self_attn", "layer": "1", "head": "2"}
    assert enc == _as_cells(views["encoder.self_attn"]["weights"][1][2]) and len(enc) == 6 * 6

    browser.find_element(By.CSS_SELECTOR, '#overview canvas[data-layer="0"][data-head="3"]').click()
    where, thumb = _cells(browser)
    assert where == {"kind": "encoder.self_attn", "layer": "0", "head": "3"}
    assert thumb == _as_cells(views["encoder.self_attn"]["weights"][0][3])

    # hovering a cell shows its value
    cell = browser.find_element(By.CSS_SELECTOR, '#heatmap .cell[data-q="2"][data-k="4"]')
    ActionChains(browser).move_to_element(cell).perform()
    tip = browser.find_element(By.ID, "tooltip")
    assert tip.is_displayed()
    assert f"{views['encoder.self_attn']['weights'][0][3][2][4]:.4f}" in tip.text and "query 2" in tip.text

    # a bad input: the server's one-line message, shown on the page
    box = browser.find_element(By.ID, "text")
    box.clear()
    box.send_keys("xyz")
    browser.find_element(By.ID, "run").click()
    WebDriverWait(browser, 20).until(lambda d: "vocabulary has no" in d.find_element(By.ID, "status").text)
    assert "error" in browser.find_element(By.ID, "status").get_attribute("class")


@pytest.mark.parametrize("page_server", ["gpt"], indirect=True)
def test_browser_shows_a_gpt_s_next_tokens_and_continuation(browser, page_server):
    from selenium.webdriver.common.by import By

    data = _run_page(browser, page_server, "abc de")
    where, cells = _cells(browser)
    assert where == {"kind": "decoder.self_attn", "layer": "0", "head": "0"}
    assert cells == _as_cells(data["attention"][0]["weights"][0][0])
    drawn = [float(li.get_attribute("data-prob")) for li in browser.find_elements(By.CSS_SELECTOR, ".next-tokens li")]
    assert drawn == [t["prob"] for t in data["next_tokens"]] and len(drawn) == 10
    assert browser.find_element(By.ID, "continuation").get_attribute("textContent") == data["continuation"]["text"]

