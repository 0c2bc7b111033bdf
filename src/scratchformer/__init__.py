"""scratchformer: the Transformer of "Attention Is All You Need", written from scratch in PyTorch."""

from .config import ConfigError, ModelConfig, count_parameters_formula
from .models import GPT, EncoderClassifier, Seq2SeqTransformer, build_model

__version__ = "0.1.0"

__all__ = [
    "GPT", "ConfigError", "EncoderClassifier", "ModelConfig", "Seq2SeqTransformer", "build_model",
    "count_parameters_formula", "__version__",
]
