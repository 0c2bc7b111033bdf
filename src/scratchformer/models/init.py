"""Weight initialisation. The paper does not state one; these are the common, tested choices, each family's named
by its registry entry (``init``, ``zero_head``).

- ``init="normal"`` (``gpt``, ``gpt-classifier``; GPT-2's): every Linear ~ N(0, 0.02), biases 0; the
  projections that write into the residual stream (attention ``out_proj`` and FFN ``linear2``) ~ N(0, 0.02 /
  sqrt(2 N)) so the residual sum does not grow with depth; embeddings ~ N(0, 0.02).
- ``init="xavier"`` (``seq2seq``, ``encoder``: the paper's families, as in ``torch.nn.Transformer``, fairseq and
  tensor2tensor): Linear weights Xavier-uniform, biases 0; token embeddings ~ N(0, C^-1/2) so that after
  the x sqrt(C) scaling they have unit variance (N(0, 0.02) when unscaled).
- ``vit`` (the ViT paper's choices): as the paper's families, with the class token at 0 and the learned positions
  ~ N(0, 0.02) (set where they are made, ``nn/patches.py``), and the classification head at 0 (``zero_head``), so
  that a new model predicts the uniform distribution whatever the image.
- LayerNorm: weight 1, bias 0 (RMSNorm: weight 1, set where it is made).
- ``init="zero_out"`` (not in the paper; the NanoGPT speedrun): the projections that write into the residual
  stream (``out_proj``, ``linear2``) start at zero, so every layer starts as the identity (pre-LN) and the
  model as embeddings -> output; the gradient still reaches them (it is the sub-layer's input times the
  residual's gradient), and the layers grow in from there.
"""

from __future__ import annotations

import math

from torch import nn

from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, family, parts
from scratchformer.nn.config import ModelConfig


def check_family(model: nn.Module, cfg: ModelConfig) -> None:
    """Refuse, in one line, a config of another family than the one whose class ``model`` is (the registry's
    ``model`` of each family names its class)."""
    own = {c.__name__ for c in type(model).__mro__}
    if family(cfg.arch).model not in own:
        names = " or ".join(repr(f.name) for f in FAMILIES.values() if f.model in own)
        raise ConfigError(f"{type(model).__name__} needs a config with arch={names}, got arch={cfg.arch!r}")


def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
    for name, module in model.named_modules():
        init_module(name, module, cfg)
    if family(cfg.arch).zero_head:
        nn.init.zeros_(parts(model).head.weight)


def init_module(name: str, module: nn.Module, cfg: ModelConfig) -> None:
    """Initialise the module called ``name`` in a model of ``cfg`` (its own weights, not its children's) as the
    module docstring says (a zero head aside: ``init_weights``)."""
    entry = family(cfg.arch)
    n_layers = max(cfg.n_encoder_layers or 0, cfg.n_decoder_layers or 0) if entry.two_stacks else cfg.n_layers
    if isinstance(module, nn.Linear):
        residual_out = name.endswith("out_proj") or name.endswith("linear2")
        if residual_out and cfg.init == "zero_out":
            nn.init.zeros_(module.weight)
        elif entry.init == "normal":
            std = 0.02 / math.sqrt(2 * max(n_layers, 1)) if residual_out else 0.02
            nn.init.normal_(module.weight, std=std)
        else:
            nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        std = cfg.d_model ** -0.5 if cfg.scale_embeddings else 0.02
        nn.init.normal_(module.weight, std=std)
    elif isinstance(module, nn.LayerNorm):
        if module.weight is not None:
            nn.init.ones_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
