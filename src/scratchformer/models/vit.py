"""Vision Transformer (ViT; Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words", §3.1, equations 1-4).

The encoder-only family on pixels instead of token ids: the image is cut into patches, each patch is
embedded linearly, a learned class token is put in front, positions are added, and the paper's encoder
stack (here pre-LN, as the ViT paper) reads the sequence; the class token's final state, after the
stack's last LayerNorm, goes through a linear head::

    images (B, ch, H, W) -> PatchEmbeddings -> (B, 1 + N, C) -> Encoder -> (B, 1 + N, C)
                         -> [:, 0] the class token -> (B, C) -> linear -> (B, n_classes)

Every image has the same number of patches, so there is no padding and no mask: each patch attends to
every other patch and to the class token from the first layer on. Deviations from the ViT paper: the head
is one linear layer (the paper's fine-tuning head; its pre-training head has a tanh hidden layer), and
dropout is applied before the head as in ``EncoderClassifier``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.models.init import check_family, init_weights
from scratchformer.nn.config import ModelConfig
from scratchformer.nn.layers import Encoder
from scratchformer.nn.patches import PatchEmbeddings


class ViT(nn.Module):
    """``forward(images (B, ch, H, W)) -> class logits (B, n_classes)``; ``encode`` -> ``(B, 1 + N, C)``.

    ``images``: floats, ``image_size`` x ``image_size`` pixels with ``channels`` channels (the data layer
    scales pixels to [0, 1]).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        check_family(self, config)
        self.config = config
        self.embed = PatchEmbeddings(config)
        self.encoder = Encoder(config, config.n_layers)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(config.d_model, config.n_classes)
        init_weights(self, config)

    def encode(self, images: Tensor) -> Tensor:
        """``images (B, ch, H, W)`` -> the last hidden states ``(B, 1 + N, C)``, the class token's first."""
        positions = torch.arange(self.config.max_len, device=images.device)  # (1 + N,): class token, then patches
        return self.encoder(self.embed(images, positions), None, positions)

    def forward(self, images: Tensor) -> Tensor:
        """Class logits ``(B, n_classes)`` from the class token's final state."""
        return self.output_logits(self.encode(images))

    def output_logits(self, hidden: Tensor, mask: Tensor | None = None) -> Tensor:
        """What follows the encoder: the class token's final state ``hidden[:, 0]`` through the head -> class logits
        ``(B, n_classes)`` (``mask`` unused: every image has all its patches)."""
        return self.head(self.dropout(hidden[:, 0]))  # (B, C) -> (B, n_classes)
