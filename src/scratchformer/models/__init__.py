"""The model families, each a composition of ``scratchformer.nn`` blocks: the encoder-decoder, the GPT (and the GPT
that classifies), the encoder classifier and the Vision Transformer. The family registry (``families.py``) names
each family's class; ``build_model`` builds the one a config names."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import Tensor, nn

from scratchformer.families import FAMILIES, family
from scratchformer.models.classifier import EncoderClassifier
from scratchformer.models.gpt import GPT
from scratchformer.models.gpt_classifier import GPTClassifier
from scratchformer.models.seq2seq import Seq2SeqTransformer
from scratchformer.models.vit import ViT
from scratchformer.nn.config import ModelConfig

_CLASSES: dict[str, type[nn.Module]] = {c.__name__: c for c in (Seq2SeqTransformer, GPT, EncoderClassifier,
                                                                    GPTClassifier, ViT)}
# ModelConfig.arch -> the model it names: the class the registry's entry names (``model``)
MODEL_CLASSES: dict[str, type[nn.Module]] = {name: _CLASSES[entry.model] for name, entry in FAMILIES.items()}


def build_model(config: ModelConfig) -> nn.Module:
    """The model of the family ``config.arch`` names, freshly initialised."""
    return MODEL_CLASSES[family(config.arch).name](config)


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Run without dropout, then give the model back in the mode it came in (the lens, decoding, mid-training
    samples, exports)."""
    was_training = model.training
    if not was_training and not any(m.training for m in model.modules()):
        yield  # in eval mode throughout already (a server's model, every decoding step): nothing to set or undo
        return
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def cut_positions(state: dict[str, Tensor], max_len: int) -> dict[str, Tensor]:
    """``state`` with each learned position table (``...embed.position_embedding.weight``) cut to its first
    ``max_len`` rows: a model for shorter inputs (a classifier fine-tuned from a longer base) reads those rows."""
    return {name: t[:max_len] if name.endswith("embed.position_embedding.weight") else t for name, t in state.items()}


def widen_vocabulary(model: nn.Module, added: int) -> nn.Module:
    """The same model reading ``added`` more tokens at the end of its vocabulary: each table with a row per token (the
    token embedding, an untied output layer) gets ``added`` rows, each the mean of the rows it had (a new token starts
    where the average token is, neither favoured nor shunned by the output layer); every other weight is kept."""
    import dataclasses

    import torch

    config: ModelConfig = model.config  # type: ignore[assignment]
    wider = build_model(dataclasses.replace(config, vocab_size=config.vocab_size + added))
    state = {}
    for name, t in model.state_dict().items():
        if t.dim() and t.size(0) == config.vocab_size and wider.state_dict()[name].size(0) == t.size(0) + added:
            t = torch.cat([t, t.mean(0, keepdim=True).expand(added, *t.shape[1:])])
        state[name] = t
    wider.load_state_dict(state)
    return wider.train(model.training)


__all__ = ["EncoderClassifier", "GPT", "GPTClassifier", "MODEL_CLASSES", "Seq2SeqTransformer", "ViT", "build_model",
           "cut_positions", "eval_mode", "widen_vocabulary"]
