"""Muon (Jordan et al. 2024; the NanoGPT speedrun's optimizer): momentum, orthogonalised.

For a weight matrix W with gradient G, Muon keeps SGD's momentum M and steps along the *orthogonal* matrix
closest to it, the polar factor of M = U S V^T:

    M  <- mu M + G                         (momentum, mu = 0.95; Nesterov: use G + mu M)
    O   = U V^T  ~  NewtonSchulz(M)        (every singular value of the step set to about 1)
    W  <- W - lr * sqrt(max(1, rows / cols)) * O     (and decoupled weight decay, as AdamW's)

Why: the gradient of a matrix is dominated by a few directions (its largest singular values); Adam's
per-entry scaling keeps that shape, so a step mostly moves W along the directions it already moves along.
Setting every singular value to 1 gives the rare directions as large a step as the common ones. Computing
U V^T by an SVD is slow on accelerators; an odd polynomial p(X) = aX + b(XX^T)X + c(XX^T)^2 X applied a few
times to X = M / ||M|| pushes every singular value towards 1 with matrix products only (the Newton-Schulz
iteration). The classical cubic (1.5, -0.5, 0) converges to exactly U V^T, slowly for small singular values;
Muon's quintic (3.4445, -4.7750, 2.0315) is tuned to lift small ones fast and settle, after 5 steps, in a
band around 1 (about 0.7 to 1.1) rather than at 1: close enough for a step direction.

Muon is for the 2-D weight matrices inside the layers. Embeddings (a lookup, where each row sees its own
token's gradient only), the output head (whose rows are tokens too), norms' gains and biases (vectors, with
no singular values) keep AdamW, as Muon's authors do: ``MuonAdamW`` runs both in one optimizer, so the
trainer, its checkpoints and ``--resume`` see a single ``torch.optim.Optimizer``. The stacked attention
projection ``in_proj`` = [W^Q; W^K; W^V] is orthogonalised as its three matrices, not as one.

The iteration's cost does not depend on the batch: on a small model it is a large part of a step. The step
therefore orthogonalises all the matrices of one shape in one batched call, in bfloat16 where the hardware
multiplies it natively (as Muon's authors do on GPUs): ``bench/muon_step.py`` measures both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

QUINTIC = (3.4445, -4.7750, 2.0315)  # Muon's coefficients: fast, ends in a band around 1
CUBIC = (1.5, -0.5, 0.0)  # the classical Newton-Schulz iteration: converges to U V^T


def newton_schulz(g: Tensor, steps: int = 5, coefficients: tuple[float, float, float] = QUINTIC,
                  eps: float = 1e-7, dtype: torch.dtype | None = None) -> Tensor:
    """``g (..., rows, cols)`` -> a matrix with the same singular vectors and singular values near 1:
    ``steps`` applications of X <- aX + b(XX^T)X + c(XX^T)^2 X to X = g / ||g||_F (which puts every singular
    value in (0, 1], where the iteration converges). Works on the wide orientation (X X^T is the smaller
    product) and on a batch of matrices alike. ``dtype``: the iteration's number type (default: at least
    float32; Muon's step uses bfloat16 where the hardware multiplies it natively, as its authors do)."""
    a, b, c = coefficients
    x = g.to(dtype or torch.promote_types(g.dtype, torch.float32)).reshape(-1, *g.shape[-2:])  # a batch
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    tall = x.size(-2) > x.size(-1)
    if tall:
        x = x.mT
    for _ in range(steps):
        xxt = x @ x.mT  # A = X X^T
        x = torch.baddbmm(x, torch.baddbmm(xxt, xxt, xxt, beta=b, alpha=c), x, beta=a)  # aX + (bA + cA A) X
    return (x.mT if tall else x).reshape(g.shape).to(g.dtype)


class MuonAdamW(torch.optim.Optimizer):
    """Muon for the groups marked ``muon=True``, AdamW for the others, in one optimizer.

    Muon groups: ``lr``, ``momentum``, ``nesterov``, ``ns_steps``, ``weight_decay``, ``split`` (orthogonalise
    a parameter as ``split`` equal row blocks), ``ns_dtype`` (the Newton-Schulz iteration's number type:
    ``"bfloat16"`` or ``"float32"``; ``None``: ``fast_ns_dtype()``). AdamW groups: ``lr``, ``betas``, ``eps``,
    ``weight_decay``, the update written out as ``torch.optim.AdamW`` computes it (the tests compare the two).
    """

    def __init__(self, groups: list[dict], lr: float) -> None:
        defaults = dict(lr=lr, muon=False, momentum=0.95, nesterov=True, ns_steps=5, split=1, ns_dtype=None,
                        betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
        super().__init__(groups, defaults)

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001, ANN201 - torch's signature
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        muon = []
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if group["muon"]:
                    muon.append((p, group))
                else:
                    self._adamw(p, group)
        self._muon(muon)
        return loss

    def _muon(self, params: list[tuple[Tensor, dict]]) -> None:
        """One Muon step for every (parameter, group): the Nesterov momentum of each, cut into its ``split``
        blocks and turned wide, then orthogonalised by one ``newton_schulz`` call per block shape (a batch:
        the same numbers as one call per block, in a few large products instead of many small ones)."""
        blocks: dict[tuple, list[tuple[int, Tensor]]] = {}
        for i, (p, group) in enumerate(params):
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).add_(p.grad)
            g = p.grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
            g = g.reshape(group["split"], g.size(0) // group["split"], -1)  # W^Q, W^K, W^V apart
            dtype = group["ns_dtype"] or fast_ns_dtype(p.device)
            g = g.mT if g.size(-2) > g.size(-1) else g  # wide: the smaller X X^T
            blocks.setdefault((*g.shape[1:], p.device, dtype, group["ns_steps"]), []).append((i, g))
        for (*_, dtype, steps), members in blocks.items():
            updates = newton_schulz(torch.cat([g for _, g in members]), steps, dtype=getattr(torch, dtype))
            for (i, _), update in zip(members, updates.split([len(g) for _, g in members])):
                p, group = params[i]
                rows, cols = p.size(0) // group["split"], p.size(1)
                update = (update.mT if rows > cols else update).reshape_as(p)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update, alpha=-group["lr"] * math.sqrt(max(1.0, rows / cols)))

    def _adamw(self, p: Tensor, group: dict) -> None:
        state = self.state[p]
        if "step" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        (beta1, beta2), lr = group["betas"], group["lr"]
        state["step"] += 1
        t = state["step"].item()
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.lerp_(p.grad, 1 - beta1)  # m = beta1 m + (1 - beta1) g
        v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)  # v = beta2 v + (1 - beta2) g^2
        p.mul_(1 - lr * group["weight_decay"])
        denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(group["eps"])
        p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))


def fast_ns_dtype(device: torch.device) -> str:
    """bfloat16 where it is multiplied natively (a GPU; a CPU with AVX512-BF16 or AMX, where it is several
    times faster than float32: Muon's orthogonalisation is the same work whatever the batch size, so on a
    small model it is a large part of a step), float32 elsewhere (emulated bfloat16 would be slower)."""
    if device.type == "cuda":
        return "bfloat16"
    native = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    return "bfloat16" if device.type == "cpu" and native() else "float32"


def muon_groups(model: nn.Module, *, lr: float, muon_lr: float, weight_decay: float, betas: tuple[float, float],
                eps: float, momentum: float = 0.95) -> list[dict]:
    """Muon for the weight matrices of the Linear layers inside the encoder and decoder stacks; AdamW for
    everything else (embeddings, output and classification heads, the pooler, norms, biases), decayed as
    ``param_groups`` decays them. Each Muon group's ``lr_scale`` is ``muon_lr / lr``: the schedule sets
    ``lr * lr_scale`` (``set_lr``), so both optimizers follow one warm-up and decay."""
    muon: dict[int, list[Tensor]] = {1: [], 3: []}
    decay, no_decay = [], []
    seen: set[int] = set()
    for name, module in model.named_modules():
        for pname, p in module.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            matrix = isinstance(module, nn.Linear) and pname == "weight"
            if matrix and _inside_a_stack(name):
                muon[3 if name.endswith("in_proj") else 1].append(p)
            else:
                (decay if matrix else no_decay).append(p)
    adam = dict(betas=betas, eps=eps)
    groups = [dict(params=ps, muon=True, split=split, lr=muon_lr, lr_scale=muon_lr / lr, momentum=momentum,
                   weight_decay=weight_decay) for split, ps in muon.items() if ps]
    groups += [dict(params=decay, weight_decay=weight_decay, **adam), dict(params=no_decay, weight_decay=0.0, **adam)]
    return [g for g in groups if g["params"]]


def _inside_a_stack(name: str) -> bool:
    return ".layers." in f".{name}"


def muon_parameters(optimizer: torch.optim.Optimizer) -> Iterable[Tensor]:
    """The parameters a ``MuonAdamW`` orthogonalises."""
    return (p for g in optimizer.param_groups if g.get("muon") for p in g["params"])
