"""``scratchformer explain``: the data flow of a model for one example input, stage by stage.

Runs one forward pass with hooks on the paper's blocks and prints, in the order they run, each stage with
the tensor shape it produces and the parameters it owns::

    embedding      (B, T) ids -> (B, T, C)            token table V x C, x sqrt(C), + positions
                   (a ViT: (B, ch, S, S) pixels -> (B, 1 + N, C), patches embedded, a class token, + positions)
    self-attention (B, T, C) -> scores (B, H, T, S)   -> (B, T, C)
    feed-forward   (B, T, C) -> (B, T, d_ff) -> (B, T, C)
    add & norm     ...
    logits         (B, T, V)

and then the total parameter count next to ``count_parameters_formula`` (they must agree). Parameters
shared between stages (tied embeddings) are counted where they first appear.

``explain --ckpt RUN --prompt TEXT`` reads a trained checkpoint instead (``explain_lens.py``): what it would
predict after the embeddings and after each layer (the logit lens, ``models/lens.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from scratchformer.families import family
from scratchformer.models import build_model
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.attention import MultiHeadAttention
from scratchformer.nn.config import POOLING_WORDS, ModelConfig
from scratchformer.nn.embedding import Embeddings
from scratchformer.nn.experts import MixtureOfExperts
from scratchformer.nn.feedforward import FeedForward
from scratchformer.nn.layers import DecoderLayer, EncoderLayer, ResidualNorm
from scratchformer.nn.norms import NORMS, RMSNorm
from scratchformer.nn.patches import PatchEmbeddings
from scratchformer.nn.recording import record_attention
from scratchformer.nn.sliding_window import SlidingWindowAttention

__all__ = ["explain"]


def _shape(t: Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


class _Trace:
    """Rows of (depth, stage, shapes, parameters) collected by forward hooks, in execution order."""

    def __init__(self, model: nn.Module, cfg: ModelConfig) -> None:
        self.model, self.cfg = model, cfg
        self.maps: dict[str, Tensor] = {}  # the run's attention weights (record_attention), for their shapes
        self.rows: list[tuple[int, str, str, int | None]] = []
        self.seen: set[int] = set()  # ids of parameters already counted

    def new_params(self, module: nn.Module) -> int:
        n = 0
        for p in module.parameters():
            if id(p) not in self.seen:
                self.seen.add(id(p))
                n += p.numel()
        return n

    def hook(self, name: str, module: nn.Module):  # noqa: ANN201 - a forward hook
        cfg = self.cfg
        depth = name.count(".layers.") + 1 if ".layers." in name else 0

        def after(mod: nn.Module, args: tuple, out: Tensor) -> None:
            if isinstance(mod, Embeddings):
                scale = " x sqrt(C)" if mod.scale != 1.0 else ""
                pos = {"sinusoidal": " + sinusoidal PE", "learned": " + learned positions", "rotary": " (RoPE in q, k)",
                       "none": " (no positions: order-blind)"}
                what = f"{name}: {cfg.vocab_size} x {cfg.d_model} table{scale}{pos[cfg.positional]}"  # type: ignore[index]
                if mod.norm is not None:
                    what += f" + {_norm_name(mod.norm)}"
                self.rows.append((0, what, f"{_shape(args[0])} ids -> {_shape(out)}", self.new_params(mod)))
            elif isinstance(mod, PatchEmbeddings):
                P, ch = cfg.patch_size, cfg.channels
                what = (f"{name}: {cfg.n_patches} patches of {ch} x {P} x {P} -> linear to C, + class token, "
                        f"+ {cfg.positional} positions")
                self.rows.append((0, what, f"{_shape(args[0])} pixels -> {_shape(out)}", self.new_params(mod)))
            elif isinstance(mod, MultiHeadAttention):
                kind = ("cross-attention (k, v: encoder memory)" if name.endswith("cross_attn") else
                        "masked self-attention" if ".decoder." in f".{name}" else "self-attention")
                table = "scores"
                if mod.kind == "linear":  # its weights phi(q).phi(k) / sum are formed here only to show their shape
                    kind, table = kind.replace("self-", "linear self-").replace("cross-", "linear cross-"), "weights"
                w = self.maps.get(name)
                scores = f"{table} {_shape(w)} -> " if w is not None else ""
                qk = ", QK-norm" if mod.q_norm is not None else ""
                if isinstance(mod, SlidingWindowAttention):  # Mistral's, Gemma 3's local layers
                    qk += f", sliding window {mod.window}"
                self.rows.append((depth, f"{kind}, {mod.n_heads} heads of d_k={mod.head_dim}{qk}",
                                  f"{scores}{_shape(out)}", self.new_params(mod)))
            elif isinstance(mod, MixtureOfExperts):
                e, k, fe = len(mod.experts), mod.top_k, cfg.expert_d_ff or cfg.d_ff
                self.rows.append((depth, f"mixture of experts: router C->{e}, top {k} of {e} feed-forwards "
                                  f"{cfg.d_model}->{fe}->{cfg.d_model} ({cfg.activation})", _shape(out),
                                  self.new_params(mod)))
            elif isinstance(mod, FeedForward):
                inner = (*out.shape[:-1], cfg.d_ff)
                act = cfg.activation
                self.rows.append((depth, f"feed-forward {cfg.d_model}->{cfg.d_ff}->{cfg.d_model} ({act})",
                                  f"({', '.join(map(str, inner))}) -> {_shape(out)}", self.new_params(mod)))
            elif isinstance(mod, ResidualNorm):
                norm = _norm_name(mod.norm)
                pre = "residual add (pre-LN)" if norm == "LayerNorm" else f"residual add (pre-norm, {norm})"
                what = pre if mod.pre_norm else f"add & {norm} (post-LN)"
                self.rows.append((depth, what, _shape(out), self.new_params(mod)))
            elif isinstance(mod, NORMS):
                self.rows.append((0, f"{name}: final {_norm_name(mod)}", _shape(out), self.new_params(mod)))
            elif isinstance(mod, nn.Linear):
                label = {"head": "classification head", "pooler": "BERT's pooler, tanh(dense(first token))"}.get(
                    name, "output projection (logits)")
                self.rows.append((0, f"{name}: {label}", f"{_shape(args[0])} -> {_shape(out)}",
                                  self.new_params(mod)))

        return after

    def layer_header(self, name: str):  # noqa: ANN201 - a forward pre-hook
        def before(mod: nn.Module, args: tuple) -> None:
            kind = "encoder" if isinstance(mod, EncoderLayer) else "decoder"
            self.rows.append((1, f"{name} ({kind} layer)", "", None))

        return before


def _norm_name(norm: nn.Module) -> str:
    return "RMSNorm" if isinstance(norm, RMSNorm) else "LayerNorm"


def explain(cfg: ModelConfig, *, batch: int = 1, length: int = 8, target_length: int | None = None,
            seed: int = 0, predict_tokens: bool = False) -> str:
    """The data-flow table of a freshly built ``cfg`` model on a random ``(batch, length)`` input.
    ``predict_tokens`` (encoder only): the masked-token pretraining path (``task=mlm``), every position
    predicted through the tied embedding table, instead of pooling and the classification head."""
    torch.manual_seed(seed)
    model = build_model(cfg).eval()
    if predict_tokens and not hasattr(model, "predict_tokens"):
        raise ValueError("predict_tokens is the encoder classifier's masked-token path")
    length = min(length, cfg.max_len)
    trace = _Trace(model, cfg)
    handles = []
    for name, mod in model.named_modules():
        if isinstance(mod, (EncoderLayer, DecoderLayer)):
            handles.append(mod.register_forward_pre_hook(trace.layer_header(name)))
        top_norm = isinstance(mod, NORMS) and name in ("encoder.norm", "decoder.norm")
        blocks = (Embeddings, PatchEmbeddings, MultiHeadAttention, FeedForward, MixtureOfExperts, ResidualNorm)
        if ".experts." in f"{name}.":  # an expert: its mixture's row counts it
            continue
        if isinstance(mod, blocks) or top_norm or (
                isinstance(mod, nn.Linear) and name in ("head", "lm_head", "pooler")):
            handles.append(mod.register_forward_hook(trace.hook(name, mod)))
    inputs = (f"images {cfg.image_size} x {cfg.image_size} x {cfg.channels}" if family(cfg.arch).reads_pixels
              else f"vocab V={cfg.vocab_size}")
    lines = [f"{cfg.arch} model: d_model C={cfg.d_model}, heads H={cfg.n_heads} (d_k={cfg.d_model // cfg.n_heads}), "
             f"d_ff={cfg.d_ff}, {inputs}, norm={cfg.norm}, activation={cfg.activation}, positions={cfg.positional}"]
    if cfg.attention != "softmax":
        lines[0] += f", attention={cfg.attention} (phi(q) . phi(k), phi = elu + 1, in place of softmax)"
    try:
        with torch.no_grad(), record_attention(model) as trace.maps:  # the hooks read the weights' shapes
            what, out = _run(model, cfg, batch, length, min(target_length or length, cfg.max_len), predict_tokens)
    finally:
        for h in handles:
            h.remove()
    lines.append(what)
    _closing_rows(trace, model, out, batch, length, predict_tokens)
    return "\n".join(lines + _table(trace, model, cfg, out))


def _run(model: nn.Module, cfg: ModelConfig, batch: int, length: int, T: int,
         predict_tokens: bool) -> tuple[str, Tensor]:
    """Run the model on random inputs: the line that says what they were, and the output."""
    if family(cfg.arch).reads_pixels:
        images = torch.rand(batch, cfg.channels, cfg.image_size, cfg.image_size)
        return (f"input: images (B={batch}, ch={cfg.channels}, {cfg.image_size}, {cfg.image_size}) "
                "(random pixels: shapes, not meaning)", model(images))
    ids = torch.randint(4, max(cfg.vocab_size, 5), (batch, length))
    if family(cfg.arch).two_stacks:  # a source, and the target so far
        tgt = torch.randint(4, cfg.target_vocab_size, (batch, T))
        return (f"input: source ids (B={batch}, S={length}), target ids so far (B={batch}, T={T}) "
                "(random ids: shapes, not meaning)", model(ids, tgt))
    every = torch.ones_like(ids, dtype=torch.bool)
    out = model.predict_tokens(ids, None, every) if predict_tokens else model(ids)
    return f"input: token ids (B={batch}, T={length}) (random ids: shapes, not meaning)", out


def _closing_rows(trace: _Trace, model: nn.Module, out: Tensor, batch: int, length: int,
                  predict_tokens: bool) -> None:
    """The stages no hook sees: tied output projections, pooling, the class token."""
    cfg, entry = trace.cfg, family(trace.cfg.arch)
    if entry.predicts_tokens and getattr(model, "lm_head", None) is None:
        trace.rows.append((0, "logits = h @ table^T (tied embedding)",
                           _shape(out), 0))
    if predict_tokens:
        trace.rows.append((0, "logits = h @ table^T (tied embedding), masked positions (here all)",
                           f"({batch * length}, {cfg.d_model}) -> {_shape(out)}", 0))
        if model.pooler is not None:
            trace.rows.append((0, "pooler: BERT's pooler (unused while pretraining)", "",
                               trace.new_params(model.pooler)))
        trace.rows.append((0, "head: classification head (unused while pretraining)", "",
                           trace.new_params(model.head)))
    elif entry.classifies and cfg.pooling != "pooler":  # the pooler's own row stands for the pooling
        what = ("the class token's final state [:, 0]" if entry.reads_pixels
                else f"{cfg.pooling} pooling: {POOLING_WORDS[cfg.pooling]}")
        trace.rows.insert(len(trace.rows) - 1, (0, what, f"({batch}, {cfg.d_model})", 0))


def _table(trace: _Trace, model: nn.Module, cfg: ModelConfig, out: Tensor) -> list[str]:
    """The rows as a table, then the parameter totals and the output's shape."""
    width = max(2 * d + len(s) for d, s, _, _ in trace.rows) + 2
    lines = ["", f"{'stage':<{width}}{'output shape':<36}{'parameters':>12}"]
    for depth, stage, shape, n in trace.rows:
        count = "" if n is None else f"{n:,}"
        lines.append(f"{'  ' * depth + stage:<{width}}{shape:<36}{count:>12}".rstrip())
    total = sum(p.numel() for p in model.parameters())
    formula = count_parameters_formula(cfg)
    counted = sum(n for *_, n in trace.rows if n)
    lines.append("")
    lines.append(f"total parameters: {total:,} (sum of the stages: {counted:,}; analytic formula: {formula:,}: "
                 f"{'match' if total == formula == counted else 'MISMATCH'})")
    lines.append(f"output: {_shape(out)}")
    return lines
