"""Attention views to take away (``scratchformer explore --export``): one self-contained HTML page with the numbers
inside it, and PNG and SVG pictures, from the command line and from the page. In headless Chromium the page opened
from the disk shows the served page's weights, asks no server, and saves each view as SVG and PNG; the served page's
Export button downloads the very file the command writes."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch

import test_explore
from scratchformer import ModelConfig, ViT
from scratchformer.app.cli import main
from scratchformer.app.explore import explore, make_server, model_info, standalone_page
from scratchformer.app.explore.model_view import checkpoint_name
from scratchformer.app.explore.standalone import SCRIPTS
from scratchformer.checkpoints import load_checkpoint, save_checkpoint
from scratchformer.settings.config import TrainConfig
from scratchformer.tokenizers import CharTokenizer
from test_explore import _as_cells, _cells, _request, _save

browser = test_explore.browser  # the headless Chromium fixture, shared

PNG = b"\x89PNG\r\n\x1a\n"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("export")
    return {"gpt": _save(root, "gpt", "lm"), "seq2seq": _save(root, "seq2seq", "copy"),
            "encoder": _save(root, "encoder", "classify", n_classes=3)}


def _export(ckpt: Path, out: Path, *words: str, texts: tuple[str, ...] = ("abcab",)) -> int:
    return main(["explore", "--ckpt", str(ckpt), *[w for t in texts for w in ("--text", t)], "--export", str(out),
                 *words])


def _embedded(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="explore-data">(.*?)</script>', page, re.S)[1])


# ============================================================================== the file itself


def test_the_page_holds_its_scripts_styles_and_numbers_and_may_fetch_nothing(ckpts, tmp_path):
    out = tmp_path / "view.html"
    assert _export(ckpts["seq2seq"], out, texts=("abcab", "ba")) == 0
    page = out.read_text(encoding="utf-8")
    ckpt = load_checkpoint(ckpts["seq2seq"])
    data = _embedded(page)
    assert data["results"] == json.loads(json.dumps([explore(ckpt, "abcab"), explore(ckpt, "ba")]))
    assert data["info"] == model_info(ckpt, name=checkpoint_name(ckpts["seq2seq"])) and data["initial"] is None
    # nothing linked: no src= or href= in the markup but the data: icon, no URL but SVG's namespace name
    markup = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", page, flags=re.S)
    assert re.findall(r'(?:src|href)="([^"]*)"', markup) == ["data:,"]
    assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg)", page)
    # its policy allows exactly its inline scripts and style (by hash), data: images and no connection
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)[1]
    inline = re.findall(r"<script>(.*?)</script>", page, re.S) + re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(inline) == len(SCRIPTS) + 1 == 4  # figures.js, lens.js, explore.js and the styles
    for text in inline:
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert policy.startswith("default-src 'none';") and "connect-src" not in policy and "img-src data:;" in policy


def test_text_that_could_close_the_script_stays_data(ckpts):
    ckpt = load_checkpoint(ckpts["gpt"])
    result = explore(ckpt, "abc")
    result["input"] = "</script><script>alert(1)</script>&\u2028"
    page = standalone_page(model_info(ckpt), [result])
    # the data block's closing tag and the scripts' own
    assert "alert(1)</script>" not in page and page.count("</script>") == 1 + len(SCRIPTS)
    assert _embedded(page)["results"][0]["input"] == result["input"]


def test_the_export_button_s_file_is_the_command_s_file(ckpts, tmp_path):
    server = make_server(str(ckpts["seq2seq"]), port=0)
    try:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        body = {"text": "abcab", "beam": 2, "view": {"kind": "encoder.self_attn", "layer": 1, "head": 3}}
        status, headers, served = _request(server, "POST", "/api/export", json.dumps(body))
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert headers["Content-Disposition"] == 'attachment; filename="attention-view.html"'
        out = tmp_path / "view.html"
        assert _export(ckpts["seq2seq"], out, "--option", "beam=2", "--kind", "encoder.self_attn", "--layer", "1",
                       "--head", "3") == 0
        assert served == out.read_bytes()
        assert _embedded(served.decode())["initial"] == {"kind": "encoder.self_attn", "layer": 1, "head": 3}
        for bad, needle in [({"text": "ab", "view": {"layer": 9}}, "--layer 9 is out of range"),
                            ({"text": "ab", "view": {"kind": "x"}}, "is not one of this model's"),
                            ({"text": "ab", "view": {"head": True}}, "'view' must be an object"),
                            ({"text": "ab", "view": [1]}, "'view' must be an object"),
                            ({"text": "xyz"}, "vocabulary has no")]:
            status, _, data = _request(server, "POST", "/api/export", json.dumps(bad))
            assert status == 400 and needle in json.loads(data)["error"]
    finally:
        server.shutdown()
        server.server_close()


# ======================================================================== pictures from the CLI


def _svg_panel(path: Path) -> np.ndarray:
    """The one heatmap a matplotlib SVG embeds (beside its colour bar), as an (H, W, 3) array of 0-255 colours."""
    import matplotlib.image as mpimg

    images = [e for e in ET.parse(path).iter() if e.tag == f"{SVG}image"]
    assert len(images) == 2
    heatmap = max(images, key=lambda e: float(e.get("width")))  # the colour bar is the narrow one
    href = next(v for k, v in heatmap.attrib.items() if k.endswith("href"))
    pixels = mpimg.imread(io.BytesIO(base64.b64decode(href.split(",", 1)[1])), format="png")
    if "scale(1 -1)" in heatmap.get("transform", ""):  # stored upside down, turned over when drawn
        pixels = pixels[::-1]
    return np.round(pixels[..., :3] * 255)


@pytest.mark.parametrize(("family", "kind"), [("gpt", None), ("encoder", None), ("seq2seq", "encoder.self_attn"),
                                              ("seq2seq", "decoder.self_attn"), ("seq2seq", "decoder.cross_attn")])
def test_a_picture_of_one_head_shows_its_weights(ckpts, tmp_path, family, kind):
    pytest.importorskip("matplotlib", reason="pictures need the plots extra")
    from matplotlib import colormaps

    from scratchformer.app.plots.attention import _colour_limit

    words = ["--layer", "1", "--head", "2"] + (["--kind", kind] if kind else [])
    assert _export(ckpts[family], tmp_path / "one.svg", *words) == 0
    assert _export(ckpts[family], tmp_path / "one.png", *words) == 0
    assert (tmp_path / "one.png").read_bytes()[:8] == PNG
    view = next(v for v in explore(load_checkpoint(ckpts[family]), "abcab")["attention"] if v["kind"] == (
        kind or v["kind"]))
    weights = np.array(view["weights"][1][2])  # (T, S)
    vmax, _ = _colour_limit([[weights]])
    panel = _svg_panel(tmp_path / "one.svg")
    T, S = weights.shape
    rows, cols = ((np.arange(n) + 0.5) / n * size for n, size in ((T, panel.shape[0]), (S, panel.shape[1])))
    drawn = panel[rows.astype(int)[:, None], cols.astype(int)[None, :]]  # each cell's centre
    expected = np.round(colormaps["viridis"](np.clip(weights / vmax, 0, 1))[..., :3] * 255)
    assert np.abs(drawn - expected).max() <= 2


def test_pictures_of_every_layer_and_head_and_force(ckpts, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="pictures need the plots extra")
    import matplotlib.image as mpimg

    out = tmp_path / "all.png"
    assert _export(ckpts["seq2seq"], out, "--kind", "decoder.cross_attn") == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    whole = mpimg.imread(out).shape
    assert _export(ckpts["seq2seq"], out, "--kind", "decoder.cross_attn", "--head", "0", "--force") == 0
    assert mpimg.imread(out).shape[1] < whole[1] / 2  # one column of heads now, the old file replaced
    assert not list(tmp_path.glob(".*tmp*"))


def _vit(root: Path) -> Path:
    cfg = ModelConfig(arch="vit", image_size=8, patch_size=4, channels=3, d_model=32, n_heads=4, n_layers=1, d_ff=64,
                      n_classes=2)
    save_checkpoint(root / "vit", ViT(cfg), CharTokenizer(list("ab")), cfg, TrainConfig(task="image").__dict__, step=1)
    return root / "vit"


@pytest.mark.parametrize(("family", "words", "needle"), [
    ("seq2seq", ["--export", "x.png"], "3 kinds of attention: choose one with --kind encoder.self_attn | "
                                       "decoder.self_attn | decoder.cross_attn"),
    ("seq2seq", ["--export", "x.svg", "--kind", "cross"], "--kind 'cross' is not one of this model's"),
    ("seq2seq", ["--export", "x.svg", "--kind", "decoder.cross_attn", "--layer", "2"],
     "--layer 2 is out of range: the cross-attention (decoder -> encoder) has 2 layers, 0 to 1"),
    ("gpt", ["--export", "x.png", "--head", "4"], "--head 4 is out of range: the masked self-attention has 4 heads"),
    ("encoder", ["--export", "x.html", "--kind", "decoder.self_attn"], "is not one of this model's"),
    ("gpt", ["--export", "x.png", "--layer", "-1"], "argument --layer: must be >= 0"),
    ("gpt", ["--export", "exists.html"], "exists; pass --force to replace it"),
    ("gpt", ["--export", "x.pdf"], "write an .html page, or a .png or .svg picture"),
    ("gpt", ["--export", "folder.html"], "folder.html is a directory"),
    ("gpt", ["--export", "missing/x.html"], "directory"),
    ("gpt", ["--export", "x.png", "--text", "ba"], "a PNG draws one input, not 2"),
    ("gpt", ["--export", "x.html", "--option", "beam=2"], "unknown field 'beam' for a language model"),
    ("gpt", ["--export", "x.html", "--option", "temperature=hot"], "temperature must be a number"),
    ("gpt", ["--export", "x.html", "--option", "seed"], "write NAME=VALUE"),
    ("gpt", ["--export", "x.html", "--option", "limits=1"], "'limits' is not an option of the explorer"),
    ("gpt", ["--export", "x.html", "--text", "xyz"], "vocabulary has no"),
    ("gpt", ["--kind", "decoder.self_attn"], "--text goes with --export FILE"),
    ("vit", ["--export", "x.html"], "the attention explorer reads text"),
])
def test_export_mistakes_end_in_one_line_and_write_nothing(ckpts, tmp_path, capsys, monkeypatch, family, words,
                                                           needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists.html").write_text("mine")
    (tmp_path / "folder.html").mkdir()
    ckpt = _vit(tmp_path) if family == "vit" else ckpts[family]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["explore", "--ckpt", str(ckpt), "--text", "abcab", *words]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scratchformer: error: ") and err.count("\n") == 1 and needle in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before and (tmp_path / "exists.html").read_text() == "mine"


def test_view_flags_without_export_are_refused_not_ignored(ckpts, capsys):
    assert main(["explore", "--ckpt", str(ckpts["gpt"]), "--layer", "0", "--port", "0"]) == 2  # 0 is a layer too
    err = capsys.readouterr().err
    assert err == "scratchformer: error: --layer goes with --export FILE (without it, explore serves the page)\n"


# ================================================================================== the browser


def _downloads(driver, folder: Path) -> None:
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})


def _downloaded(folder: Path, name: str, timeout: float = 20) -> Path:
    path = folder / name
    end = time.monotonic() + timeout
    while not path.is_file() or list(folder.glob("*.crdownload")):
        assert time.monotonic() < end, f"{name} was not downloaded: {sorted(p.name for p in folder.iterdir())}"
        time.sleep(0.1)
    return path


def _views_drawn(driver, views: list[dict]) -> dict[tuple[str, int, int], dict]:
    """Click through every kind, layer and head of the page; the cells each draws, read from the DOM."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    seen = {}
    for view in views:
        driver.find_element(By.CSS_SELECTOR, f'#kinds button[data-kind="{view["kind"]}"]').click()
        for layer in range(len(view["weights"])):
            Select(driver.find_element(By.ID, "layer")).select_by_value(str(layer))
            for head in range(len(view["weights"][0])):
                Select(driver.find_element(By.ID, "head")).select_by_value(str(head))
                where, cells = _cells(driver)
                assert where == {"kind": view["kind"], "layer": str(layer), "head": str(head)}
                seen[(view["kind"], layer, head)] = cells
    return seen


def _open_served(driver, server, text: str) -> dict:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(server.url)
    WebDriverWait(driver, 20).until(lambda d: "·" in d.find_element(By.ID, "model-summary").text)
    driver.find_element(By.ID, "text").send_keys(text)
    driver.find_element(By.ID, "run").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
    return json.loads(_request(server, "POST", "/api/explore", json.dumps({"text": text}))[2])


@pytest.fixture
def served(ckpts, request):
    server = make_server(str(ckpts[request.param]), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.family = request.param
    yield server
    server.shutdown()
    server.server_close()


def _screenshot(driver, path: Path) -> None:
    """A screenshot of the whole window, kept in ``$SCRATCHFORMER_SCREENSHOTS`` when that is set (to look at)."""
    driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 20_000  # a drawn page, not a blank one
    if os.environ.get("SCRATCHFORMER_SCREENSHOTS"):
        Path(os.environ["SCRATCHFORMER_SCREENSHOTS"], path.name).write_bytes(path.read_bytes())


@pytest.mark.parametrize("served", ["seq2seq", "gpt", "encoder"], indirect=True)
def test_the_page_opened_from_disk_shows_the_served_page_s_weights_and_asks_no_server(browser, served, ckpts,
                                                                                       tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    data = _open_served(browser, served, "abcab")
    on_server = _views_drawn(browser, data["attention"])
    for view in data["attention"]:  # the served page draws the endpoint's numbers
        for layer, heads in enumerate(view["weights"]):
            assert all(on_server[view["kind"], layer, h] == _as_cells(m) for h, m in enumerate(heads))
    _screenshot(browser, tmp_path / f"{served.family}-served.png")

    out = tmp_path / f"{served.family}.html"
    assert _export(ckpts[served.family], out, texts=("abcab", "ba")) == 0
    browser.get(out.as_uri())
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
    _screenshot(browser, tmp_path / f"{served.family}-exported.png")
    assert "asks no server" in browser.find_element(By.ID, "status").text
    assert browser.execute_script("return JSON.parse(document.getElementById('explore-data').textContent)"
                                  ".results[0]") == data
    assert _views_drawn(browser, data["attention"]) == on_server  # every kind, layer and head: the same cells
    # nothing was fetched, and the page's policy would refuse it
    assert all(name.startswith("data:") for name in browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"))
    refused = browser.execute_async_script("const done = arguments[arguments.length - 1];"
                                           "fetch(arguments[0]).then(() => done('fetched'), (e) => done(String(e)));",
                                           served.url + "api/model")
    assert refused != "fetched" and "TypeError" in refused

    # the second input, from the picker
    Select(browser.find_element(By.ID, "inputs")).select_by_value("1")
    second = json.loads(_request(served, "POST", "/api/explore", json.dumps({"text": "ba"}))[2])
    where, cells = _cells(browser)
    view = next(v for v in second["attention"] if v["kind"] == where["kind"])
    assert cells == _as_cells(view["weights"][int(where["layer"])][int(where["head"])])
    assert browser.find_element(By.ID, "text").get_attribute("value") == "ba"


def _svg_cells(path: Path) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], str]]:
    rects = [e for e in ET.parse(path).iter() if e.tag == f"{SVG}rect" and "data-value" in e.attrib]
    return ({(int(r.get("data-q")), int(r.get("data-k"))): float(r.get("data-value")) for r in rects},
            {(int(r.get("data-q")), int(r.get("data-k"))): r.get("fill") for r in rects})


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.mark.parametrize("served", ["seq2seq"], indirect=True)
def test_each_view_saves_as_svg_and_png_and_the_export_button_writes_the_command_s_file(browser, served, ckpts,
                                                                                         tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    data = _open_served(browser, served, "abcab")
    Select(browser.find_element(By.ID, "layer")).select_by_value("1")
    Select(browser.find_element(By.ID, "head")).select_by_value("2")
    folder = tmp_path / "served"
    folder.mkdir()
    _downloads(browser, folder)
    for button in ("save-svg", "save-png", "save-overview-svg", "save-overview-png", "export-html"):
        browser.find_element(By.ID, button).click()
    cross = next(v for v in data["attention"] if v["kind"] == "decoder.cross_attn")
    svg = _downloaded(folder, "decoder.cross_attn-layer1-head2.svg")
    values, fills = _svg_cells(svg)
    assert values == _as_cells(cross["weights"][1][2])
    drawn = browser.execute_script("return [...document.querySelectorAll('#heatmap .cell')].map("
                                   "c => [+c.dataset.q, +c.dataset.k, c.style.backgroundColor])")
    assert fills == {(q, k): colour for q, k, colour in drawn}  # the page's colours, cell for cell
    root = ET.parse(svg).getroot()
    assert _png_size(_downloaded(folder, "decoder.cross_attn-layer1-head2.png")) == (
        2 * int(root.get("width")), 2 * int(root.get("height")))
    overview = ET.parse(_downloaded(folder, "decoder.cross_attn-all.svg")).getroot()
    images = [e for e in overview.iter() if e.tag == f"{SVG}image"]
    assert [(e.get("data-layer"), e.get("data-head")) for e in images] == [(str(l), str(h)) for l in range(2)
                                                                           for h in range(4)]
    assert _png_size(_downloaded(folder, "decoder.cross_attn-all.png")) == (2 * int(overview.get("width")),
                                                                          2 * int(overview.get("height")))

    page = _downloaded(folder, "attention-view.html")  # the view on screen is the one the file opens on
    out = tmp_path / "cli.html"
    assert _export(ckpts["seq2seq"], out, "--kind", "decoder.cross_attn", "--layer", "1", "--head", "2") == 0
    assert page.read_bytes() == out.read_bytes()

    browser.get(page.as_uri())
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
    assert _cells(browser) == ({"kind": "decoder.cross_attn", "layer": "1", "head": "2"},
                               _as_cells(cross["weights"][1][2]))
    offline = tmp_path / "offline"
    offline.mkdir()
    _downloads(browser, offline)
    browser.find_element(By.ID, "save-svg").click()
    browser.find_element(By.ID, "save-png").click()
    assert _downloaded(offline, svg.name).read_bytes() == svg.read_bytes()  # the same picture, from the disk
    assert _png_size(_downloaded(offline, "decoder.cross_attn-layer1-head2.png")) == _png_size(
        folder / "decoder.cross_attn-layer1-head2.png")
    _screenshot(browser, tmp_path / "seq2seq-exported-opened.png")
