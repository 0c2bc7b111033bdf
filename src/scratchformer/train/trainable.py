"""Which weights train (``trainable``): fine-tuning on less memory and time by freezing the rest.

    trainable=all       every weight (the default)
    trainable=head      the output layer only: a classifier's head (and pooler), a language model's output matrix
                        (with tied embeddings, that matrix is the token embedding, which then trains too)
    trainable=last:N    the last N blocks (of the decoder, for an encoder-decoder), the final norm and the head

The parts are where the family registry says each family keeps them (``families.parts``), so every family it lists
takes the setting, and a family added later with it.

A frozen weight keeps ``requires_grad=False``: no gradient is computed for it, the optimizer does not hold it
(``optim.param_groups`` takes only what trains), and its value stays the same bit for bit. Dropout still acts in
the frozen blocks during training, as it does in full fine-tuning.
"""

from __future__ import annotations

from torch import nn

from scratchformer.errors import ConfigError
from scratchformer.families import parts
from scratchformer.settings.checks import trainable_blocks

__all__ = ["apply_trainable"]


def apply_trainable(model: nn.Module, trainable: str) -> tuple[int, int]:
    """Freeze every weight of ``model`` outside what ``trainable`` names; returns (weights that train, all)."""
    blocks_to_train = trainable_blocks(trainable)
    total = sum(p.numel() for p in model.parameters())
    if blocks_to_train is None:
        return sum(p.numel() for p in model.parameters() if p.requires_grad), total
    where = parts(model)  # the family registry says where each part is
    blocks, norm, head = where.blocks, where.final_norm, where.head_parameters()
    if blocks_to_train > len(blocks):
        raise ConfigError(f"trainable={trainable} asks for more blocks than the model has ({len(blocks)})")
    model.requires_grad_(False)
    for p in head:
        p.requires_grad_(True)
    if blocks_to_train:
        for block in list(blocks)[len(blocks) - blocks_to_train:]:
            block.requires_grad_(True)
        if norm is not None:
            norm.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad), total
