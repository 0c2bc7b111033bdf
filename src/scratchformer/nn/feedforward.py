"""Position-wise feed-forward network (§3.3).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                                      (equation 2)

applied to every position separately and identically: ``(B, T, C) -> (B, T, F) -> (B, T, C)`` with
F = d_ff (2048 for C = 512 in the paper).

Activations (one config field, ``activation``):

- ``relu``       the paper;
- ``gelu``       GELU with the exact erf (BERT, nanoGPT);
- ``gelu_tanh``  GELU's tanh approximation (GPT-2's "gelu_new");
- ``relu2``      ReLU squared, max(0, x W_1 + b_1)^2 (So et al. 2021, "Primer"; the NanoGPT speedrun):
                 as cheap as ReLU, and trained faster there than GELU at the same size;
- ``swiglu``     a deviation from the paper (Shazeer 2020, used by LLaMA):
                 FFN(x) = (SiLU(x W_1) * x W_3) W_2: a third ``(C, F)`` matrix W_3, whose output the SiLU
                 of x W_1 gates. Keep d_ff at about 2/3 of the usual to hold the parameter count.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from scratchformer.nn.config import Activation, choices

GATED = ("swiglu", "geglu_tanh")  # the activations that gate with a third matrix W_3


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True) -> None:
        super().__init__()
        if activation not in choices(Activation):
            raise ValueError(f"activation={activation!r} is not one of {', '.join(choices(Activation))}")
        self.activation = activation
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)  # W_1: (C) -> (F)
        self.linear3 = nn.Linear(d_model, d_ff, bias=bias) if activation in GATED else None  # W_3
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)  # W_2: (F) -> (C)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)  # (B, T, F)
        if self.activation == "relu":
            h = F.relu(h)
        elif self.activation == "gelu":
            h = F.gelu(h)
        elif self.activation == "gelu_tanh":
            h = F.gelu(h, approximate="tanh")
        elif self.activation == "relu2":
            h = F.relu(h).square()
        elif self.activation == "geglu_tanh":
            assert self.linear3 is not None
            h = F.gelu(h, approximate="tanh") * self.linear3(x)
        else:  # swiglu
            assert self.linear3 is not None
            h = F.silu(h) * self.linear3(x)  # the gate SiLU(x W_1) times x W_3
        return self.linear2(h)  # (B, T, C)
