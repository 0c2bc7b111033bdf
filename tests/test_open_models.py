"""Today's open models on the same blocks: grouped-query attention, and Llama, Qwen3 and GPT-2 folders (random weights
saved by ``transformers``) loaded as checkpoints and proven equal to ``transformers``: logits (also left-padded), greedy
tokens, cached against uncached; bfloat16 kept; each refusal one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import scratchformer
from chat_folders import LLAMA3, SMALL, V, write_tokenizer  # noqa: F401  (other modules import them from here)
from scratchformer.app.cli import main
from scratchformer.generation import generate
from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.config import ModelConfig
from scratchformer.tokenizers.pretrained import PretrainedTokenizer

transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) is the reference here")

# the folders of shared_run("hf-open") (shared_runs.py) and the transformers class that reads each
CLASSES = {"llama_gqa_untied": "LlamaForCausalLM", "llama_tied": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "gpt2": "GPT2LMHeadModel", "llama_sharded": "LlamaForCausalLM"}


def save(model, folder: Path, **kw) -> Path:
    model.save_pretrained(folder, **kw)
    return folder


@pytest.fixture(scope="module")
def folders(shared_run) -> dict[str, tuple[Path, object]]:
    """name -> (folder, the transformers model read back from it): random folders made once per test run, read-only
    (a test that changes one copies it first)."""
    root = shared_run("hf-open")
    assert (root / "llama_sharded" / "model.safetensors.index.json").is_file()
    return {name: (root / name, getattr(transformers, cls).from_pretrained(root / name).eval())
            for name, cls in CLASSES.items()}


def ids_and_mask() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, V, (2, 24), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[0, :7] = 0  # row 0 left-padded by 7
    return ids, mask


@pytest.mark.parametrize("name", ["llama_gqa_untied", "llama_tied", "qwen3", "gpt2", "llama_sharded"])
def test_a_folder_loads_with_logits_equal_to_transformers_also_left_padded(folders, name):
    folder, reference = folders[name]
    ours = scratchformer.load_model(folder)
    assert isinstance(ours, scratchformer.GPT)
    ids, mask = ids_and_mask()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # what transformers' generate gives a left-padded row
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), reference(ids).logits, atol=1e-4, rtol=0)
        theirs = reference(ids, attention_mask=mask, position_ids=positions).logits
        mine = ours(ids, mask)
    real = mask.bool()
    assert (mine[real] - theirs[real]).abs().max() < 1e-4
    assert (mine[0, 7:] - ours(ids[:1, 7:])[0]).abs().max() < 1e-4  # the padded row equals the row alone


@pytest.mark.parametrize("name", ["llama_gqa_untied", "qwen3"])
def test_64_greedy_tokens_equal_transformers_generate_and_cached_equals_uncached(folders, name):
    folder, reference = folders[name]
    ours = scratchformer.load_model(folder)
    prompt = torch.randint(0, V, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = reference.generate(prompt, max_new_tokens=64, min_new_tokens=64, do_sample=False)
    cached = generate(ours, prompt, 64)
    assert torch.equal(cached, theirs)
    assert torch.equal(generate(ours, prompt, 64, use_cache=False), cached)


def test_the_configs_hold_what_the_folders_say(folders):
    llama = scratchformer.load_model(folders["llama_gqa_untied"][0]).config
    assert (llama.n_heads, llama.kv_heads, llama.head_dim, llama.tie_embeddings) == (4, 2, 16, False)
    assert llama.rope_base == 500000.0 and llama.rope_scaling["rope_type"] == "llama3"
    assert (llama.norm_type, llama.activation, llama.bias, llama.qk_norm) == ("rmsnorm", "swiglu", False, False)
    qwen = scratchformer.load_model(folders["qwen3"][0]).config
    assert qwen.head_dim == 32 != qwen.d_model // qwen.n_heads and qwen.qk_norm and qwen.tie_embeddings


def test_a_config_json_as_transformers_4_writes_it(folders, tmp_path):
    """rope_theta and rope_scaling with "type" (the 4.x form of the hub's folders), written by hand."""
    folder = tmp_path / "llama4x"
    shutil.copytree(folders["llama_gqa_untied"][0], folder)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "rope_scaling": {"type": "llama3", **{k: v for k, v in LLAMA3.items() if k != "rope_type"}},
        "vocab_size": V, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
        "transformers_version": "4.44.2", "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1}))
    ours = scratchformer.load_model(folder)
    reference = folders["llama_gqa_untied"][1]
    ids, _ = ids_and_mask()
    with torch.no_grad():  # the same weights and settings as the folder transformers 5 wrote
        torch.testing.assert_close(ours(ids), reference(ids).logits, atol=1e-4, rtol=0)
    assert ours.config.rope_scaling["factor"] == 8.0


def test_grouped_query_attention_is_multi_head_attention_with_each_kv_head_repeated():
    torch.manual_seed(0)
    C, H, D = 32, 4, 8
    x = torch.randn(2, 5, C)
    today = MultiHeadAttention(C, H)
    same = MultiHeadAttention(C, H, n_kv_heads=H)
    same.load_state_dict(today.state_dict())
    assert torch.equal(same(x, is_causal=True), today(x, is_causal=True))  # n_kv_heads == n_heads: bit for bit
    for kv in (2, 1):  # grouped, and multi-query
        gqa = MultiHeadAttention(C, H, n_kv_heads=kv)
        full = MultiHeadAttention(C, H)
        w, b = gqa.in_proj.weight.detach(), gqa.in_proj.bias.detach()
        q, k, v = w.split([H * D, kv * D, kv * D])
        qb, kb, vb = b.split([H * D, kv * D, kv * D])
        def rep(t: torch.Tensor, kv: int = kv) -> torch.Tensor:  # each K, V head's rows, once per query of its group
            return t.view(kv, D, *t.shape[1:]).repeat_interleave(H // kv, 0).reshape(H * D, *t.shape[1:])
        with torch.no_grad():
            full.in_proj.weight.copy_(torch.cat([q, rep(k), rep(v)]))
            full.in_proj.bias.copy_(torch.cat([qb, rep(kb), rep(vb)]))
            full.out_proj.load_state_dict(gqa.out_proj.state_dict())
        torch.testing.assert_close(gqa(x, is_causal=True), full(x, is_causal=True))


def test_the_kv_cache_shrinks_by_n_heads_over_n_kv_heads():
    sizes = {}
    for kv in (4, 2, 1):
        model = scratchformer.GPT(ModelConfig(arch="gpt", vocab_size=50, d_model=32, n_heads=4, n_kv_heads=kv,
                                              n_layers=2, d_ff=64, max_len=64, positional="rotary"))
        cache = model.new_cache(1)
        sizes[kv] = sum(c.keys.numel() + c.values.numel() for c in cache.self_attn)
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1]


def test_grouped_query_attention_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="not a multiple of n_kv_heads"):
        ModelConfig(arch="gpt", d_model=32, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="attention='softmax'"):
        ModelConfig(arch="gpt", d_model=32, n_heads=4, n_kv_heads=2, attention="linear")
    with pytest.raises(ValueError, match="rope_scaling of type 'yarn' is not supported"):
        ModelConfig(arch="gpt", positional="rotary", rope_scaling={"rope_type": "yarn", "factor": 4.0})


def test_bfloat16_folders_stay_bfloat16_and_decode_and_float32_converts(folders, tmp_path):
    folder = save(folders["qwen3"][1].to(torch.bfloat16), tmp_path / "bf16")
    folders["qwen3"][1].float()
    model = scratchformer.load_model(folder)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    out = generate(model, torch.tensor([[5, 6, 7]]), 8)
    assert out.shape == (1, 11)
    assert {p.dtype for p in scratchformer.load_model(folder, dtype="float32").parameters()} == {torch.float32}


def test_the_tokenizer_comes_from_the_folder_with_no_pad_token(folders):
    tok = scratchformer.checkpoints.load_checkpoint(folders["qwen3"][0]).tokenizer
    assert isinstance(tok, PretrainedTokenizer) and tok.vocab_size == V
    assert tok.hf.token_to_id("<pad>") is None and tok.pad_id == 0  # id 0 is a real token: masks say what pads
    assert tok.decode(tok.encode("the lazy dog")) == "the lazy dog"


def test_generate_explore_and_evaluate_on_a_folder(folders, tmp_path, capsys):
    folder = folders["qwen3"][0]
    assert main(["generate", "--ckpt", str(folder), "--prompt", "the quick", "--max-new-tokens", "5",
                 "--greedy"]) == 0
    assert capsys.readouterr().out.startswith("the quick")
    page = tmp_path / "page.html"
    assert main(["explore", "--ckpt", str(folder), "--export", str(page), "--text", "the lazy dog"]) == 0
    assert "lazy" in page.read_text(encoding="utf-8")
    capsys.readouterr()
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog\n" * 40, encoding="utf-8")
    assert main(["evaluate", "--ckpt", str(folder), "--data", str(text)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unit"] == "tokens" and 1 < report["perplexity"] < 2 * V  # a random model: about uniform


def one_line_error(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def edited(folders, tmp_path, name: str, change) -> Path:
    folder = tmp_path / f"edited_{name}"
    shutil.copytree(folders[name][0], folder)
    change(folder)
    return folder


def config_change(**fields):
    def change(folder: Path) -> None:
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(cfg | fields))
    return change


def wrong_shape(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(folder / "model.safetensors"))
    state["model.layers.1.self_attn.k_proj.weight"] = torch.zeros(64, 64)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})


def pickled(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")


def missing_shard(folder: Path) -> None:
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    next(folder / f for f in sorted(set(index["weight_map"].values()))).unlink()


def mismatched_shard(folder: Path) -> None:
    path = folder / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    first, last = sorted(set(index["weight_map"].values()))[0], sorted(set(index["weight_map"].values()))[-1]
    name = next(n for n, f in index["weight_map"].items() if f == last)
    index["weight_map"][name] = first
    path.write_text(json.dumps(index))


def corrupt(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(b"not a safetensors file" * 10)


def shard_outside(folder: Path) -> None:
    path = folder / "model.safetensors.index.json"
    index = json.loads(path.read_text())
    index["weight_map"] = {name: "../elsewhere.safetensors" for name in index["weight_map"]}
    path.write_text(json.dumps(index))


REFUSALS = {
    "architecture": ("llama_tied", config_change(architectures=["PhiForCausalLM"], model_type="phi"),
                     ["PhiForCausalLM", "supported: LlamaForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel"]),
    "sliding window": ("qwen3", config_change(use_sliding_window=True, sliding_window=64), ["sliding-window"]),
    "mixture of experts": ("llama_tied", config_change(num_local_experts=8), ["mixture-of-experts"]),
    "rope scaling": ("llama_tied", config_change(rope_parameters={"rope_type": "yarn", "factor": 4.0,
                                                                  "rope_theta": 1e4}), ["'yarn'", "supported: llama3"]),
    "wrong shape": ("llama_tied", wrong_shape, ["model.layers.1.self_attn.k_proj.weight", "[64, 64]", "[16, 64]"]),
    "pickle": ("llama_tied", pickled, ["pytorch_model.bin", "pickle", "convert them to safetensors"]),
    "missing shard": ("llama_sharded", missing_shard, ["shard", "is missing"]),
    "mismatched shard": ("llama_sharded", mismatched_shard, ["lacks", "do not match"]),
    "corrupt file": ("llama_tied", corrupt, ["model.safetensors is not a readable safetensors file"]),
    "shard outside the folder": ("llama_sharded", shard_outside, ["outside the folder", "../elsewhere.safetensors"]),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_each_refusal_is_one_line_and_exit_2(folders, tmp_path, capsys, case):
    name, change, needles = REFUSALS[case]
    folder = edited(folders, tmp_path, name, change)
    code = main(["generate", "--ckpt", str(folder), "--prompt", "the", "--max-new-tokens", "2"])
    one_line_error(capsys, code, *needles)


def test_a_folder_without_tokenizer_json_is_refused_by_a_text_command_but_loads_in_python(folders, tmp_path, capsys):
    folder = folders["llama_tied"][0]
    assert not (folder / "tokenizer.json").exists()
    assert isinstance(scratchformer.load_model(folder), scratchformer.GPT)
    for command in (["generate", "--prompt", "the"], ["explore", "--export", "x.html", "--text", "the"]):
        code = main([command[0], "--ckpt", str(folder), *command[1:]])
        one_line_error(capsys, code, "no tokenizer.json", f"'{command[0]}'")
    for kind in ("hf", "gguf"):  # the export carries the tokenizer: refused before any work, nothing written
        code = main(["export", "--ckpt", str(folder), "--format", kind, "--out", str(tmp_path / f"x-{kind}")])
        one_line_error(capsys, code, "no tokenizer.json", f"--format {kind} carries the model's tokenizer")
        assert not (tmp_path / f"x-{kind}").exists()


def test_explain_titles_a_folder_by_its_own_name(folders, capsys):
    folder = folders["qwen3"][0]
    assert main(["explain", "--ckpt", str(folder), "--prompt", "the quick"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"{folder.name}: a language model (GPT), pre-LN, a "
                                                             "Qwen3ForCausalLM folder")
