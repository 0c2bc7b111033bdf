"""The three Transformer families, and the Vision Transformer, each a composition of ``scratchformer.nn`` blocks."""

from __future__ import annotations

from torch import nn

from scratchformer.models.classifier import EncoderClassifier
from scratchformer.models.gpt import GPT
from scratchformer.models.gpt_classifier import GPTClassifier
from scratchformer.models.seq2seq import Seq2SeqTransformer
from scratchformer.models.vit import ViT
from scratchformer.nn.config import ModelConfig

# ModelConfig.arch -> the model it names
MODEL_CLASSES: dict[str, type[nn.Module]] = {
    "seq2seq": Seq2SeqTransformer, "gpt": GPT, "encoder": EncoderClassifier, "vit": ViT,
}


def build_model(config: ModelConfig) -> nn.Module:
    """The model that ``config.arch`` names, freshly initialised (a GPT with ``pooling="last"`` classifies)."""
    if config.arch == "gpt" and config.pooling == "last":
        return GPTClassifier(config)
    return MODEL_CLASSES[config.arch](config)


__all__ = ["EncoderClassifier", "GPT", "GPTClassifier", "MODEL_CLASSES", "Seq2SeqTransformer", "ViT", "build_model"]
