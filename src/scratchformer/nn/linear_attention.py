"""Linear attention: Katharopoulos, Vyas, Pappas and Fleuret (2020), "Transformers are RNNs: Fast Autoregressive
Transformers with Linear Attention" (§3.2-§3.4). Chosen with ``attention="linear"``; not in "Attention Is All
You Need", whose equation 1 (``attention.py``) stays the default.

Notation as in ``attention.py``: B batch, H heads, T queries, S keys, D head size.

Equation 1 weighs value j for query i by ``exp(q_i . k_j / sqrt(D))``, normalised over j. Linear attention
replaces that similarity by a dot product of features, ``phi(q_i) . phi(k_j)``, with the feature map
``phi(x) = elu(x) + 1`` (positive, so every weight is >= 0; §3.2.1)::

    out_i = sum_j [phi(q_i) . phi(k_j)] v_j / sum_j phi(q_i) . phi(k_j)            the definition
          = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))          the same, sums first

The sums in the second line do not depend on i: all T queries share one ``(D, D)`` matrix
``s = sum_j phi(k_j) v_j^T`` and one ``D``-vector ``z = sum_j phi(k_j)``, so the cost is O(T D^2), not
O(T S D): linear in the length. That is the non-causal form, used by the encoder's self-attention and the
decoder's cross-attention (every query sees every real key).

Causal (the decoder's self-attention, §3.3): query i may use keys j <= i only, so ``s`` and ``z`` become
prefix sums::

    s_i = s_{i-1} + phi(k_i) v_i^T      z_i = z_{i-1} + phi(k_i)      out_i = phi(q_i)^T s_i / phi(q_i)^T z_i

computed two ways, which the tests prove equal:

- in parallel, for training and for a prompt (``causal_linear_attention``): the prefix sums taken with
  ``cumsum`` over chunks of ``CHUNK`` positions, the pairs inside a chunk directly; no loop over positions;
- as a recurrent network, for generation (``recurrent_linear_attention``, §3.4): ``(s, z)`` is the state
  (a ``LinearAttentionState``, which replaces the KV cache) and each new token updates it in O(D^2), the
  same at position 10 as at position 10,000.

Masks: only key masks (padding) have a linear form; a masked key gets ``phi(k) = 0`` and adds nothing to
either sum. The denominator carries ``+ EPS`` (as the authors' code): a query with no key to attend to gets
``0 / EPS = 0``, never NaN. That eps is the only departure from the equation, and every path has it.

``linear_attention_reference`` is the definition, line for line, with the ``(T, S)`` weights formed: the
only path that returns them (for plots). ``linear_attend`` is the one place that chooses the path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from scratchformer.nn.kv_cache import LinearAttentionState
from scratchformer.nn.masks import causal_mask

EPS = 1e-6  # keeps 0 / 0 (a query with nothing to attend to) at 0
CHUNK = 64  # positions per chunk of the parallel causal form: memory ~ T chunk + (T / chunk) D^2 per head


def elu_feature_map(x: Tensor) -> Tensor:
    """``phi(x) = elu(x) + 1``: x + 1 for x > 0, exp(x) below; always > 0, so weights are never negative."""
    return F.elu(x) + 1.0


def linear_attention_reference(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                               is_causal: bool = False) -> tuple[Tensor, Tensor]:
    """The definition, written out. ``q (B, H, T, D)``, ``k, v (B, H, S, D)``; ``mask`` broadcastable to
    ``(B, H, T, S)``, ``True`` = may attend; ``is_causal`` as in ``attend`` (bottom-right aligned).
    Returns ``(output (B, H, T, D), weights (B, H, T, S))``. Quadratic in the length, as equation 1."""
    scores = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)  # (B, H, T, S): phi(q_i) . phi(k_j) >= 0
    if is_causal:
        causal = causal_mask(q.size(-2), k.size(-2), device=q.device)
        mask = causal if mask is None else mask & causal
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)  # a masked key: similarity 0, so weight 0
    weights = scores / (scores.sum(dim=-1, keepdim=True) + EPS)  # each row sums to 1 (or is all 0)
    return weights @ v, weights  # (B, H, T, D)


def linear_attention_global(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Tensor:
    """Non-causal linear attention with the sums first: ``phi_q (B, H, T, D)``, ``phi_k, v (B, H, S, D)``
    (masked keys' features already zero) -> ``(B, H, T, D)``, in O((T + S) D^2)."""
    s = phi_k.transpose(-2, -1) @ v  # (B, H, D, D): sum_j phi(k_j) v_j^T
    z = phi_k.sum(dim=-2)  # (B, H, D): sum_j phi(k_j)
    return (phi_q @ s) / (phi_q @ z[..., None] + EPS)  # (B, H, T, D) / (B, H, T, 1)


def causal_linear_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor, s0: Tensor | None = None,
                            z0: Tensor | None = None, chunk: int = CHUNK) -> tuple[Tensor, Tensor, Tensor]:
    """Causal linear attention by prefix sums, in parallel over positions.

    ``phi_q, phi_k, v (B, H, T, D)`` (masked keys' features already zero); ``s0 (B, H, D, D)``, ``z0 (B, H, D)``:
    the sums over earlier tokens (a recurrent state), or None at the start. Returns the output
    ``(B, H, T, D)`` and these T tokens' own sums ``sum phi(k) v^T (B, H, D, D)`` and ``sum phi(k) (B, H, D)``.

    A cumsum per position would hold a ``(D, D)`` matrix for each of the T positions; per chunk of ``chunk``
    positions it holds T / chunk of them, and the chunk x chunk pairs inside a chunk are computed directly.
    """
    B, H, T, D = phi_q.shape
    # The chunk size stays fixed whatever T (a short input is padded up to one chunk), so that a traced
    # graph (ONNX, TorchScript) computes the same thing at every length.
    n = (T + chunk - 1) // chunk  # number of chunks
    pad = n * chunk - T  # zero features at the end: they add nothing and are cut off
    q, k, vv = (F.pad(t, (0, 0, 0, pad)).view(B, H, n, chunk, -1) for t in (phi_q, phi_k, v))  # (B, H, N, chunk, D)
    kv = k.transpose(-2, -1) @ vv  # (B, H, N, D, D): each chunk's sum of phi(k) v^T
    ksum = k.sum(dim=-2)  # (B, H, N, D): each chunk's sum of phi(k)
    # Exclusive prefix sums over the chunks: what every token before the chunk contributed.
    s_before = torch.cat([torch.zeros_like(kv[:, :, :1]), kv[:, :, :-1]], dim=2).cumsum(dim=2)
    z_before = torch.cat([torch.zeros_like(ksum[:, :, :1]), ksum[:, :, :-1]], dim=2).cumsum(dim=2)
    if s0 is not None and z0 is not None:
        s_before, z_before = s_before + s0[:, :, None], z_before + z0[:, :, None]
    inside = (q @ k.transpose(-2, -1)).tril()  # (B, H, N, chunk, chunk): phi(q_i) . phi(k_j), j <= i in the chunk
    num = q @ s_before + inside @ vv  # (B, H, N, chunk, D)
    den = (q @ z_before[..., None]).squeeze(-1) + inside.sum(dim=-1)  # (B, H, N, chunk)
    out = (num / (den[..., None] + EPS)).view(B, H, n * chunk, -1)[:, :, :T]  # (B, H, T, D)
    return out, kv.sum(dim=2), ksum.sum(dim=2)


def per_position_prefix_sums(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Tensor:
    """The causal form as the paper writes it, one ``(D, D)`` prefix sum per position: memory O(T D^2).
    Only where shapes are symbolic (``torch.export``, so ONNX), which cannot follow the chunk count
    ``(T + chunk - 1) // chunk`` of ``causal_linear_attention``; the same numbers otherwise."""
    s = (phi_k[..., :, None] * v[..., None, :]).cumsum(dim=2)  # (B, H, T, D, D): s_i = sum_{j<=i} phi(k_j) v_j^T
    z = phi_k.cumsum(dim=2)  # (B, H, T, D): z_i = sum_{j<=i} phi(k_j)
    num = (phi_q[..., None, :] @ s).squeeze(-2)  # (B, H, T, D): phi(q_i)^T s_i
    return num / ((phi_q * z).sum(dim=-1, keepdim=True) + EPS)


def recurrent_linear_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor, state: LinearAttentionState) -> Tensor:
    """The RNN form (§3.4): token by token, each adds ``phi(k) v^T`` and ``phi(k)`` to ``state`` and reads
    it with ``phi(q)``: O(D^2) per token, whatever the number of tokens before. ``(B, H, T, D)`` in and out
    (generation feeds T = 1)."""
    outs = []
    for t in range(phi_q.size(-2)):
        q_t, k_t, v_t = phi_q[:, :, t], phi_k[:, :, t], v[:, :, t]  # (B, H, D) each
        state.add(k_t[..., :, None] * v_t[..., None, :], k_t, 1)  # s += phi(k_t) v_t^T, z += phi(k_t)
        num = (q_t[..., None, :] @ state.s).squeeze(-2)  # (B, H, D): phi(q_t)^T s
        den = (q_t * state.z).sum(dim=-1, keepdim=True)  # (B, H, 1): phi(q_t)^T z
        outs.append(num / (den + EPS))
    return torch.stack(outs, dim=2)  # (B, H, T, D)


def _key_mask(mask: Tensor | None, n_keys: int) -> Tensor | None:
    """The ``(B, H or 1, S)`` key mask inside ``mask`` (broadcastable to ``(B, H, T, S_total)``), for the last
    ``n_keys`` keys (the new ones, when earlier ones are in a state)."""
    if mask is None:
        return None
    if mask.dim() >= 2 and mask.size(-2) != 1:
        raise ValueError("linear attention takes key masks only (padding, shape (B, 1, 1, S)): a mask that "
                         "differs between queries has no linear form; use attention='softmax'")
    return mask[..., 0, -n_keys:] if mask.dim() >= 2 else mask[..., -n_keys:]


def linear_attend(q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | None = None, is_causal: bool = False,
                  state: LinearAttentionState | None = None, need_weights: bool = False,
                  impl: str = "auto") -> tuple[Tensor, Tensor | None]:
    """Linear attention through the reference or the fast path: the one place that chooses.

    ``q (B, H, T, D)``, ``k, v (B, H, S, D)``. ``mask``: boolean key mask broadcastable to ``(B, 1, 1, S)``
    (covering the state's tokens too), ``True`` = may attend. ``state``: a ``LinearAttentionState`` holding the
    earlier tokens (causal only); it absorbs these. ``impl="reference"`` or ``need_weights``: the definition,
    which returns ``(output, weights (B, H, T, S))`` and needs every key (with a state, ``"reference"`` means
    the recurrent form, token by token, and weights cannot be had). Otherwise the sums, and ``(output,
    None)``: non-causal in one go, causal by parallel prefix sums, or with a state and one new token by the
    recurrent step.
    """
    if need_weights and state is not None:
        raise ValueError("linear attention's weights need every key; a recurrent state keeps only their sums")
    if need_weights or (impl == "reference" and state is None):
        return linear_attention_reference(q, k, v, mask, is_causal)
    if state is not None and not is_causal:
        raise ValueError("a recurrent state holds earlier tokens: it is for causal self-attention only")
    if is_causal and state is None and q.size(-2) != k.size(-2):
        raise ValueError(f"causal linear attention needs as many keys as queries ({k.size(-2)} != {q.size(-2)}); "
                         "earlier tokens go in a LinearAttentionState")
    out_dtype = v.dtype
    # The running sums grow with the length: keep them in float32 even under bf16 autocast.
    with torch.autocast(q.device.type, enabled=False):
        phi_q, phi_k, v = elu_feature_map(q.float()), elu_feature_map(k.float()), v.float()
        key_mask = _key_mask(mask, k.size(-2))  # (B, H or 1, S)
        if key_mask is not None:
            phi_k = phi_k * key_mask[..., None]  # a masked key: phi(k) = 0 in both sums
        if not is_causal:
            out = linear_attention_global(phi_q, phi_k, v)
        elif state is None and torch.compiler.is_exporting():
            out = per_position_prefix_sums(phi_q, phi_k, v)
        elif state is None:
            out = causal_linear_attention(phi_q, phi_k, v)[0]
        elif q.size(-2) == 1 or impl == "reference":  # the recurrent form is the state's definition
            out = recurrent_linear_attention(phi_q, phi_k, v, state)
        else:  # a prompt after (or into) a state: in parallel, then its sums go into the state
            out, s, z = causal_linear_attention(phi_q, phi_k, v, state.s, state.z)
            state.add(s, z, q.size(-2))
    return out.to(out_dtype), None
