"""The picture of a ViT's attention: the class token's weights land on the right patches of the PNG (read back
from its pixels), and the rollout is Abnar & Zuidema's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer import ModelConfig, ViT

mpimg = pytest.importorskip("matplotlib.image", reason="plots need matplotlib (pip install matplotlib)")
from scratchformer.app.plots import image_attention  # noqa: E402 - after the importorskip

CFG = dict(arch="vit", image_size=8, patch_size=2, channels=1, d_model=16, n_heads=2, n_layers=2, d_ff=32,
           n_classes=3, dropout=0.0)


def test_the_class_tokens_row_is_the_attention_maps_first_row():
    model = ViT(ModelConfig(**CFG)).eval()
    images = torch.rand(3, 1, 8, 8)
    full = image_attention.vit_attention(model, images)
    assert full.shape == (2, 2, 17, 17)
    torch.testing.assert_close(full.sum(-1), torch.ones(2, 2, 17))
    maps = image_attention.attention_maps(model, images[:1])
    torch.testing.assert_close(image_attention.class_token_attention(model, images)[1],
                               maps["encoder.layers.1.self_attn"][0, :, 0])


def test_rollout_mixes_each_layer_with_the_residual_path():
    T = 5
    eye = torch.eye(T).expand(3, 2, T, T)  # every position attends to itself only: nothing moves
    torch.testing.assert_close(image_attention.attention_rollout(eye), torch.eye(T))
    uniform = torch.full((1, 2, T, T), 1 / T)
    torch.testing.assert_close(image_attention.attention_rollout(uniform), 0.5 * torch.eye(T) + 0.5 / T)
    two = image_attention.attention_rollout(torch.full((2, 1, T, T), 1 / T))
    torch.testing.assert_close(two, (0.5 * torch.eye(T) + 0.5 / T) @ (0.5 * torch.eye(T) + 0.5 / T))
    torch.testing.assert_close(two.sum(-1), torch.ones(T))


def test_the_picture_puts_each_patch_weight_on_its_patch(tmp_path, monkeypatch):
    """Weights that grow patch by patch in reading order, drawn over a black image, read back from the PNG
    through the colour map: the first panel of a layer's heads shows the same ramp, top left to bottom right."""
    import matplotlib

    model = ViT(ModelConfig(**CFG)).eval()
    ramp = torch.arange(1, 17, dtype=torch.float)  # patch k (reading order) gets weight k
    maps = torch.full((2, 2, 17, 17), 1 / 17)
    maps[0, 0, 0] = torch.cat([torch.tensor([4.0]), ramp]) / (4 + ramp.sum())  # layer 0, head 0, class token
    monkeypatch.setattr(image_attention, "vit_attention", lambda m, images: maps)
    figures = []
    real_save = image_attention.save
    monkeypatch.setattr(image_attention, "save", lambda fig, path: figures.append(fig) or real_save(fig, path))
    path = image_attention.plot_image_attention(model, torch.zeros(1, 8, 8), tmp_path / "att.png")
    picture = mpimg.imread(path)[..., :3]  # (H px, W px, RGB) in [0, 1]
    n_cols = 1 + 2  # the mean of the heads, then head 0 and head 1
    box = figures[0].axes[n_cols + 1].get_window_extent()  # row 1 (layer 0), column 1 (head 0)
    colours = image_attention.ALPHA * matplotlib.colormaps["inferno"](np.linspace(0, 1, 256))[:, :3]  # over black
    cells = np.zeros((4, 4))
    for r in range(4):
        for c in range(4):
            px = int(box.x0 + (c + 0.5) * box.width / 4)
            py = int(picture.shape[0] - (box.y0 + (4 - r - 0.5) * box.height / 4))  # row 0 at the top
            cells[r, c] = np.abs(colours - picture[py, px]).sum(-1).argmin() / 255  # colour -> weight / max
    np.testing.assert_allclose(cells, (ramp / 16).view(4, 4).numpy(), atol=0.03)
    assert "max 0.11, self 0.03" in figures[0].axes[n_cols + 1].get_title()  # 16 / 140 and 4 / 140


@pytest.mark.slow
def test_a_checkpoints_picture_is_titled_with_its_prediction(tmp_path):
    from PIL import Image

    from scratchformer.checkpoints import load_checkpoint, save_checkpoint

    model = ViT(ModelConfig(**CFG))
    save_checkpoint(tmp_path / "ckpt", model, None, model.config, {"task": "image"}, 1, extra={"labels": list("abc")})
    Image.fromarray(np.tile(np.arange(0, 256, 16, dtype=np.uint8), (16, 1))).save(tmp_path / "ramp.png")
    out = image_attention.plot_checkpoint_image_attention(load_checkpoint(tmp_path / "ckpt"), tmp_path / "ramp.png",
                                                          tmp_path / "att.png")
    picture = mpimg.imread(out)
    assert picture.shape[0] > 400 and picture.shape[1] > 300 and picture[..., :3].std() > 0.05
