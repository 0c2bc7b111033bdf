"""Named model configurations (``ModelConfig.preset(name)``, ``scratchformer params --preset``): plain settings,
checked when a ``ModelConfig`` is made from them."""

from __future__ import annotations

from typing import Any

# Named configurations. The two paper models use a 37,000-token shared BPE vocabulary (§5.1).
PRESETS: dict[str, dict[str, Any]] = {
    # Table 3, "base": 65M parameters in the paper.
    "paper-base": dict(arch="seq2seq", vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                       dropout=0.1),
    # Table 3, "big": 213M parameters in the paper.
    "paper-big": dict(arch="seq2seq", vocab_size=37000, d_model=1024, n_heads=16, n_layers=6, d_ff=4096,
                      dropout=0.3),
    # GPT-2 small (124M): the architecture Hugging Face's GPT2LMHeadModel implements.
    "gpt2-small": dict(arch="gpt", vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072,
                       max_len=1024, dropout=0.1, activation="gelu_tanh"),
    # nanoGPT's CPU Tiny Shakespeare model (block 64, 4 layers, 4 heads, d 128).
    "gpt-char-small": dict(arch="gpt", vocab_size=65, d_model=128, n_heads=4, n_layers=4, d_ff=512,
                           max_len=64, dropout=0.0),
    # A small sentence classifier.
    "encoder-small": dict(arch="encoder", vocab_size=8000, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                          max_len=128, dropout=0.1),
    # ViT-Base/16 (Dosovitskiy et al. 2021, Table 1): 86M parameters on 224 x 224 RGB images, 1000 classes.
    "vit-base": dict(arch="vit", d_model=768, n_heads=12, n_layers=12, d_ff=3072, image_size=224, patch_size=16,
                     channels=3, n_classes=1000, dropout=0.1, layer_norm_eps=1e-6),
}
