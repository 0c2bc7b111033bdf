"""What the decoding strategies share: eval mode while decoding, and the output budget of a translation."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["cut_at_eos", "default_limits"]


def default_limits(src_mask: Tensor, max_new_tokens: int | None, max_len: int) -> Tensor:
    """Per-sentence output budgets ``(B,)``: input length + 50 (§6.1) unless given, never past ``max_len``
    (the decoder reads bos + all but the last output token, so ``max_len`` outputs fit)."""
    if max_new_tokens is None:
        limits = src_mask.sum(1) + 50
    else:
        limits = torch.full((src_mask.size(0),), max_new_tokens, device=src_mask.device)
    return limits.clamp(max=max_len).long()


def cut_at_eos(row: list[int], eos_id: int | Sequence[int]) -> list[int]:
    """``row`` up to its first end-of-generation id (``eos_id``: one id, or several)."""
    stops = {eos_id} if isinstance(eos_id, int) else set(eos_id)
    return next((row[:i] for i, t in enumerate(row) if t in stops), row)
