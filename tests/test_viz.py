"""Plots: every function writes a real, non-blank PNG of a sensible size; attention maps have the right
keys and shapes for each family."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import tiny
from scratchformer import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.settings.config import TrainConfig

mpimg = pytest.importorskip("matplotlib.image", reason="plots need matplotlib (pip install matplotlib)")
from scratchformer.app import plots as viz  # noqa: E402 - after the importorskip

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path: Path, min_size: tuple[int, int] = (400, 300), max_side: int = 4000) -> None:
    """A PNG file of at least ``min_size`` (width, height) pixels that is not one flat colour."""
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = mpimg.imread(path)  # (H, W, 3 or 4) floats in [0, 1]
    h, w = image.shape[:2]
    assert w >= min_size[0] and h >= min_size[1], (w, h)
    assert max(w, h) <= max_side, (w, h)
    rgb = image[..., :3].reshape(-1, 3)
    assert rgb.std(axis=0).max() > 0.05  # not blank
    assert len({tuple(p) for p in (rgb[:: max(1, len(rgb) // 20000)] * 255).astype(int).tolist()}) > 20
    assert not list(path.parent.glob(f".{path.name}.tmp-*"))  # atomic write left nothing behind


def _tokens(n: int, prefix: str) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


# ===================================================================================== attention maps

def test_attention_maps_seq2seq_keys_and_shapes():
    model = Seq2SeqTransformer(tiny("seq2seq", n_heads=4, n_encoder_layers=2, n_decoder_layers=3)).train()
    src, tgt = torch.randint(1, 37, (2, 9)), torch.randint(1, 37, (2, 5))
    maps = viz.attention_maps(model, src=src, tgt=tgt)
    assert model.training  # handed back in its mode
    expected = {f"encoder.layers.{i}.self_attn": (2, 4, 9, 9) for i in range(2)}
    expected |= {f"decoder.layers.{i}.self_attn": (2, 4, 5, 5) for i in range(3)}
    expected |= {f"decoder.layers.{i}.cross_attn": (2, 4, 5, 9) for i in range(3)}
    assert {k: tuple(v.shape) for k, v in maps.items()} == expected
    for name, w in maps.items():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))  # each query's weights sum to 1
        if "decoder" in name and "self_attn" in name:
            assert (w.triu(1) == 0).all()  # causal: no weight on later positions


def test_attention_maps_gpt_and_classifier():
    gpt = GPT(tiny("gpt", n_layers=3))
    maps = viz.attention_maps(gpt, torch.randint(0, 37, (1, 7)))  # positional inputs work too
    assert {k: tuple(v.shape) for k, v in maps.items()} == {f"decoder.layers.{i}.self_attn": (1, 4, 7, 7)
                                                            for i in range(3)}
    clf = EncoderClassifier(tiny("encoder"))
    ids = torch.randint(1, 37, (3, 6))
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[1, 4:] = False
    maps = viz.attention_maps(clf, ids, mask)
    assert {k: tuple(v.shape) for k, v in maps.items()} == {f"encoder.layers.{i}.self_attn": (3, 4, 6, 6)
                                                            for i in range(2)}
    assert (maps["encoder.layers.0.self_attn"][1, :, :, 4:] == 0).all()  # padding gets no attention


def test_plot_attention_each_kind(tmp_path):
    model = Seq2SeqTransformer(tiny("seq2seq"))
    src, tgt = torch.randint(1, 37, (2, 9)), torch.randint(1, 37, (2, 6))
    maps = viz.attention_maps(model, src=src, tgt=tgt)
    s, t = _tokens(9, "s"), ["<bos>", *_tokens(5, "t")]
    for kind, queries, keys in [("encoder.self_attn", s, None), ("decoder.self_attn", t, None),
                                ("decoder.cross_attn", t, s)]:
        path = viz.plot_attention(maps, tmp_path / f"{kind}.png", kind=kind, query_tokens=queries, key_tokens=keys,
                                  title=f"tiny {kind}")
        assert path == tmp_path / f"{kind}.png"
        assert_png(path, min_size=(500, 300))
    # one layer, two heads, second example of the batch: a smaller grid
    small = viz.plot_attention(maps, tmp_path / "small.png", kind="decoder.cross_attn", query_tokens=t, key_tokens=s,
                               layers=[-1], heads=[0, 2], batch_index=1)
    assert_png(small, min_size=(300, 200))
    assert mpimg.imread(small).shape[1] < mpimg.imread(tmp_path / "decoder.cross_attn.png").shape[1]


def test_plot_attention_explains_the_word_start_mark_only_when_the_tokens_have_it(tmp_path, monkeypatch):
    titles = []
    monkeypatch.setattr("scratchformer.app.plots.attention.save",
                        lambda fig, path: titles.append(fig._suptitle.get_text()) or Path(path))
    maps = viz.attention_maps(EncoderClassifier(tiny("encoder")), torch.randint(1, 37, (1, 4)))
    viz.plot_attention(maps, tmp_path / "bpe.png", query_tokens=["\u2581a", "\u2581great", "est", "\u2581film"])
    viz.plot_attention(maps, tmp_path / "chars.png", query_tokens=list("abcd"), title="chars")
    assert "\u2581 marks a token that starts a word" in titles[0]
    assert titles[1] == "chars"


def test_plot_attention_refuses_ambiguous_or_mismatched_input(tmp_path):
    model = Seq2SeqTransformer(tiny("seq2seq"))
    maps = viz.attention_maps(model, src=torch.randint(1, 37, (1, 9)), tgt=torch.randint(1, 37, (1, 6)))
    with pytest.raises(ValueError, match="several kinds.*kind="):
        viz.plot_attention(maps, tmp_path / "a.png", query_tokens=_tokens(6, "t"))
    with pytest.raises(ValueError, match="6 queries x 9 keys"):
        viz.plot_attention(maps, tmp_path / "a.png", kind="decoder.cross_attn", query_tokens=_tokens(6, "t"))
    with pytest.raises(ValueError, match="no 'encoder.cross_attn' maps"):
        viz.plot_attention(maps, tmp_path / "a.png", kind="encoder.cross_attn", query_tokens=_tokens(6, "t"))
    assert list(tmp_path.iterdir()) == []


def test_plot_attention_caps_a_big_grid(tmp_path):
    """12 layers x 16 heads x 90 tokens: a readable subset, not a 192-panel poster."""
    model = GPT(tiny("gpt", n_layers=12, n_heads=16, max_len=96))
    ids = torch.randint(0, 37, (1, 90))
    maps = viz.attention_maps(model, ids)
    path = viz.plot_attention(maps, tmp_path / "big.png", query_tokens=[chr(97 + i % 26) for i in ids[0].tolist()])
    assert_png(path, min_size=(800, 800), max_side=round(viz.MAX_FIGURE_INCHES * 1.3 * viz.DPI))
    assert path.stat().st_size < 1_500_000


# ============================================================================ positions and schedule

def test_plot_positional_encoding(tmp_path):
    path = viz.plot_positional_encoding(64, 32, tmp_path / "pe.png")
    assert_png(path, min_size=(1200, 500))
    with pytest.raises(ValueError, match="even d_model"):
        viz.plot_positional_encoding(64, 31, tmp_path / "bad.png")


@pytest.mark.parametrize("schedule", ["cosine", "inverse_sqrt"])
def test_plot_lr_schedule(tmp_path, schedule):
    cfg = TrainConfig(schedule=schedule, max_steps=500, warmup_steps=50, lr=1e-3)
    assert_png(viz.plot_lr_schedule(cfg, tmp_path / "lr.png"), min_size=(800, 400))


# ============================================================================================ curves

def _write_metrics(run_dir: Path, records: list[dict]) -> None:
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_plot_curves_from_metrics_jsonl(tmp_path):
    records = [{"step": s, "split": "train", "loss": 3.0 / s ** 0.5, "lr": 1e-3, "grad_norm": 1.0}
               for s in range(10, 210, 10)]
    records += [{"step": s, "split": "val", "loss": 2.5 / s ** 0.5, "perplexity": 2.0, "exact_match": s / 250}
                for s in (50, 100, 150, 200)]
    records += [{"step": 100, "split": "val", "loss": "nan", "exact_match": 0.3},  # resumed run, non-finite loss
                {"step": 200, "split": "test", "loss": 0.2, "exact_match": 0.81, "bleu": 35.2}]
    _write_metrics(tmp_path / "run", records)
    path = viz.plot_curves(tmp_path / "run", tmp_path / "curves.png")
    assert_png(path, min_size=(900, 800))  # two panels: loss, then exact match and BLEU

    _write_metrics(tmp_path / "lm", [{"step": s, "split": "train", "loss": 4.0 - s / 100} for s in range(1, 50)])
    only_loss = viz.plot_curves(tmp_path / "lm", tmp_path / "lm.png")
    assert_png(only_loss, min_size=(900, 450))
    assert mpimg.imread(only_loss).shape[0] < mpimg.imread(path).shape[0]  # one panel is shorter


def test_plot_curves_without_the_metric_is_an_error(tmp_path):
    _write_metrics(tmp_path / "run", [{"step": 1, "split": "train", "lr": 1e-3}])
    with pytest.raises(ValueError, match="no loss values"):
        viz.plot_curves(tmp_path / "run", tmp_path / "c.png")
    with pytest.raises(ValueError, match="PNG"):
        viz.plot_lr_schedule(TrainConfig(), tmp_path / "lr.jpg")


@pytest.mark.slow
def test_the_copy_models_cross_attention_picture_shows_the_diagonal(tmp_path, monkeypatch):
    """Read back from the PNG itself: a model that has learnt to copy attends from output i to input i, and the
    picture's cells on the diagonal are the bright ones (colours mapped back to weights through viridis)."""
    import matplotlib

    torch.manual_seed(0)
    V, L, BOS = 12, 6, 1
    model = Seq2SeqTransformer(tiny("seq2seq", vocab_size=V, n_layers=1, d_model=64, d_ff=128, norm="pre"))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(300):
        for group in opt.param_groups:
            group["lr"] = 3e-3 * (1 - step / 300)
        x = torch.randint(2, V, (64, L))
        y = torch.cat([torch.full((64, 1), BOS), x], 1)
        loss = torch.nn.functional.cross_entropy(model(x, y[:, :-1]).reshape(-1, V), x.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    src = torch.tensor([[2, 7, 4, 9, 3, 11]])
    maps = viz.attention_maps(model.eval(), src=src, tgt=torch.cat([torch.tensor([[BOS]]), src[:, :-1]], 1))
    weights = maps["decoder.layers.0.cross_attn"][0]  # (H, T, S)
    head = int(weights.diagonal(dim1=-2, dim2=-1).sum(-1).argmax())
    figures = []
    real_save = viz.attention.save
    monkeypatch.setattr(viz.attention, "save", lambda fig, path: figures.append(fig) or real_save(fig, path))
    path = viz.plot_attention(maps, tmp_path / "copy.png", kind="decoder.cross_attn", heads=[head],
                              query_tokens=[f"out{i}" for i in range(L)], key_tokens=[f"in{i}" for i in range(L)])
    image = mpimg.imread(path)[..., :3]  # (H px, W px, RGB) in [0, 1]
    box = figures[0].axes[0].get_window_extent()  # the heatmap panel, in pixels from the bottom left
    cells = np.zeros((L, L))
    viridis = matplotlib.colormaps["viridis"](np.linspace(0, 1, 256))[:, :3]
    for i in range(L):
        for j in range(L):
            px = int(box.x0 + (j + 0.5) * box.width / L)
            py = int(image.shape[0] - (box.y0 + (L - i - 0.5) * box.height / L))  # row 0 at the top
            cells[i, j] = np.abs(viridis - image[py, px]).sum(-1).argmin() / 255  # colour -> its weight
    assert (cells.argmax(1) == np.arange(L)).sum() >= L - 1, cells.round(2)  # the brightest cell of a row
    diagonal = np.diag(cells)
    assert diagonal.mean() > 3 * cells[~np.eye(L, dtype=bool)].mean(), cells.round(2)
