"""LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): a frozen weight W plus a
trained update of rank r, written as two thin matrices.

    y = x W^T + b + (alpha / r) * dropout(x) A^T B^T          A: (r, in)   B: (out, r)   r << min(in, out)

W (out x in) stays as it was; only A and B train, r (in + out) numbers instead of in x out. B starts at zero, so
the adapted model starts as the pretrained one, and A at Linear's usual random values, so B's gradient is not
zero. ``alpha / r`` scales the update: with alpha fixed, a larger rank does not make the first steps larger.

The update can be folded into the weight once training is done (``merge_lora``): W' = W + (alpha / r) B A, a
plain ``nn.Linear`` again, as fast as before and exported like any other model.

Targets (``lora_targets``), by what the projection is, in every attention and feed-forward block:

    query, key, value   the row blocks W^Q, W^K, W^V of attention's in_proj, each with its own A and B
                        (as LoRA and peft adapt BERT's or Llama's separate query, key and value matrices)
    output              attention's W^O (out_proj)
    ff                  the feed-forward's matrices: W_1, W_2 (and SwiGLU's W_3)
    all                 every one of them

Shapes: ``x (..., in)`` -> ``(..., out)``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.nn.attention import MultiHeadAttention, RowsLinear
from scratchformer.nn.feedforward import FeedForward

__all__ = ["LORA_TARGETS", "LoRALinear", "adapters_off", "add_lora", "has_adapters", "init_adapters", "lora_targets",
           "merge_lora"]

LORA_TARGETS = ("query", "key", "value", "output", "ff")


def init_adapters(a_matrices: list[Tensor], b_matrices: list[Tensor]) -> None:
    """A as ``nn.Linear`` initialises its weight (as peft does), B at zero."""
    for a in a_matrices:
        nn.init.kaiming_uniform_(a, a=math.sqrt(5))
    for b in b_matrices:
        nn.init.zeros_(b)


class LoRALinear(RowsLinear):
    """A frozen ``nn.Linear`` (the same ``weight`` and ``bias`` parameters, not copies) with a low-rank
    adapter on each of its row blocks named in ``blocks`` (``{"query": (0, 384)}``: rows 0 to 383). It computes
    its rows in part as attention's stacked projection does (``RowsLinear.rows``), adapters included."""

    def __init__(self, linear: nn.Linear, blocks: dict[str, tuple[int, int]], rank: int, alpha: float,
                 dropout: float = 0.0) -> None:
        nn.Module.__init__(self)  # not nn.Linear's: the weights are the wrapped layer's own
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.blocks, self.rank, self.scale = dict(blocks), rank, alpha / rank
        self.active = True  # False: the frozen layer alone (``adapters_off``)
        self.lora_dropout = nn.Dropout(dropout)
        like = dict(device=linear.weight.device, dtype=linear.weight.dtype)
        self.lora_A = nn.ParameterDict({n: nn.Parameter(torch.empty(rank, self.in_features, **like)) for n in blocks})
        self.lora_B = nn.ParameterDict({n: nn.Parameter(torch.zeros(stop - start, rank, **like))  # B = 0: W unchanged
                                        for n, (start, stop) in blocks.items()})
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The adapters started anew (A as ``nn.Linear`` initialises its weight, as peft does; B at zero, so the
        layer is its base again); the frozen base's weight and bias are never touched."""
        init_adapters(list(self.lora_A.values()), list(self.lora_B.values()))

    def forward(self, x: Tensor) -> Tensor:
        return self.rows(x, 0, self.out_features)

    def rows(self, x: Tensor, start: int, stop: int) -> Tensor:
        """Output rows ``start:stop`` only (``(..., stop - start)``): cross-attention's queries, or its keys and
        values, take a part of in_proj."""
        whole = start == 0 and stop == self.out_features
        weight = self.weight if whole else self.weight[start:stop]
        bias = self.bias if self.bias is None or whole else self.bias[start:stop]
        y = F.linear(x, weight, bias)  # x W^T + b: the frozen path
        factors = self.update_factors(start, stop) if self.active else None
        if factors is None:  # no adapted row among those asked, or the adapters are off
            return y
        a, b = factors
        h = self.lora_dropout(x) if self.training and self.lora_dropout.p > 0 else x
        u = F.linear(h, a).reshape(-1, a.shape[0])  # x A^T: (N, k r), N the positions
        # y += (alpha / r) u B^T, one product added in place (y is this call's own): (N, stop - start)
        y.view(-1, y.shape[-1]).addmm_(u, b.t(), alpha=self.scale)
        return y

    def update_factors(self, start: int, stop: int) -> tuple[Tensor, Tensor] | None:
        """The adapters of rows ``start:stop`` as one product A^T B^T: A stacks the k blocks' A ``(k r, in)``, B holds
        each block's B in its rows and its r columns ``(stop - start, k r)`` (small matrices: the update of the whole
        row range is then two matrix products, whatever the number of blocks)."""
        names = [n for n, (first, last) in self.blocks.items() if first < stop and last > start]
        if not names:
            return None
        spans = [self.blocks[n] for n in names]
        a = torch.cat([self.lora_A[n] for n in names]) if len(names) > 1 else self.lora_A[names[0]]
        if spans[0][0] == start and spans[-1][1] == stop and all(p[1] == q[0] for p, q in zip(spans, spans[1:])):
            return a, torch.block_diag(*(self.lora_B[n] for n in names))  # the blocks tile the rows asked
        b = self.weight.new_zeros(stop - start, len(names) * self.rank)
        for j, (name, (first, last)) in enumerate(zip(names, spans)):
            lo, hi = max(first, start), min(last, stop)
            b[lo - start:hi - start, j * self.rank:(j + 1) * self.rank] = self.lora_B[name][lo - first:hi - first]
        return a, b

    def merged(self) -> nn.Linear:
        """A plain linear layer (a ``RowsLinear``, as the projection it adapted) with W' = W + (alpha / r) B A (its own
        tensors; this layer is unchanged)."""
        out = RowsLinear(self.in_features, self.out_features, bias=self.bias is not None,
                         device=self.weight.device, dtype=self.weight.dtype)
        with torch.no_grad():
            out.weight.copy_(self.weight)
            for name, (first, last) in self.blocks.items():
                out.weight[first:last] += self.scale * (self.lora_B[name] @ self.lora_A[name])
            if self.bias is not None:
                out.bias.copy_(self.bias)  # type: ignore[union-attr]
        out.weight.requires_grad_(self.weight.requires_grad)
        if out.bias is not None and self.bias is not None:
            out.bias.requires_grad_(self.bias.requires_grad)
        return out


def _projections(model: nn.Module) -> list[tuple[nn.Module, str, dict[str, tuple[int, int]]]]:
    """(parent module, attribute name, {target: rows}) of every projection LoRA can adapt in ``model``."""
    found = []
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            Q, KV = module.q_size, module.kv_size
            found.append((module, "in_proj", {"query": (0, Q), "key": (Q, Q + KV), "value": (Q + KV, Q + 2 * KV)}))
            found.append((module, "out_proj", {"output": (0, module.out_proj.out_features)}))
        elif isinstance(module, FeedForward):
            for attr in ("linear1", "linear3", "linear2"):
                if getattr(module, attr) is not None:
                    found.append((module, attr, {"ff": (0, getattr(module, attr).out_features)}))
    return found


def lora_targets(text: str) -> tuple[str, ...]:
    """``"query,value"`` -> ``("query", "value")``; ``"all"`` -> every target. Raises ``ValueError`` for a name
    that is not a target."""
    names = tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))
    if names == ("all",):
        return LORA_TARGETS
    unknown = [n for n in names if n not in LORA_TARGETS]
    if unknown or not names:
        what = f"{', '.join(unknown)} is not a projection LoRA adapts" if unknown else "names no projection"
        raise ValueError(f"lora_targets={text!r}: {what} (choose from {', '.join(LORA_TARGETS)}, or all)")
    return names


def add_lora(model: nn.Module, rank: int, alpha: float, targets: tuple[str, ...] | str = LORA_TARGETS,
             dropout: float = 0.0) -> int:
    """Replace each targeted projection of ``model`` by a ``LoRALinear`` around it (in place); returns the number
    of adapters. Targets that match no projection of the model raise ``ValueError`` naming those it has."""
    wanted = lora_targets(targets) if isinstance(targets, str) else tuple(targets)
    places = _projections(model)
    have = sorted({t for _, _, blocks in places for t in blocks}, key=LORA_TARGETS.index)
    missing = [t for t in wanted if t not in have]
    if missing:
        raise ValueError(f"lora_targets: {', '.join(missing)} matches no projection of this model (it has "
                         f"{', '.join(have) or 'none'})")
    count = 0
    for parent, attr, blocks in places:
        chosen = {t: rows for t, rows in blocks.items() if t in wanted}
        if chosen:
            setattr(parent, attr, LoRALinear(getattr(parent, attr), chosen, rank, alpha, dropout))
            count += len(chosen)
    return count


def has_adapters(model: nn.Module) -> bool:
    """Whether ``model`` has LoRA adapters (a LoRA run's model while it trains)."""
    return any(isinstance(m, LoRALinear) for m in model.modules())


@contextlib.contextmanager
def adapters_off(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block ``model`` computes as its frozen base, every adapter switched off (peft's
    ``disable_adapter()``): the reference of preference tuning with LoRA, with no second copy of the weights."""
    layers = [m for m in model.modules() if isinstance(m, LoRALinear)]
    for layer in layers:
        layer.active = False
    try:
        yield model
    finally:
        for layer in layers:
            layer.active = True


def merge_lora(model: nn.Module) -> nn.Module:
    """Fold every adapter into its weight (W' = W + (alpha / r) B A), in place; returns ``model``, now of plain
    ``nn.Linear`` layers: the same function, without the adapters' extra matrix products."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, LoRALinear):
                setattr(parent, name, child.merged())
    return model
