"""scratchformer: the Transformer of "Attention Is All You Need", written from scratch in PyTorch.

The public API, importable from here (each name is loaded on first use):

- the models: ``Seq2SeqTransformer``, ``GPT``, ``EncoderClassifier``, ``GPTClassifier``, ``ViT``, ``build_model``,
  ``ModelConfig``, ``ConfigError``, ``count_parameters_formula``;
- decoding: ``generate``, ``greedy_translate``, ``beam_search``;
- weights: ``load_model`` (a trained checkpoint), ``gpt2_from_pretrained``, ``bert_from_pretrained``.
"""

from scratchformer.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "GPT": "scratchformer.models", "EncoderClassifier": "scratchformer.models", "GPTClassifier": "scratchformer.models",
    "Seq2SeqTransformer": "scratchformer.models", "ViT": "scratchformer.models",
    "build_model": "scratchformer.models",
    "ModelConfig": "scratchformer.nn.config",
    "ConfigError": "scratchformer.errors", "DataError": "scratchformer.errors",
    "count_parameters_formula": "scratchformer.models.params",
    "generate": "scratchformer.generation", "greedy_translate": "scratchformer.generation",
    "beam_search": "scratchformer.generation",
    "load_model": "scratchformer.checkpoints",
    "gpt2_from_pretrained": "scratchformer.interop", "bert_from_pretrained": "scratchformer.interop",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [*_EXPORTS, "__version__"]
