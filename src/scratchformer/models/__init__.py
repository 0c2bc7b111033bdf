"""The three Transformer families, each a composition of ``scratchformer.nn`` blocks."""

from torch import nn

from ..config import ModelConfig
from .classifier import EncoderClassifier
from .gpt import GPT
from .seq2seq import Seq2SeqTransformer

MODEL_CLASSES: dict[str, type[nn.Module]] = {
    "seq2seq": Seq2SeqTransformer,
    "gpt": GPT,
    "encoder": EncoderClassifier,
}


def build_model(config: ModelConfig) -> nn.Module:
    """The model that ``config.arch`` names, freshly initialised."""
    return MODEL_CLASSES[config.arch](config)


__all__ = ["GPT", "EncoderClassifier", "MODEL_CLASSES", "Seq2SeqTransformer", "build_model"]
