"""GRPO's objective (Shao et al. 2024, "DeepSeekMath", §4.1), as ``trl`` 1.16's ``GRPOTrainer`` computes it, term for
term, so that the two agree to float precision on the same batch (``tests/test_grpo_trl.py``).

For a problem q, G answers o_1..o_G are sampled from the policy as it was (pi_old) and scored, r_1..r_G. Each answer's
**advantage** is its reward relative to its group (``group_advantages``):

    A_i = (r_i - mean(r)) / (std(r) + 1e-4)          std: the group's, unbiased (scale_rewards=group), the whole
                                                     batch's (batch), or none: A_i = r_i - mean(r) (Dr. GRPO)

so that only the answers better than their siblings are pushed up. Every token t of answer i then gets the clipped
policy-gradient term of PPO (Schulman et al. 2017), with ratio rho = pi(o_it | ...) / pi_old(o_it | ...):

    l_it = -min(rho A_i, clip(rho, 1 - eps, 1 + eps_high) A_i)  +  beta rho KL_it
    KL_it = pi_ref / pi - log(pi_ref / pi) - 1        (Schulman's k3 estimator of KL(pi || pi_ref), per token)

the KL term weighted by the ratio (its value unchanged at rho = 1, its gradient the unbiased one of the reverse KL for
answers drawn from pi_old: DeepSeek-V3.2, 2025; trl's ``use_bias_correction_kl``, on by default).

and the loss averages the l_it, three ways (``loss_type``):

    grpo     the mean over each answer's tokens, then over answers (the paper's 1/G sum 1/|o_i| sum_t): a long answer's
             tokens weigh less, which favours long wrong answers (Liu et al. 2025, "Understanding R1-Zero-Like
             Training", Dr. GRPO);
    dr_grpo  the sum over all tokens divided by (answers x the completion budget): a constant, no length bias;
    dapo     the sum over all tokens divided by the number of answer tokens in the batch (Yu et al. 2025, DAPO's
             token-level loss): every token weighs the same. trl's default, and this project's.

Log-probabilities are of the logits divided by the sampling temperature (the distribution the answers were drawn
from), as trl takes them. With one update per batch of answers, pi_old is the policy itself (rho = 1, its gradient
that of log pi); with more, the batch's old log-probabilities are kept from when it was drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["PER_ANSWER", "Surrogate", "group_advantages", "surrogate", "token_logps"]

PER_ANSWER = "grpo"  # the loss type that averages each answer's tokens first (the others: all tokens together)


def group_advantages(rewards: Tensor, group: int, scale: str = "group") -> Tensor:
    """``rewards (N,)``, consecutive groups of ``group`` answers to one problem -> each answer's advantage ``(N,)``."""
    grouped = rewards.view(-1, group)
    mean = grouped.mean(1).repeat_interleave(group)
    advantages = rewards - mean
    if scale == "none":
        return advantages
    if scale == "group":
        std = grouped.std(1).repeat_interleave(group)  # unbiased (Bessel's n - 1), as trl's nanstd
    else:  # batch
        std = rewards.std().expand_as(rewards)
    return torch.nan_to_num(advantages / (std + 1e-4), nan=0.0)


def token_logps(model: nn.Module, prompt: Tensor, prompt_mask: Tensor, answer: Tensor, answer_mask: Tensor,
                temperature: float) -> tuple[Tensor, Tensor]:
    """Each answer token's log-probability under ``model`` and the entropy of its distribution, ``(N, C)`` each:
    the prompt ``(N, P)`` left-padded and the answer ``(N, C)`` right-padded read as one row, the logits of the
    positions that predict the answer's tokens divided by ``temperature``."""
    ids = torch.cat([prompt, answer], 1)  # (N, P + C)
    mask = torch.cat([prompt_mask, answer_mask], 1).bool()
    logits = model(ids, mask)[:, prompt.size(1) - 1:-1].float() / temperature  # (N, C, V): each predicts the next
    logp = F.log_softmax(logits, -1)
    token = logp.gather(-1, answer[..., None])[..., 0]  # (N, C)
    entropy = -(logp.exp() * logp).sum(-1)
    return token, entropy


@dataclass
class Surrogate:
    """A batch's loss, summed (divide by ``count``: the caller's global normaliser), and what it measured: the share
    of answer tokens whose ratio was clipped, the mean KL to the reference (with ``beta > 0``)."""

    loss_sum: Tensor
    clipped: float
    kl: float | None


def surrogate(logps: Tensor, old: Tensor | None, ref: Tensor | None, advantages: Tensor, mask: Tensor, *,
              epsilon: float, epsilon_high: float, beta: float, loss_type: str) -> Surrogate:
    """GRPO's loss of a batch (module docstring), summed as ``loss_type`` averages it: per answer for ``grpo`` (divide
    by the answers), per token for ``dr_grpo`` (by answers x budget) and ``dapo`` (by answer tokens)."""
    mask = mask.to(logps.dtype)
    old = logps.detach() if old is None else old
    ratio = torch.exp(logps - old)  # (N, C)
    clipped_ratio = torch.clamp(ratio, 1 - epsilon, 1 + epsilon_high)
    adv = advantages[:, None]
    per_token = -torch.min(ratio * adv, clipped_ratio * adv)
    kl = None
    if beta:
        assert ref is not None
        per_token_kl = torch.exp(ref - logps) - (ref - logps) - 1
        per_token = per_token + beta * per_token_kl * ratio  # weighted by rho: its gradient unbiased (module docstring)
        kl = float((per_token_kl.detach() * mask).sum() / mask.sum().clamp(min=1))
    if loss_type == PER_ANSWER:
        loss_sum = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)).sum()
    else:
        loss_sum = (per_token * mask).sum()
    out_of_range = ((ratio < 1 - epsilon) & (adv < 0)) | ((ratio > 1 + epsilon_high) & (adv > 0))
    clipped = float((out_of_range.to(mask.dtype) * mask).sum() / mask.sum().clamp(min=1))
    return Surrogate(loss_sum, clipped, kl)
