"""scratchformer: the Transformer of "Attention Is All You Need", written from scratch in PyTorch."""

from scratchformer.models import GPT, EncoderClassifier, Seq2SeqTransformer, build_model
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.config import ConfigError, ModelConfig

__version__ = "0.1.0"


def load_model(ckpt_dir: str):  # noqa: ANN201 - returns one of the three model classes
    """The model (in eval mode) of a checkpoint directory, or of a run directory (its best/ checkpoint)."""
    from scratchformer.checkpoint import load_model as _load

    return _load(ckpt_dir)


__all__ = [
    "GPT", "ConfigError", "EncoderClassifier", "ModelConfig", "Seq2SeqTransformer", "build_model",
    "count_parameters_formula", "load_model", "__version__",
]
