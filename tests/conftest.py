"""Shared helpers: tiny configurations that run in milliseconds on 2 CPU cores."""

from __future__ import annotations

import pytest
import torch

from scratchformer import ModelConfig

torch.set_num_threads(min(2, torch.get_num_threads()))


def tiny(arch: str, **overrides) -> ModelConfig:
    base = dict(arch=arch, vocab_size=37, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, dropout=0.0)
    return ModelConfig(**{**base, **overrides})


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
