"""ONNX with the KV cache, decoded by ``onnx_decode.py`` (onnxruntime and numpy only) exactly as PyTorch decodes.

- GPT: the same greedy tokens for 128 new tokens, a left-padded batch included, and the same logits (1e-4) at
  every step; past ``max_len`` the same sliding window; sampling reproducible with a seed and inside top-k/top-p.
- Encoder-decoder (the shared copy model and its shared export, ``shared_runs.py``): the same whole sentences,
  greedy and beam search, and the same logits at every greedy step.
- The loop runs in a process in which importing torch fails, both as the copy the export writes beside the graphs
  and through the package (whose ``__init__`` files must not pull torch in).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from conftest import tiny
from scratchformer import GPT, generate
from scratchformer.generation import beam_search, greedy_translate

pytest.importorskip("onnxruntime", reason="ONNX checks need onnxruntime (pip install onnxruntime)")
pytest.importorskip("onnxscript", reason="torch's ONNX exporter needs onnxscript (pip install onnx onnxscript)")

from scratchformer.interop import ExportError, export_onnx_cached  # noqa: E402
from scratchformer.interop import onnx_decode as od  # noqa: E402

ATOL = 1e-4
V = 37


@pytest.fixture(scope="module")
def gpt_export(tmp_path_factory):
    torch.manual_seed(0)
    model = GPT(tiny("gpt", max_len=160, dropout=0.1)).train()  # exported in eval mode, handed back training
    folder = export_onnx_cached(model, tmp_path_factory.mktemp("gpt") / "onnx")
    assert model.training
    return model.eval(), folder


def _left_padded(B: int, T: int, lengths: list[int], gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(4, V, (B, T), generator=gen)
    mask = torch.arange(T)[None, :] >= T - torch.tensor(lengths)[:, None]  # (B, T), real tokens on the right
    return ids.masked_fill(~mask, 0), mask.long()


def test_gpt_greedy_tokens_and_every_steps_logits_equal_pytorch(gpt_export):
    model, folder = gpt_export
    ids, mask = _left_padded(3, 12, [12, 5, 9], torch.Generator().manual_seed(1))
    expected = generate(model, ids, 128, attention_mask=mask)
    logits: list[np.ndarray] = []
    got = od.generate(od.CachedModel(folder), ids.numpy(), 128, attention_mask=mask.numpy(), step_logits=logits)
    assert got.shape == (3, 140) and np.array_equal(got, expected.numpy())
    # PyTorch's logit for step s is the full forward's at position 11 + s (positions count real tokens)
    full_mask = torch.cat([mask, torch.ones(3, 128, dtype=torch.long)], 1)
    with torch.no_grad():
        reference = model(expected[:, :-1], full_mask[:, :-1])[:, 11:]  # (3, 128, V)
    steps = np.stack(logits, 1)  # (3, 128, V)
    assert steps.shape == reference.shape and np.abs(steps - reference.numpy()).max() < ATOL
    # a padded row continues exactly as it would alone
    alone = od.generate(od.CachedModel(folder), ids[1:2, 7:].numpy(), 128)
    assert np.array_equal(alone[0], got[1, 7:])


def test_gpt_past_max_len_slides_a_window_as_pytorch_does(tmp_path):
    torch.manual_seed(2)
    model = GPT(tiny("gpt", max_len=24, positional="rotary")).eval()
    folder = export_onnx_cached(model, tmp_path / "onnx")
    ids = torch.randint(4, V, (2, 10))
    expected = generate(model, ids, 40)  # 50 tokens: 26 of them past max_len
    assert np.array_equal(od.generate(od.CachedModel(folder), ids.numpy(), 40), expected.numpy())


def test_sampling_is_seeded_and_stays_inside_top_k_and_top_p(gpt_export):
    _, folder = gpt_export
    model = od.CachedModel(folder)
    prompt = np.array([[5, 6, 7, 8]] * 4)
    a = od.generate(model, prompt, 30, do_sample=True, temperature=1.5, top_k=5, seed=3)
    assert np.array_equal(a, od.generate(model, prompt, 30, do_sample=True, temperature=1.5, top_k=5, seed=3))
    assert not np.array_equal(a, od.generate(model, prompt, 30, do_sample=True, temperature=1.5, top_k=5, seed=4))
    top1 = od.generate(model, prompt, 30, do_sample=True, top_k=1, seed=0)
    assert np.array_equal(top1, od.generate(model, prompt, 30))
    for kwargs in ({"top_k": 3}, {"top_p": 0.3}):
        logits: list[np.ndarray] = []
        out = od.generate(model, prompt, 30, do_sample=True, temperature=2.0, seed=5, step_logits=logits, **kwargs)
        for s, step in enumerate(logits):
            allowed = od.filter_logits(step / 2.0, kwargs.get("top_k"), kwargs.get("top_p")) > -np.inf
            assert allowed[np.arange(4), out[:, 4 + s]].all()
    greedy = od.generate(model, prompt[:1], 30)[0]
    eos = int(greedy[14])
    first = 4 + list(greedy[4:]).index(eos)  # generation stops once the only row has emitted eos
    assert np.array_equal(od.generate(model, prompt[:1], 30, eos_id=eos)[0], greedy[:first + 1])


def test_filter_logits_matches_pytorch():
    from scratchformer.generation import filter_logits

    x = torch.randn(5, 50)
    for k, p in [(7, None), (None, 0.6), (10, 0.8), (None, 0.0)]:
        want = filter_logits(x, k, p) > -torch.inf
        assert np.array_equal(od.filter_logits(x.numpy(), k, p) > -np.inf, want.numpy())


# =================================================================================== encoder-decoder

@pytest.fixture(scope="module")
def seq2seq_export(shared_run):
    """The shared copy model (``shared_runs``: the copy preset, taught to copy strings of 4-8 of the symbols a..j and
    stop, so its outputs are whole sentences) and its shared export with the KV cache (``export --format onnx``,
    which calls ``export_onnx_cached``), with 6 sources of 4-8 symbols (the lengths it learnt) and their ``<eos>``,
    padded."""
    from scratchformer.checkpoints import load_checkpoint

    ckpt = load_checkpoint(shared_run("copy"))
    symbols = torch.tensor(ckpt.tokenizer.encode("abcdefghij"))
    gen = torch.Generator().manual_seed(7)
    lengths = torch.tensor([8, 5, 4, 7, 6, 4])
    src = symbols[torch.randint(len(symbols), (6, 9), generator=gen)]
    src[torch.arange(6), lengths] = 2  # <eos> ends each source, as the copy task's sources end
    mask = torch.arange(9)[None] <= lengths[:, None]
    return ckpt.model, od.CachedModel(shared_run("copy_onnx")), src.masked_fill(~mask, 0), mask


def test_translation_greedy_sentences_and_logits_equal_pytorch(seq2seq_export):
    model, onnx_model, src, mask = seq2seq_export
    expected = greedy_translate(model, src, mask, bos_id=1, eos_id=2)
    logits: list[np.ndarray] = []
    got = od.greedy_translate(onnx_model, src.numpy(), mask.numpy(), step_logits=logits)
    assert got == expected
    # whole sentences: most are their source's copy, stopped at eos below the limit (the model's max_len)
    copies = [out == row[:n].tolist() for out, row, n in zip(got, src, mask.sum(1) - 1)]
    assert sum(copies) >= 5 and all(len(out) < onnx_model.max_len for out in got), got
    tgt_in = torch.ones(6, len(logits), dtype=torch.long)  # bos, then what each row was fed
    for t in range(1, len(logits)):
        tgt_in[:, t] = torch.from_numpy(logits[t - 1].argmax(-1))
    with torch.no_grad():
        reference = model(src, tgt_in, mask)  # (6, steps, V)
    for row, out in enumerate(got):  # every step up to and including the row's eos
        n = len(out) + 1
        assert np.abs(np.stack(logits, 1)[row, :n] - reference[row, :n].numpy()).max() < ATOL


def test_translation_beam_search_equals_pytorch(seq2seq_export):
    model, onnx_model, src, mask = seq2seq_export
    for beam, alpha in [(4, 0.6), (3, 0.0), (2, 1.0)]:
        expected = beam_search(model, src, mask, bos_id=1, eos_id=2, beam_size=beam, length_penalty=alpha)
        assert od.beam_search(onnx_model, src.numpy(), mask.numpy(), beam_size=beam, length_penalty=alpha) == expected
    limited = beam_search(model, src, mask, bos_id=1, eos_id=2, max_new_tokens=3)
    assert od.beam_search(onnx_model, src.numpy(), mask.numpy(), max_new_tokens=3) == limited


# ============================================================================= the folder, no torch

BLOCK_TORCH = textwrap.dedent('''
    import importlib.abc, sys

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "torch":
                raise ImportError("torch is blocked in this process")
            return None

    sys.meta_path.insert(0, NoTorch())
''')


def test_the_loop_runs_where_importing_torch_fails(gpt_export, tmp_path):
    model, folder = gpt_export
    assert sorted(p.name for p in folder.iterdir()) == ["decoder.onnx", "manifest.json", "onnx_decode.py"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["arch"] == "gpt" and manifest["n_layers"] == 2 and manifest["max_len"] == 160
    expected = generate(model, torch.tensor([[5, 9, 11]]), 20)[0].tolist()
    script = tmp_path / "run.py"
    script.write_text(BLOCK_TORCH + textwrap.dedent('''
        import runpy
        try:
            import torch  # noqa: F401
            raise SystemExit("torch imported")
        except ImportError:
            pass
        sys.argv = ["onnx_decode.py", sys.argv[1], "--ids", "5", "9", "11", "--max-new-tokens", "20"]
        runpy.run_path(sys.argv[1] + "/onnx_decode.py", run_name="__main__")
        from scratchformer.interop.onnx_decode import CachedModel, generate  # through the package's __init__s
        print(" ".join(map(str, generate(CachedModel(sys.argv[1]), [[5, 9, 11]], 20)[0])))
        assert not any(m.split(".")[0] == "torch" for m in sys.modules)
    '''))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # a process of its own: a fresh import, in which importing torch fails
    done = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    copied, packaged = done.stdout.split("\n")[:2]
    assert list(map(int, copied.split())) == expected == list(map(int, packaged.split()))


def test_graph_axes_are_dynamic(gpt_export, seq2seq_export):
    import onnxruntime as ort

    _, folder = gpt_export
    inputs = {i.name: i.shape for i in ort.InferenceSession(str(folder / "decoder.onnx")).get_inputs()}
    assert all(isinstance(d, str) for d in inputs["input_ids"] + inputs["attention_mask"])
    assert isinstance(inputs["past_key_0"][0], str) and isinstance(inputs["past_key_0"][2], str)
    assert inputs["past_key_0"][1] == 4 and inputs["past_key_0"][3] == 8  # heads and head size are fixed
    encoder = seq2seq_export[1].sessions["encoder"]
    assert [o.name for o in encoder.get_outputs()] == ["cross_key_0", "cross_value_0", "cross_key_1", "cross_value_1"]


def test_cached_export_refuses_what_it_cannot_do(tmp_path):
    from scratchformer import EncoderClassifier

    with pytest.raises(ExportError, match="onnx-single"):
        export_onnx_cached(EncoderClassifier(tiny("encoder")), tmp_path / "a")
    with pytest.raises(ExportError, match="attention=linear"):
        export_onnx_cached(GPT(tiny("gpt", attention="linear")), tmp_path / "b")
    (tmp_path / "c").mkdir()
    with pytest.raises(ExportError, match="exists"):
        export_onnx_cached(GPT(tiny("gpt")), tmp_path / "c")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and list((tmp_path / "c").iterdir()) == []
