"""The model families, each a composition of ``scratchformer.nn`` blocks: the encoder-decoder, the GPT (and the GPT
that classifies), the encoder classifier and the Vision Transformer. The family registry (``families.py``) names
each family's class; ``build_model`` builds the one a config names."""

from __future__ import annotations

from torch import nn

from scratchformer.families import FAMILIES, family
from scratchformer.models.classifier import EncoderClassifier
from scratchformer.models.gpt import GPT
from scratchformer.models.gpt_classifier import GPTClassifier
from scratchformer.models.seq2seq import Seq2SeqTransformer
from scratchformer.models.vit import ViT
from scratchformer.nn.config import ModelConfig

_CLASSES: dict[str, type[nn.Module]] = {cls.__name__: cls for cls in (
    Seq2SeqTransformer, GPT, GPTClassifier, EncoderClassifier, ViT)}
# ModelConfig.arch -> the model it names (the registry's ``model`` of each family)
MODEL_CLASSES: dict[str, type[nn.Module]] = {name: _CLASSES[entry.model] for name, entry in FAMILIES.items()}


def build_model(config: ModelConfig) -> nn.Module:
    """The model of the family ``config.arch`` names, freshly initialised."""
    return MODEL_CLASSES[family(config.arch).name](config)


__all__ = ["EncoderClassifier", "GPT", "GPTClassifier", "MODEL_CLASSES", "Seq2SeqTransformer", "ViT", "build_model"]
