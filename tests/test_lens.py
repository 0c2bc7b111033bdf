"""Each layer's prediction (the logit lens, ``models/lens.py``): the residual stream it reads is the model's own,
after the embeddings and after each block; its last layer is the model's own output distribution (to 1e-6), for
post-LN and pre-LN models of every family; the explorer's numbers (``lens_view.py``) and ``explain --ckpt RUN
--prompt TEXT`` show it; and in headless Chromium the served page and the exported ``file://`` page of a trained
shakespeare-char model draw its layer table, the exported one asking nothing of the network."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
import torch

import test_explore
from conftest import inputs_for, needs_data, tiny, tiny_model
from scratchformer import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.app.cli import main
from scratchformer.app.explore import explore, make_server
from scratchformer.app.explore.lens_view import LENS_TOP_K
from scratchformer.checkpoints import load_checkpoint
from scratchformer.families import FAMILIES, family
from scratchformer.models.lens import class_lens, logit_lens, read_out, residual_stream
from scratchformer.nn.recording import record_attention
from scratchformer.tokenizers import BOS_ID
from test_explore import _request, _save
from test_explore_export import _screenshot, _vit

browser = test_explore.browser  # the headless Chromium fixture, shared

# (family, settings): post-LN and pre-LN of each family, and the variants that change what the stream holds
MODELS = [
    ("gpt", {}),  # pre-LN, GPT-2's defaults
    ("gpt", {"norm": "post"}),
    ("gpt", {"norm_type": "rmsnorm", "positional": "rotary", "activation": "swiglu", "qk_norm": True,
             "tie_embeddings": False}),
    ("gpt", {"attention": "linear"}),
    ("seq2seq", {}),  # post-LN, the paper's
    ("seq2seq", {"norm": "pre", "tgt_vocab_size": 29, "tie_embeddings": True}),
    ("encoder", {"n_classes": 3}),  # post-LN, mean pooling
    ("encoder", {"n_classes": 3, "norm": "pre", "pooling": "cls", "embedding_norm": True}),
    ("encoder", {"n_classes": 3, "pooling": "pooler", "attention_window": 2}),
    ("encoder", {"n_classes": 3, "norm": "pre", "pooling": "max"}),
]
CLASSES = {"gpt": GPT, "seq2seq": Seq2SeqTransformer, "encoder": EncoderClassifier}


def _model_and_inputs(arch: str, settings: dict) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    """A tiny random model (dropout on, to show the lens reads it in eval mode) and a batch of two inputs; an
    encoder's second row ends in padding, an encoder-decoder's second source too."""
    model = CLASSES[arch](tiny(arch, dropout=0.1, **settings))
    ids = torch.randint(4, 29, (2, 9))
    if arch == "seq2seq":
        ids[1, -3:] = 0
        return model, {"src": ids, "tgt": torch.randint(4, 29, (2, 6))}
    if arch == "encoder":
        ids[1, -3:] = 0
    return model, {"input_ids": ids}


def _own_output(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """The model's own output distribution: ``(B, T, V)`` or a classifier's ``(B, K)``."""
    with torch.no_grad():
        if "src" in inputs:
            return model(inputs["src"], inputs["tgt"]).softmax(-1)
        return model(inputs["input_ids"]).softmax(-1)


@pytest.mark.parametrize(("arch", "settings"), MODELS, ids=lambda v: v if isinstance(v, str) else
                         ",".join(f"{k}={x}" for k, x in v.items()) or "defaults")
def test_the_last_layer_of_the_lens_is_the_model_s_own_output(arch, settings):
    model, inputs = _model_and_inputs(arch, settings)
    model.train()  # the lens puts it in eval mode for itself, and back
    n = model.config.n_decoder_layers if arch == "seq2seq" else model.config.n_layers
    if arch == "encoder":
        lens = class_lens(model, inputs["input_ids"])  # (L + 1, B, K)
        assert model.training and lens.shape == (n + 1, 2, 3)
        model.eval()
        expected = _own_output(model, inputs)
        assert (lens[-1] - expected).abs().max() < 1e-6
        assert all((lens[i] - expected).abs().max() > 1e-4 for i in range(n))  # earlier layers differ
        return
    lens = logit_lens(model, **inputs, top_k=4)
    assert model.training
    model.eval()
    expected = _own_output(model, inputs)  # (B, T, V)
    top = expected.topk(4, dim=-1)
    T = expected.size(1)
    assert lens.top_probs.shape == lens.top_ids.shape == (n + 1, 2, T, 4) and lens.final_probs.shape == (n + 1, 2, T)
    assert (lens.top_probs[-1] - top.values).abs().max() < 1e-6 and torch.equal(lens.top_ids[-1], top.indices)
    assert torch.equal(lens.final_ids, expected.argmax(-1))
    assert (lens.final_probs[-1] - expected.amax(-1)).abs().max() < 1e-6
    # the whole distribution, read from the last state of the stream
    with torch.no_grad():
        every = [read_out(model, state).softmax(-1) for state in residual_stream(model, **inputs)]
    assert every[-1].shape == expected.shape and (every[-1] - expected).abs().max() < 1e-6
    assert all((every[i] - expected).abs().max() > 1e-5 for i in range(n))  # earlier layers differ


@pytest.mark.parametrize(("arch", "settings"), [MODELS[0], MODELS[1], MODELS[4], MODELS[8]],
                         ids=["gpt", "gpt-post", "seq2seq", "encoder-window"])
def test_the_stream_is_what_the_model_s_own_blocks_output(arch, settings):
    """Each state equals what the embeddings and each block hand on in the model's own forward (read with
    hooks here, in the test only)."""
    model, inputs = _model_and_inputs(arch, settings)
    model.eval()
    embed = model.tgt_embed if arch == "seq2seq" else model.embed
    blocks = model.encoder.layers if arch == "encoder" else model.decoder.layers
    seen = []
    hooks = [m.register_forward_hook(lambda mod, args, out: seen.append(out)) for m in (embed, *blocks)]
    try:
        _own_output(model, inputs)
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        states = residual_stream(model, **inputs)
    assert len(states) == len(seen) == len(blocks) + 1
    for state, out in zip(states, seen):
        assert torch.equal(state, out)


@pytest.mark.parametrize("arch", FAMILIES)
def test_every_family_of_the_registry_has_a_lens_ending_in_its_own_output(arch):
    """The family registry's list, so a family added later is tested here: the stream is what the model's own
    embeddings and blocks hand on in its forward (hooks of the test's own), and the last layer's read-out is the
    model's own output distribution (next tokens, or classes) while earlier layers differ."""
    entry = family(arch)
    model = tiny_model(arch, dropout=0.1).eval()  # a ViT's head drawn at random: at zero, every layer is uniform
    inputs = inputs_for(model.config)
    embed = model.get_submodule(entry.parts.embeddings)
    blocks = model.get_submodule(entry.parts.blocks)
    seen = []
    hooks = [m.register_forward_hook(lambda mod, args, out: seen.append(out)) for m in (embed, *blocks)]
    try:
        with torch.no_grad():
            own = model(**inputs).softmax(-1)
    finally:
        for h in hooks:
            h.remove()
    with torch.no_grad():
        states = residual_stream(model, **inputs)
    assert len(states) == len(seen) == len(blocks) + 1 and all(torch.equal(a, b) for a, b in zip(states, seen))
    model.train()  # the lens reads it in eval mode, and hands it back as it was
    if entry.lens == "tokens":
        lens = logit_lens(model, **inputs)
        layers = lens.final_probs  # (L + 1, B, T): each layer's probability of the model's own prediction
        assert torch.equal(lens.final_ids, own.argmax(-1)) and (layers[-1] - own.amax(-1)).abs().max() < 1e-6
    else:
        layers = class_lens(model, next(iter(inputs.values())))  # (L + 1, B, K)
        assert (layers[-1] - own).abs().max() < 1e-6
    assert model.training and layers.shape[0] == len(blocks) + 1
    assert all((layers[i] - layers[-1]).abs().max() > 1e-6 for i in range(len(blocks)))


def test_the_lens_keeps_nothing_and_lets_attention_be_recorded_in_the_same_pass():
    model, inputs = _model_and_inputs("gpt", {})
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with record_attention(model) as maps:
        lens = logit_lens(model, **inputs)
    assert sorted(maps) == [f"decoder.layers.{i}.self_attn" for i in range(2)]
    assert lens.top_ids.shape[-1] == 5
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(TypeError, match="class_lens"):
        logit_lens(CLASSES["encoder"](tiny("encoder")), torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="longer than max_len"):
        logit_lens(model, torch.ones(1, 49, dtype=torch.long))


# ====================================================================================== the explorer


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory) -> dict[str, Path]:
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("lens")
    (root / "post").mkdir()
    return {"vit": _vit(root), "gpt": _save(root, "gpt", "lm"),
            "gpt-post": _save(root / "post", "gpt", "lm", norm="post"), "seq2seq": _save(root, "seq2seq", "copy"),
            "encoder": _save(root, "encoder", "classify", n_classes=3), "mlm": _save(root, "encoder", "mlm")}


def test_the_explorer_s_lens_is_the_model_s_prediction_layer_by_layer(ckpts):
    ckpt = load_checkpoint(ckpts["gpt"])
    view = explore(ckpt, "abc de", top_k=3, max_new_tokens=0)
    lens = view["lens"]
    assert lens["kind"] == "tokens" and "logit lens" in lens["title"] and "layer by layer" in lens["title"]
    assert lens["rows"] == ["embeddings", "layer 0", "layer 1"] and lens["positions"] == list("abc de")
    assert len(lens["top"]) == 3 and all(len(row) == 6 and len(row[0]) == LENS_TOP_K for row in lens["top"])
    assert "final LayerNorm" in lens["readout"]
    # the last position's prediction is the next-token list's first, its last row the same numbers
    assert lens["final"][-1]["token"] == view["next_tokens"][0]["token"]
    assert [c["token"] for c in lens["top"][-1][-1][:3]] == [t["token"] for t in view["next_tokens"]]
    assert lens["final_probs"][-1][-1] == view["next_tokens"][0]["prob"]
    with torch.no_grad():
        probs = ckpt.model(torch.tensor([ckpt.tokenizer.encode("abc de")])).softmax(-1)[0]  # (T, V)
    got = torch.tensor([[c["prob"] for c in cell] for cell in lens["top"][-1]])
    assert (got - probs.topk(LENS_TOP_K, dim=-1).values).abs().max() < 1e-6

    post = explore(load_checkpoint(ckpts["gpt-post"]), "abc", max_new_tokens=0)["lens"]
    assert "post-LN" in post["readout"] and "no final norm" in post["readout"]


def test_an_encoder_decoder_s_lens_reads_its_decoder_over_the_output(ckpts):
    ckpt = load_checkpoint(ckpts["seq2seq"])
    view = explore(ckpt, "abc", target="cab")
    lens = view["lens"]
    assert lens["positions"] == ["<bos>", "c", "a", "b"] and lens["rows"] == ["embeddings", "layer 0", "layer 1"]
    src = torch.tensor([ckpt.tokenizer.encode("abc", add_eos=True)])
    with torch.no_grad():
        probs = ckpt.model(src, torch.tensor([[BOS_ID, *ckpt.tokenizer.encode("cab")]])).softmax(-1)[0]
    assert [f["id"] for f in lens["final"]] == probs.argmax(-1).tolist()
    assert max(abs(p - q) for p, q in zip(lens["final_probs"][-1], probs.amax(-1).tolist())) < 1e-6


def test_a_classifier_s_lens_is_its_class_probabilities_and_a_pretrained_encoder_says_why_none(ckpts):
    view = explore(load_checkpoint(ckpts["encoder"]), "a bad jig.")
    lens = view["lens"]
    assert lens["kind"] == "classes" and lens["labels"] == ["neg", "neutral", "pos"]
    assert lens["rows"] == ["embeddings", "layer 0", "layer 1"] and "no next token" in lens["note"]
    assert lens["probs"][-1] == [c["prob"] for c in view["classes"]]
    mlm = explore(load_checkpoint(ckpts["mlm"]), "a bad jig.")["lens"]
    assert mlm["kind"] == "none" and "no next token" in mlm["note"] and "untrained" in mlm["note"]


def test_explain_prints_the_lens_of_a_checkpoint_layer_by_layer(ckpts, capsys):
    assert main(["explain", "--ckpt", str(ckpts["gpt"]), "--prompt", "abc"]) == 0
    out = capsys.readouterr().out
    assert "layer by layer" in out and "logit lens" in out and "input: 3 tokens 'a' 'b' 'c'" in out
    view = explore(load_checkpoint(ckpts["gpt"]), "abc", max_new_tokens=0)["lens"]
    for t in range(3):  # a block per position, a line per layer, with the page's numbers
        block = out.split(f"position {t} reads")[1].split("position")[0]
        for r, row in enumerate(["embeddings", "layer 0", "layer 1"]):
            line = next(ln for ln in block.splitlines() if ln.strip().startswith(row))
            first = view["top"][r][t][0]
            assert f"p(final) {view['final_probs'][r][t]:.4f}" in line
            assert f"{first['token']!r} {first['prob']:.4f}" in line

    assert main(["explain", "--ckpt", str(ckpts["encoder"]), "--prompt", "a bad jig."]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^layer 1 +[\d.]+ +[\d.]+ +[\d.]+$", out, re.M) and "the model's own answer" in out
    assert main(["explain", "--ckpt", str(ckpts["seq2seq"]), "--prompt", "abc"]) == 0
    assert "position 0 reads '<bos>'" in capsys.readouterr().out


def test_explain_reads_an_image_classifier_layer_by_layer_on_an_image_file(ckpts, tmp_path, capsys):
    image = pytest.importorskip("PIL.Image", reason="the images extra: it reads the image file")
    path = tmp_path / "eight.png"
    image.fromarray(torch.randint(0, 256, (8, 8, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
                    .numpy()).save(path)
    assert main(["explain", "--ckpt", str(ckpts["vit"]), "--image", str(path)]) == 0
    out = capsys.readouterr().out
    assert "an image classifier (ViT)" in out and "eight.png read as 8 x 8 x 3: 4 patches of 4 x 4" in out
    assert "Class probabilities, layer by layer" in out and "its first token ([CLS], or a class token)" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("embeddings", "layer "))]
    assert [r[:2] for r in rows] == [["embeddings", "0.5000"], ["layer", "0"]]  # a new head: uniform at first
    assert main(["classify", "--ckpt", str(ckpts["vit"]), str(path)]) == 0
    label, prob = capsys.readouterr().out.split()
    assert f"the model's own answer (the last row): {label}" in out and f"{float(prob):.4f}" in rows[-1]


@pytest.mark.parametrize(("words", "needle"), [
    (["--ckpt", "{gpt}"], "reads text: explain --ckpt RUN --prompt TEXT"),
    (["--prompt", "abc"], "--prompt and --image go with --ckpt"),
    (["--image", "x.png"], "--prompt and --image go with --ckpt"),
    (["--ckpt", "{gpt}", "--image", "x.png"], "reads text: explain --ckpt RUN --prompt TEXT"),
    (["--ckpt", "{gpt}", "--prompt", "abc", "n_layers=3"], "n_layers=3 describes a fresh model"),
    (["--ckpt", "{gpt}", "--prompt", "abc", "--preset", "copy"], "--preset describes a fresh model"),
    (["--ckpt", "{gpt}", "--prompt", "xyz"], "vocabulary has no"),
    (["--ckpt", "{gpt}", "--prompt", "a" * 25], "25 tokens; the explorer takes at most 24"),
    (["--ckpt", "{gpt}/nope", "--prompt", "abc"], "no checkpoint"),
    (["--ckpt", "{vit}", "--prompt", "abc"], "reads an image: explain --ckpt RUN --image FILE"),
    (["--ckpt", "{vit}"], "reads an image: explain --ckpt RUN --image FILE"),
])
def test_explain_mistakes_end_in_one_line(ckpts, capsys, words, needle):
    assert main(["explain", *[w.format(gpt=ckpts["gpt"], vit=ckpts["vit"]) for w in words]]) == 2
    captured = capsys.readouterr()
    assert needle in captured.err and captured.err.count("\n") == 1 and not captured.out


# ===================================================================================== the browser


@pytest.fixture(scope="module")
def shakespeare(shared_run) -> Path:
    """A trained shakespeare-char model: the preset, 200 of its 2,000 steps (the shared ``shakespeare``, read only)."""
    return shared_run("shakespeare")


PROMPT = "ROMEO: But soft, what light"


def _lens_drawn(driver) -> dict:
    """The lens table as drawn: row names, each cell's top token and colour value, the prediction row."""
    return driver.execute_script("""
        const table = document.getElementById('lens-table');
        const rows = [...table.querySelectorAll('tbody tr')];
        return {rows: rows.map(r => r.dataset.row),
                heads: rows.map(r => r.querySelector('th').textContent),
                top: rows.map(r => [...r.querySelectorAll('td')].map(c => c.dataset.top)),
                prob: rows.map(r => [...r.querySelectorAll('td')].map(c => Number(c.dataset.prob))),
                final: [...table.querySelectorAll('tfoot td')].map(c => c.dataset.token),
                title: document.getElementById('lens-title').textContent};""")


def _assert_drawn(drawn: dict, lens: dict) -> None:
    assert drawn["rows"] == drawn["heads"] == ["embeddings", "layer 0", "layer 1", "layer 2", "layer 3"]
    assert drawn["rows"] == lens["rows"] and "logit lens" in drawn["title"]
    assert drawn["top"] == [[cell[0]["token"] for cell in row] for row in lens["top"]]
    assert drawn["prob"] == lens["final_probs"]
    assert drawn["final"] == [f["token"] for f in lens["final"]]


@pytest.mark.slow
@needs_data("tinyshakespeare.txt")
def test_the_served_and_exported_pages_show_a_trained_model_s_layer_table(browser, shakespeare, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = make_server(str(shakespeare), port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.get(server.url)
        WebDriverWait(browser, 20).until(lambda d: "·" in d.find_element(By.ID, "model-summary").text)
        browser.find_element(By.ID, "text").send_keys(PROMPT)
        browser.find_element(By.ID, "run").click()
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#lens-table td"))
        data = json.loads(_request(server, "POST", "/api/explore", json.dumps({"text": PROMPT}))[2])
    finally:
        server.shutdown()
        server.server_close()
    lens = data["lens"]
    _assert_drawn(_lens_drawn(browser), lens)
    # trained: the last layer is surer of its prediction than the embeddings are, on average over positions
    assert sum(lens["final_probs"][-1]) > sum(lens["final_probs"][0])
    # a click on a layer's row draws that layer's attention, and the row is marked
    browser.find_element(By.CSS_SELECTOR, '#lens-table tr[data-row="layer 2"] th').click()
    assert browser.find_element(By.ID, "heatmap").get_attribute("data-layer") == "2"
    assert browser.find_element(By.CSS_SELECTOR, "#lens-table tr.current").get_attribute("data-row") == "layer 2"
    browser.execute_script("document.getElementById('lens-card').scrollIntoView()")
    _screenshot(browser, tmp_path / "lens-served.png")

    out = tmp_path / "lens.html"
    assert main(["explore", "--ckpt", str(shakespeare), "--text", PROMPT, "--export", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "logit lens" in page and all(f'"layer {i}"' in page for i in range(4))
    browser.get(out.as_uri())
    WebDriverWait(browser, 20).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#lens-table td"))
    _assert_drawn(_lens_drawn(browser), lens)
    assert "layer by layer" in browser.find_element(By.ID, "lens-card").text
    browser.execute_script("document.getElementById('lens-card').scrollIntoView()")
    _screenshot(browser, tmp_path / "lens-exported.png")
    # nothing was fetched, and the page's policy would refuse a fetch
    assert all(name.startswith("data:") for name in browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"))
    refused = browser.execute_async_script("const done = arguments[arguments.length - 1];"
                                           "fetch('http://127.0.0.1:9/').then(() => done('fetched'),"
                                           " (e) => done(String(e)));")
    assert refused != "fetched" and "TypeError" in refused

