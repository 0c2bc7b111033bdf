"""Sliding-window attention (``nn/sliding_window.py``) and the models built on it: random Gemma 3 (sliding and global
layers, a window shorter than the sequence) and Mistral folders with ``transformers``' logits (a left-padded row) and
greedy tokens past the window, the decoding engine's ring of W columns (and what serve reserves for it), the cache that
stops growing, the hf export read back by ``transformers``, the GGUF export (its refusals in one line; llama.cpp's
tokens, Gemma 3's and a Mistral's, where it is installed), a GPT from scratch with a window, and the commands on both
folders (generate, serve, explain, explore, evaluate, init_from with trainable= and LoRA)."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import scratchformer
from chat_folders import V, write_chat_tokenizer, write_tokenizer
from conftest import tiny
from scratchformer.app.cli import main
from scratchformer.errors import ConfigError
from scratchformer.generation import Engine, Request, Sampling, Stop
from scratchformer.nn.masks import sliding_window_mask
from scratchformer.nn.sliding_window import SlidingWindowAttention, WindowKVCache

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is the reference here")
needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                 reason="llama.cpp checks need llama-cpp-python (pip install -e \".[llama]\")")
# ISSUE-NOTES' check (its vocabulary that of the folders' tokenizer): a window of 8, shorter than the 24- and
# 60-token sequences; Gemma 3 with both kinds of layer
SHAPE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             sliding_window=8)
GEMMA = dict(SHAPE, vocab_size=V, num_hidden_layers=3, query_pre_attn_scalar=16,
             layer_types=["sliding_attention", "full_attention", "sliding_attention"])
MISTRAL = dict(SHAPE, vocab_size=V, num_hidden_layers=2)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, tuple[Path, object]]:
    """name -> (folder, the transformers model): the notes' Gemma 3 and Mistral, and a Gemma 3 as llama.cpp reads it
    (six layers, the sixth global, the vocabulary of the folders' tokenizer). The norms drawn away from their start
    (N(0, 0.3)), so that Gemma's 1 + w and the norms after each sub-layer count."""
    root = tmp_path_factory.mktemp("sliding")
    torch.manual_seed(0)
    made = {"gemma": transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(**GEMMA)),
            "mistral": transformers.MistralForCausalLM(transformers.MistralConfig(**MISTRAL)),
            "gemma6": transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(
                **SHAPE, vocab_size=V, num_hidden_layers=6, query_pre_attn_scalar=16, max_position_embeddings=256))}
    out = {}
    for name, model in made.items():
        with torch.no_grad():
            for key, p in model.named_parameters():
                if "norm" in key:
                    p.normal_(0, 0.3)
        model.eval().save_pretrained(root / name)
        write_tokenizer(root / name)
        out[name] = (root / name, model)
    return out


@pytest.mark.parametrize("name", ["gemma", "mistral"])
def test_logits_with_a_left_padded_row_and_40_greedy_tokens_past_the_window_equal_transformers(folders, name):
    folder, reference = folders[name]
    ours = scratchformer.load_model(folder)
    assert ours.config.sliding_window == 8 and ours.config.sliding_layers == ([0, 2] if name == "gemma" else [0, 1])
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, :5] = 0  # row 1 left-padded by 5
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as transformers' generate gives them
    with torch.no_grad():
        theirs = reference(ids, attention_mask=mask, position_ids=positions).logits
        mine = ours(ids, attention_mask=mask)
    assert (mine[mask.bool()] - theirs[mask.bool()]).abs().max() < 1e-4
    prompt = torch.randint(0, 256, (1, 20), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = reference.generate(prompt, max_new_tokens=40, min_new_tokens=40, do_sample=False)
    got = scratchformer.generate(ours, prompt, 40, do_sample=False)
    assert torch.equal(got[:, -40:], expected[:, -40:])
    assert torch.equal(scratchformer.generate(ours, prompt, 40, use_cache=False), got)  # cached == recomputed


def test_the_engine_decodes_with_a_ring_of_w_columns_and_gives_generates_tokens(folders):
    model = scratchformer.load_model(folders["gemma"][0])
    prompts = [torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(n)).tolist() for n in (3, 13, 21)]
    engine = Engine(model, max_rows=5, kept=2)
    assert engine.prefixes is None  # prefix reuse is off: a ring keeps its answer's last W positions only
    requests = engine.run([Request(p, 30, Sampling(), Stop(()), n=1 + i % 2) for i, p in enumerate(prompts)])
    widths = [layer.keys.size(2) for layer in engine.pool.layers]
    assert widths[0] == widths[2] == 8 and widths[1] >= 51  # the sliding layers' rows hold W columns, the global all
    for request, prompt in zip(requests, prompts):
        expected = scratchformer.generate(model, torch.tensor([prompt]), 30)[0, len(prompt):].tolist()
        assert all(choice.tokens == expected for choice in request.choices)
    from scratchformer.app.serve.run import cache_plan

    context, kept, reserved = cache_plan(model, 5, 40, None)  # what serve reserves: no rows kept, rings of W
    assert (context, kept) == (40, 0) and reserved == Engine(model, max_rows=5, context=40, kept=kept).pool.nbytes
    assert reserved == 5 * 2 * 2 * 16 * 4 * (40 + 8 + 8)  # 5 rows of keys and values: 40 columns global, 8 twice


def test_a_sliding_layers_cache_stays_at_the_window_however_long_the_sequence():
    model = scratchformer.GPT(tiny("gpt", positional="rotary", sliding_window=8, sliding_layers=[0], max_len=64))
    cache, every = model.new_cache(1, 64), model.new_cache(1, 64, windows=False)  # every: each position kept
    sliding, full = cache.self_attn
    assert isinstance(sliding, WindowKVCache) and type(full).__name__ == type(every.self_attn[0]).__name__ == "KVCache"
    ids = torch.randint(4, model.config.vocab_size, (1, 32))
    with torch.no_grad():
        for c in (cache, every):
            first = model(ids[:, :5], cache=c)[:, -1]
            steps = [model(ids[:, t:t + 1], cache=c)[:, -1] for t in range(5, 32)]  # to 4x the window
        torch.testing.assert_close(model(ids)[:, -1], steps[-1], atol=1e-5, rtol=0)
    assert cache.length == 32 and sliding.keys.size(2) == 7 and sliding.held == 7  # W - 1 past positions, no more
    assert torch.equal(sliding.keys[0], every.self_attn[0].keys[0, :, 25:32])  # the last seven, the same keys
    assert first.shape == (1, model.config.vocab_size)


def test_sliding_window_attention_is_attention_under_the_band_mask():
    torch.manual_seed(0)
    x = torch.randn(2, 11, 32)
    band = sliding_window_mask(11, 11, 4)
    assert band[10].tolist() == [False] * 7 + [True] * 4 and band[2].tolist() == [True] * 3 + [False] * 8
    sliding = SlidingWindowAttention(32, 4, n_kv_heads=2, window=4)
    plain = SlidingWindowAttention(32, 4, n_kv_heads=2, window=100)
    plain.load_state_dict(sliding.state_dict())
    torch.testing.assert_close(sliding(x, is_causal=True), plain(x, mask=band, is_causal=True))


def test_export_hf_gives_gemma3_and_mistral_folders_with_the_same_logits(folders, tmp_path):
    ids = torch.randint(0, 256, (2, 30), generator=torch.Generator().manual_seed(3))
    for name, cls in (("gemma", "Gemma3ForCausalLM"), ("mistral", "MistralForCausalLM")):
        out = tmp_path / name
        assert main(["export", "--ckpt", str(folders[name][0]), "--format", "hf", "--out", str(out)]) == 0
        theirs = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
        assert type(theirs).__name__ == cls and theirs.config.sliding_window == 8
        with torch.no_grad():
            torch.testing.assert_close(theirs(ids).logits, folders[name][1](ids).logits, atol=1e-4, rtol=0)


def one_line(capsys, code: int, *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(needle in err for needle in needles), err


def test_gguf_refuses_what_llama_cpp_would_compute_otherwise_in_one_line(folders, tmp_path, capsys):
    for name, needle in (("gemma", "sliding_layers=[0, 2]"), ("mistral", "sliding_window=8 shorter than max_len")):
        code = main(["export", "--ckpt", str(folders[name][0]), "--format", "gguf", "--out", str(tmp_path / "m.gguf")])
        one_line(capsys, code, needle)
    folder = tmp_path / "local"
    shutil.copytree(folders["gemma6"][0], folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"]["sliding_attention"]["rope_theta"] = 20000.0
    (folder / "config.json").write_text(json.dumps(config))
    code = main(["export", "--ckpt", str(folder), "--format", "gguf", "--out", str(tmp_path / "m.gguf")])
    one_line(capsys, code, "local_rope_base=20000")


def test_a_gemma3_folder_of_images_and_text_is_refused_in_one_line(folders, tmp_path, capsys):
    folder = tmp_path / "images"
    shutil.copytree(folders["gemma"][0], folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["Gemma3ForConditionalGeneration"]}))
    code = main(["generate", "--ckpt", str(folder), "--prompt", "the", "--max-new-tokens", "2"])
    one_line(capsys, code, "only the text model is read", "Gemma3ForCausalLM")


@needs_llama
@pytest.mark.parametrize("name", ["gemma6", "mistral"])
def test_gguf_of_a_folder_llama_cpp_reads_gives_its_greedy_tokens(folders, name, tmp_path):
    """Gemma 3 as llama.cpp's gemma3 (the window of 8 shorter than the 42 tokens); Mistral as its llama, the window
    widened to the context (llama.cpp's llama has none)."""
    from scratchformer.interop.llamacpp import llama_generate

    folder, path = folders[name][0], tmp_path / f"{name}.gguf"
    if name == "mistral":
        folder = tmp_path / "wide"
        shutil.copytree(folders[name][0], folder)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "sliding_window": 64, "max_position_embeddings": 64}))
    assert main(["export", "--ckpt", str(folder), "--format", "gguf", "--out", str(path)]) == 0
    model = scratchformer.load_model(folder)
    assert model.config.sliding_window == (8 if name == "gemma6" else 64)
    prompts = torch.randint(4, V, (2, 12), generator=torch.Generator().manual_seed(2))
    expected = scratchformer.generate(model, prompts, 30, do_sample=False).numpy()
    got = np.array(llama_generate(path, prompts.tolist(), 30, threads=torch.get_num_threads()))
    assert np.array_equal(got, expected)


def test_window_settings_are_checked_in_one_line_and_a_gpt_from_scratch_may_slide(capsys):
    for kw, named in [(dict(sliding_window=-1), "sliding_window=-1"),
                      (dict(sliding_layers=[0]), "needs sliding_window"),
                      (dict(sliding_window=4, sliding_layers=[5]), "sliding_layers=[5]"),
                      (dict(norm_plus_one=True), "norm_plus_one"), (dict(logit_softcap=-1.0), "logit_softcap")]:
        with pytest.raises(ConfigError, match=named.replace("[", r"\[")):
            tiny("gpt", **kw)
    with pytest.raises(ConfigError, match="decoder-only"):
        tiny("seq2seq", sliding_window=4)
    from scratchformer.settings.values import split_settings

    cfg, _ = split_settings({"task": "lm", "sliding_window": "16", "sliding_layers": "0", "n_layers": "2"})
    assert (cfg.sliding_window, cfg.sliding_layers) == (16, [0])
    model = scratchformer.GPT(cfg)
    assert [type(layer.self_attn).__name__ for layer in model.decoder.layers] == ["SlidingWindowAttention",
                                                                                 "MultiHeadAttention"]
    assert main(["explain", "--preset", "gpt-char-small", "n_layers=2", "sliding_window=16", "sliding_layers=0"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "self-attention" in line]
    assert ["sliding window 16" in row for row in rows] == [True, False]  # explain names the sliding layer


def start_server(folder: Path, log: Path) -> subprocess.Popen:
    """``scratchformer serve`` in a process of its own (port 0: a free one), as a user starts it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", "--ckpt", str(folder), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=log.open("w"), text=True, env=env)


def served_chat(proc: subprocess.Popen, log: Path, question: str, tokens: int) -> tuple[str, list[dict]]:
    """What a started server says at start, and its replies to one greedy chat asked twice; then stopped by
    SIGTERM."""
    lines, replies = [""], []
    try:
        while not lines[-1].startswith("OpenAI API at"):
            lines.append(proc.stdout.readline())
            assert lines[-1], log.read_text()[-2000:]
        conn = http.client.HTTPConnection("127.0.0.1", int(lines[-1].split("/v1")[0].rsplit(":", 1)[1]), timeout=60)
        body = {"messages": [{"role": "user", "content": question}], "max_tokens": tokens, "temperature": 0}
        for _ in range(2):
            conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
            replies.append(json.loads(conn.getresponse().read()))
        conn.close()  # an idle connection open would hold its shutdown for seconds
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.communicate(timeout=30)[1] is None and proc.returncode == 0 and "Traceback" not in log.read_text()
    return "".join(lines), replies


@pytest.mark.parametrize("name", ["gemma", "mistral"])
def test_the_commands_on_a_gemma3_and_a_mistral_folder(folders, name, tmp_path, capsys, monkeypatch, request):
    """generate (a chat), explain, explore, evaluate on a benchmark, fine-tuning from the folder (init_from with
    trainable=last:1, and LoRA) and serve: its chat answer is generate's, and it says it reuses no prefixes."""
    folder, text, bench = tmp_path / name, tmp_path / "text.txt", tmp_path / "mine.jsonl"
    shutil.copytree(folders[name][0], folder)
    config = json.loads((folder / "config.json").read_text())
    config |= {"max_position_embeddings": 64, **write_chat_tokenizer(folder)}  # a chat template; a short context
    (folder / "config.json").write_text(json.dumps(config))
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 40, encoding="utf-8")
    bench.write_text("".join(json.dumps({"context": c, "choices": ["dog", "fox"], "answer": 0}) + "\n"
                             for c in ("the lazy", "the brown", "the quick")), encoding="utf-8")
    server = start_server(folder, tmp_path / "serve.log")  # it loads while the commands below run
    request.addfinalizer(server.kill)  # (nothing once it stopped)
    monkeypatch.chdir(tmp_path)  # evaluate writes a folder's results in the current directory
    assert main(["explain", "--ckpt", str(folder), "--prompt", "the quick"]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: a language model (GPT), pre-LN, a {config['architectures'][0]}")
    assert main(["explore", "--ckpt", str(folder), "--export", str(tmp_path / "p.html"), "--text", "the lazy"]) == 0
    assert "lazy" in (tmp_path / "p.html").read_text(encoding="utf-8")
    assert main(["evaluate", "--ckpt", str(folder), "--benchmark", str(bench), "--limit", "2"]) == 0
    assert json.loads((tmp_path / "benchmarks.json").read_text())["mine"]["n"] == 2
    base, threads = scratchformer.load_model(folder), torch.get_num_threads()
    try:
        for run, extra in (("last", "trainable=last:1"), ("lora", "lora_rank=4")):
            assert main(["train", "task=lm", f"init_from={folder}", "--data", str(text), extra, "lr=1e-2",
                         "max_steps=2", "eval_every=2", "max_len=32", "num_threads=1", "--quiet", "--out",
                         str(tmp_path / run)]) == 0
    finally:
        torch.set_num_threads(threads)
    keys = ("sliding_window", "sliding_layers", "local_rope_base", "norm_plus_one", "sandwich_norm", "max_len")
    last = f".layers.{base.config.n_layers - 1}."
    for run, frozen, trained in (("last", ".layers.0.", last), ("lora", "", "self_attn.in_proj")):
        model = scratchformer.load_model(tmp_path / run / "last")  # LoRA's adapters merged into W^Q and W^V
        assert [getattr(model.config, k) for k in keys] == [getattr(base.config, k) for k in keys]
        for key, weight in base.state_dict().items():
            if trained in key or frozen in key:
                assert torch.equal(model.state_dict()[key], weight) == (trained not in key), (run, key)
    assert main(["generate", "--ckpt", str(tmp_path / "lora"), "--prompt", "the quick", "--max-new-tokens", "4"]) == 0
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(folder), "--instruction", "Add 1 and 2.", "--greedy",
                 "--max-new-tokens", "8"]) == 0
    answer = capsys.readouterr().out.strip()
    said, replies = served_chat(server, tmp_path / "serve.log", "Add 1 and 2.", 8)
    assert "no prefix reuse (its sliding layers keep a ring of their last 8 positions)" in said, said
    assert [r["choices"][0]["message"]["content"].strip() for r in replies] == [answer] * 2, (replies, answer)
    assert replies[1]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0 < replies[1]["usage"]["prompt_tokens"]
