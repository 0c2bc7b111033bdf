"""The Vision Transformer: patches (the linear form is the convolution form), shapes, the parameter formula,
invariances (a batch equals its rows one by one; without positions, the order of the patches does not matter),
its configuration's checks, and a checkpoint that keeps it without a tokenizer."""

from __future__ import annotations

import itertools

import pytest
import torch

from scratchformer import ConfigError, ModelConfig, ViT, build_model, count_parameters_formula
from scratchformer.checkpoints import load_checkpoint, save_checkpoint
from scratchformer.nn import MultiHeadAttention
from scratchformer.nn.norms import RMSNorm
from scratchformer.nn.patches import PatchEmbedding, patchify


def vit(**overrides) -> ModelConfig:
    base = dict(arch="vit", image_size=8, patch_size=2, channels=3, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                n_classes=5, dropout=0.0)
    return ModelConfig(**{**base, **overrides})


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------------------------------ patches


@pytest.mark.parametrize("channels,patch,size", [(3, 4, 16), (1, 2, 8), (2, 3, 9)])
def test_patch_embedding_is_a_convolution_whose_kernel_and_stride_are_the_patch(channels, patch, size):
    embed = PatchEmbedding(channels, patch, 24)
    conv = torch.nn.Conv2d(channels, 24, kernel_size=patch, stride=patch)
    with torch.no_grad():  # the same numbers: E's rows are the kernels, flattened channel-major
        conv.weight.copy_(embed.proj.weight.view(24, channels, patch, patch))
        conv.bias.copy_(embed.proj.bias)
    images = torch.randn(3, channels, size, size)
    by_conv = conv(images).flatten(2).transpose(1, 2)  # (B, C, rows, cols) -> (B, N, C), reading order
    torch.testing.assert_close(embed(images), by_conv, atol=1e-5, rtol=1e-5)


def test_patchify_cuts_patches_in_reading_order_channel_major():
    image = torch.arange(2 * 4 * 6).float().view(1, 2, 4, 6)  # (B, ch, H, W)
    patches = patchify(image, 2)  # (1, 6, 8): 2 rows x 3 columns of patches
    assert patches.shape == (1, 6, 8)
    # the patch in row 1, column 2 (index 5): channel 0's 2 x 2 pixels, then channel 1's
    expected = torch.cat([image[0, c, 2:4, 4:6].flatten() for c in range(2)])
    assert torch.equal(patches[0, 5], expected)
    with pytest.raises(ValueError, match="cannot be cut into patches of 4 x 4"):
        patchify(image, 4)


# ------------------------------------------------------------------------------------------------ the model


def test_shapes_and_a_new_model_predicts_every_class_alike():
    model = ViT(vit()).eval()
    images = torch.rand(3, 3, 8, 8)
    assert model.encode(images).shape == (3, 1 + 16, 32)  # the class token and 16 patches
    logits = model(images)
    assert logits.shape == (3, 5)
    assert torch.equal(logits, torch.zeros(3, 5))  # the head starts at zero (the ViT paper's fine-tuning head)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, 8, 8\)"):
        model(torch.rand(3, 1, 8, 8))


def _trained_like(model: ViT) -> ViT:
    """Random numbers in every parameter (a new model's zero head and class token would hide mistakes)."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model.eval()


def test_a_batch_equals_its_images_one_by_one():
    model = _trained_like(ViT(vit(positional="learned")))
    images = torch.rand(4, 3, 8, 8)
    one_by_one = torch.cat([model(images[i:i + 1]) for i in range(4)])
    torch.testing.assert_close(model(images), one_by_one, atol=1e-5, rtol=1e-5)


def _shuffle_patches(images: torch.Tensor, order: torch.Tensor, P: int) -> torch.Tensor:
    """The image with its P x P patches moved: patch i of the result is patch order[i] of ``images``."""
    B, ch, S, _ = images.shape
    side = S // P
    tiles = images.view(B, ch, side, P, side, P).permute(0, 2, 4, 1, 3, 5).reshape(B, side * side, ch, P, P)
    tiles = tiles[:, order].view(B, side, side, ch, P, P).permute(0, 3, 1, 4, 2, 5)
    return tiles.reshape(B, ch, S, S)


def test_without_positions_the_order_of_the_patches_does_not_matter_and_with_them_it_does():
    images = torch.rand(2, 3, 8, 8)
    order = torch.randperm(16, generator=torch.Generator().manual_seed(1))
    shuffled = _shuffle_patches(images, order, 2)
    assert not torch.equal(shuffled, images)
    bag = _trained_like(ViT(vit(positional="none")))
    torch.testing.assert_close(bag(shuffled), bag(images), atol=1e-5, rtol=1e-5)
    placed = _trained_like(ViT(vit(positional="learned")))
    assert (placed(shuffled) - placed(images)).abs().max() > 1e-3


@pytest.mark.parametrize("positional,norm,activation,bias,channels", [
    c for c in itertools.product(["learned", "sinusoidal", "rotary", "none"], ["pre", "post"], ["gelu", "swiglu"],
                                 [True, False], [1, 3])][::3])
def test_formula_counts_every_vit(positional, norm, activation, bias, channels):
    cfg = vit(positional=positional, norm=norm, activation=activation, bias=bias, channels=channels, n_classes=7)
    assert n_params(build_model(cfg)) == count_parameters_formula(cfg)


@pytest.mark.parametrize("setting", [dict(norm_type="rmsnorm"), dict(qk_norm=True), dict(activation="relu2"),
                                     dict(init="zero_out"), dict(norm_type="rmsnorm", qk_norm=True, bias=False)])
def test_the_newer_settings_reach_the_vit_and_its_formula(setting):
    cfg = vit(**setting)
    model = build_model(cfg)
    assert n_params(model) == count_parameters_formula(cfg)
    assert any(isinstance(m, RMSNorm) for m in model.modules()) == (setting.get("norm_type") == "rmsnorm")
    attention = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert attention and all((m.q_norm is not None) == bool(setting.get("qk_norm")) for m in attention)
    if setting.get("init") == "zero_out":
        assert all(not m.out_proj.weight.any() for m in attention)
    logits = model(torch.rand(2, cfg.channels, cfg.image_size, cfg.image_size))
    assert logits.shape == (2, cfg.n_classes) and torch.isfinite(logits).all()


def test_vit_base_has_the_papers_parameter_count():
    cfg = ModelConfig.preset("vit-base")  # ViT-B/16 on 224 x 224 images, 1000 classes
    assert cfg.max_len == 14 * 14 + 1
    assert count_parameters_formula(cfg) == 86_567_656  # timm's vit_base_patch16_224; "86M" in the paper's Table 1


# ------------------------------------------------------------------------------------------------ settings


def test_vit_defaults_are_the_vit_papers():
    cfg = vit()
    assert (cfg.norm, cfg.activation, cfg.positional, cfg.max_len, cfg.n_patches) == ("pre", "gelu", "learned", 17, 16)
    assert ModelConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("kwargs,words", [
    (dict(image_size=10, patch_size=4), ["image_size=10", "patch_size=4", "not divisible"]),
    (dict(image_size=4, patch_size=8), ["patch_size=8", "image_size=4"]),
    (dict(channels=0), ["channels=0"]),
    (dict(image_size=8.0), ["image_size=8.0"]),
    (dict(max_len=64), ["max_len=64", "17"]),
    (dict(vocab_size=100), ["vocab_size", "arch='vit'"]),
    (dict(embedding_norm=True), ["embedding_norm", "arch='vit'"]),
    (dict(pooling="max"), ["pooling='max'", "class token"]),
    (dict(n_classes=0), ["n_classes=0"]),
])
def test_impossible_vits_fail_naming_the_fields(kwargs, words):
    with pytest.raises(ConfigError) as err:
        vit(**kwargs)
    for word in words:
        assert word in str(err.value)


def test_a_checkpoint_keeps_a_vit_without_a_tokenizer(tmp_path):
    model = _trained_like(ViT(vit()))
    save_checkpoint(tmp_path / "ckpt", model, None, model.config, {"task": "image"}, 5, extra={"labels": list("abcde")})
    assert not (tmp_path / "ckpt" / "tokenizer.json").exists()
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.tokenizer is None and loaded.extra["labels"] == list("abcde")
    assert loaded.model_config == model.config
    images = torch.rand(2, 3, 8, 8)
    assert torch.equal(loaded.model(images), model(images))
