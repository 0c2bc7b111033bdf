"""Plain text for language modelling: a train/validation split and random-offset batches.

Following nanoGPT, a corpus is one long stream of token ids; a batch is ``B`` windows of ``block_size + 1``
consecutive tokens starting at random offsets, the input ``x`` being the first ``block_size`` tokens and the
target ``y`` the same window shifted by one (the next token at every position). Without an explicit
validation text the last 10 % of the corpus (by position, not shuffled lines, so no validation sentence
leaks into training as a neighbour) is held out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from scratchformer.data.errors import DataError


class Encoder(Protocol):
    """Anything that turns text into token ids (a tokenizer; the data layer needs nothing more of one)."""

    def encode(self, text: str) -> list[int]: ...

__all__ = ["LMDataset", "lm_splits"]


def lm_splits(text: str, val_text: str | None = None, val_fraction: float = 0.1) -> tuple[str, str]:
    """(train, validation) text: ``val_text`` if given, else the last ``val_fraction`` of ``text`` by position."""
    if val_text is not None:
        return text, val_text
    if not 0.0 < val_fraction < 1.0:
        raise DataError(f"val_fraction={val_fraction} must be between 0 and 1 (exclusive)")
    n_train = int(len(text) * (1.0 - val_fraction))
    return text[:n_train], text[n_train:]


class LMDataset:
    """A 1-D ``LongTensor`` of token ids to draw next-token-prediction batches from.

    ``name`` (a file name or "validation text") is used in error messages only.
    """

    def __init__(self, ids: torch.Tensor | Sequence[int], name: str = "text") -> None:
        self.ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
        self.name = name

    @classmethod
    def from_text(cls, text: str, tokenizer: Encoder, name: str = "text") -> LMDataset:
        """Tokenize ``text`` as one stream (no BOS/EOS inserted)."""
        return cls(tokenizer.encode(text), name=name)

    def __len__(self) -> int:
        return self.ids.numel()

    def get_batch(self, batch_size: int, block_size: int,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows: ``x = ids[i:i+block]``, ``y = ids[i+1:i+block+1]``, both ``(B, block)`` long tensors.

        Offsets come from ``generator`` only, so a run is reproducible and resumable from its state.
        """
        n = len(self)
        if n < block_size + 1:
            raise DataError(f"{self.name} has {n} tokens, fewer than block_size + 1 = {block_size + 1}; "
                            f"use more text or a smaller block_size")
        starts = torch.randint(n - block_size, (batch_size,), generator=generator)  # (B,)
        window = starts[:, None] + torch.arange(block_size + 1)  # (B, block+1) positions
        chunk = self.ids[window]  # (B, block+1)
        return chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()

    def __repr__(self) -> str:
        return f"LMDataset({self.name!r}, {len(self)} tokens)"
