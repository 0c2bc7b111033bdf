"""The three Transformer families, and the Vision Transformer, each a composition of ``scratchformer.nn`` blocks.

Each family's module is imported when it is first used: training a GPT never loads the encoder-decoder.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from scratchformer.lazy import lazy_exports

if TYPE_CHECKING:
    from torch import nn

    from scratchformer.nn.config import ModelConfig

# arch -> "module:Class" of the model that ``ModelConfig.arch`` names
MODEL_CLASSES: dict[str, str] = {
    "seq2seq": "scratchformer.models.seq2seq:Seq2SeqTransformer",
    "gpt": "scratchformer.models.gpt:GPT",
    "encoder": "scratchformer.models.classifier:EncoderClassifier",
    "vit": "scratchformer.models.vit:ViT",
}


def build_model(config: ModelConfig) -> nn.Module:
    """The model that ``config.arch`` names, freshly initialised."""
    module, _, name = MODEL_CLASSES[config.arch].partition(":")
    return getattr(importlib.import_module(module), name)(config)


_EXPORTS = {path.partition(":")[2]: path.partition(":")[0] for path in MODEL_CLASSES.values()}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [*_EXPORTS, "MODEL_CLASSES", "build_model"]
