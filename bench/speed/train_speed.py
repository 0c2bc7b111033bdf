"""How fast does the GPT train against nanoGPT, Hugging Face GPT-2, x-transformers and `torch.nn`, in one process?

Training-step speed of scratchformer's GPT against peers, side by side in one process.

    python bench/speed/train_speed.py --nanogpt ../nanoGPT     # both configs, all peers
    python bench/speed/train_speed.py --config small --steps 30 --rounds 5

Peers, all at the same shapes, same random token batches, same AdamW:

- ``nanoGPT``: Karpathy's ``model.py``, imported from the checkout given with ``--nanogpt DIR`` (it is
  MIT-licensed and public; nothing of it is copied here); its ``forward(idx, targets)`` computes the loss
  itself, as in its own training loop;
- ``hf-gpt2``:  Hugging Face ``GPT2LMHeadModel`` (its default attention implementation, SDPA);
- ``x-transformers``: lucidrains' ``TransformerWrapper`` + ``Decoder`` (``pip install x-transformers``;
  skipped with a note if it is not installed), flash/SDPA attention, tied embeddings;
- ``torch.nn``: a GPT built from ``torch.nn.TransformerEncoder`` (pre-LN, GELU, causal mask via
  ``is_causal``), learned positions and a tied output layer, the way a careful user would write it.

Configs:

- ``small``: nanoGPT's Tiny Shakespeare CPU config (the ``shakespeare-char`` preset): vocab 65, block 64,
  batch 12, 4 layers, 4 heads, d 128, dropout 0, no biases (nanoGPT's ``bias = False``; Hugging Face's
  GPT-2 and x-transformers keep theirs, so they do slightly more work).
- ``mid``: vocab 65, block 256, batch 16, 6 layers, 6 heads, d 384, dropout 0. Also prints model FLOP/s
  (see ``model_flops_per_token``) as a fraction of this machine's measured fp32 matmul peak.

Timing: the models take turns (round-robin, ``--rounds`` rounds of ``--steps`` steps each, after warm-up)
so that slow phases of a noisy machine hit all of them; the median round is reported. Each step is
forward + cross-entropy + backward + AdamW step + zero_grad.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from scratchformer import GPT, ModelConfig


@dataclass
class BenchConfig:
    name: str
    vocab: int
    block: int
    batch: int
    n_layers: int
    n_heads: int
    d_model: int
    bias: bool = True


CONFIGS = {
    "small": BenchConfig("small", vocab=65, block=64, batch=12, n_layers=4, n_heads=4, d_model=128, bias=False),
    "mid": BenchConfig("mid", vocab=65, block=256, batch=16, n_layers=6, n_heads=6, d_model=384),
}
NANOGPT_DIR: Path | None = None  # set by --nanogpt
COMPILE = False  # set by --compile
PROFILE = False  # set by --profile


# ------------------------------------------------------------------------------------ models


def ours(c: BenchConfig) -> nn.Module:
    cfg = ModelConfig(arch="gpt", vocab_size=c.vocab, d_model=c.d_model, n_heads=c.n_heads, n_layers=c.n_layers,
                      d_ff=4 * c.d_model, max_len=c.block, dropout=0.0, bias=c.bias)
    return GPT(cfg)


def nanogpt(c: BenchConfig) -> nn.Module:
    """nanoGPT's GPT from its checkout, called with targets: its own forward computes the loss."""
    if NANOGPT_DIR is None:
        raise SystemExit("the nanoGPT peer needs --nanogpt DIR (a checkout of github.com/karpathy/nanoGPT)")
    spec = importlib.util.spec_from_file_location("nanogpt_model", NANOGPT_DIR / "model.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["nanogpt_model"] = module  # torch.compile looks the module up by name
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    cfg = module.GPTConfig(block_size=c.block, vocab_size=c.vocab, n_layer=c.n_layers, n_head=c.n_heads,
                           n_embd=c.d_model, dropout=0.0, bias=c.bias)

    class NanoGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = module.GPT(cfg)

        takes_targets = True  # nanoGPT computes the loss in its forward (without targets: last position only)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.model(x, y)[1]

    return NanoGPT()


def hf_gpt2(c: BenchConfig) -> nn.Module:
    import transformers

    cfg = transformers.GPT2Config(vocab_size=c.vocab, n_positions=c.block, n_embd=c.d_model, n_layer=c.n_layers,
                                  n_head=c.n_heads, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  use_cache=False, bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(cfg)

    class Logits(nn.Module):  # same call signature as the others: ids -> logits
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids, use_cache=False).logits

    return Logits()


class TorchNNGPT(nn.Module):
    """A GPT from torch.nn.TransformerEncoder: the baseline most PyTorch users would write."""

    def __init__(self, c: BenchConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(c.vocab, c.d_model)
        self.pos = nn.Embedding(c.block, c.d_model)
        layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, 4 * c.d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True, bias=c.bias)
        self.blocks = nn.TransformerEncoder(layer, c.n_layers, norm=nn.LayerNorm(c.d_model),
                                            enable_nested_tensor=False)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(c.block), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.size(1)
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))
        x = self.blocks(x, mask=self.causal[:T, :T], is_causal=True)
        return F.linear(x, self.tok.weight)


def x_transformers_gpt(c: BenchConfig) -> nn.Module:
    """lucidrains' x-transformers with its plain GPT settings (pre-LN, GELU, learned absolute positions,
    tied embeddings off by default: we tie them, as the others do)."""
    from x_transformers import Decoder, TransformerWrapper

    return TransformerWrapper(num_tokens=c.vocab, max_seq_len=c.block, tie_embedding=True,
                              attn_layers=Decoder(dim=c.d_model, depth=c.n_layers, heads=c.n_heads, ff_mult=4,
                                                  attn_dim_head=c.d_model // c.n_heads, attn_flash=True))


PEERS = {"scratchformer": ours, "nanoGPT": nanogpt, "hf-gpt2": hf_gpt2, "x-transformers": x_transformers_gpt,
         "torch.nn": TorchNNGPT}


# ------------------------------------------------------------------------------------ measuring


def model_flops_per_token(c: BenchConfig) -> float:
    """Training FLOPs per token: 6 x (matmul parameters) + attention scores and mixing.

    Matmul parameters per layer: 4 C^2 (attention) + 8 C^2 (FFN), plus the V x C output layer.
    Attention: QK^T and AV cost 2 x 2 T C per token per layer forward, x3 for forward + backward
    (the PaLM / nanoGPT convention, counting the full T x T square).
    """
    C, L, T = c.d_model, c.n_layers, c.block
    n_matmul = L * 12 * C * C + c.vocab * C
    return 6 * n_matmul + 12 * L * T * C


def matmul_peak_flops(n: int = 2048, seconds: float = 1.0) -> float:
    """Measured fp32 matmul throughput of this machine (FLOP/s): the best of repeated n^3 matmuls."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    best = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - t))
    return best


def time_training(c: BenchConfig, names: list[str], steps: int, rounds: int, warmup: int,
                  peaks: list[float] | None = None) -> dict[str, list[float]]:
    """Seconds per step of each model, one entry per round. With ``peaks``, the matmul peak is also
    measured before each round and after the last (appended to it), so that each round can be compared
    with the peak measured around it: these machines are shared and their speed drifts."""
    torch.manual_seed(0)
    data = [torch.randint(0, c.vocab, (c.batch, c.block + 1)) for _ in range(8)]
    batches = [(d[:, :-1].contiguous(), d[:, 1:].contiguous()) for d in data]  # as nanoGPT's get_batch
    runners = {}
    for name in names:
        torch.manual_seed(0)
        model = PEERS[name](c).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if COMPILE:  # every contestant compiled the same way (torch.compile's default, inductor)
            model = torch.compile(model)

        def step(i: int, model: nn.Module = model, opt: torch.optim.Optimizer = opt) -> float:
            x, y = batches[i % len(batches)]
            if getattr(model, "takes_targets", False):
                loss = model(x, y)
            else:
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.item()

        for i in range(warmup):
            step(i)
        runners[name] = step
    if PROFILE:  # where one step's time goes, per contestant: torch.profiler's self CPU time by operator
        from torch.profiler import ProfilerActivity, profile

        for name, step in runners.items():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for i in range(steps):
                    step(i)
            print(f"\n--- profile: {name}, {steps} steps ---")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=45))
    per_round: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(rounds):
        if peaks is not None:
            peaks.append(matmul_peak_flops())
        for name, step in runners.items():
            t = time.perf_counter()
            for i in range(steps):
                step(i)
            per_round[name].append((time.perf_counter() - t) / steps)
    if peaks is not None:
        peaks.append(matmul_peak_flops())
    return per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=[*CONFIGS, "all"], default="all")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ", ".join(PEERS))
    parser.add_argument("--steps", type=int, default=0, help="steps per round (default: per config)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--compile", action="store_true", help="torch.compile every contestant (a C++ compiler "
                        "is needed on CPU); the warm-up then includes compiling")
    parser.add_argument("--profile", action="store_true", help="print where each contestant's step time goes")
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout (its model.py is imported); "
                        "without it the nanoGPT peer is left out")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.peers.split(",")
    global NANOGPT_DIR, COMPILE, PROFILE
    NANOGPT_DIR, COMPILE, PROFILE = args.nanogpt, args.compile, args.profile
    if "nanoGPT" in names and (args.nanogpt is None or not (args.nanogpt / "model.py").is_file()):
        print("no nanoGPT checkout given (--nanogpt DIR with its model.py): left out")
        names.remove("nanoGPT")
    if "x-transformers" in names:
        try:
            import x_transformers  # noqa: F401
        except ImportError:
            print("x-transformers is not installed (pip install x-transformers): left out")
            names.remove("x-transformers")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}"
          + (", every model torch.compile'd" if COMPILE else ", eager"))
    results = {}
    for cname in CONFIGS if args.config == "all" else [args.config]:
        c = CONFIGS[cname]
        steps = args.steps or (20 if cname == "small" else 2)
        peaks: list[float] = []
        rounds = time_training(c, names, steps, args.rounds, warmup=3 if cname == "small" else 1,
                               peaks=peaks if cname == "mid" else None)
        sec = {n: statistics.median(v) for n, v in rounds.items()}
        tokens = c.batch * c.block
        print(f"\n[{cname}] vocab {c.vocab}, block {c.block}, batch {c.batch}, {c.n_layers} layers, "
              f"{c.n_heads} heads, d {c.d_model}; median of {args.rounds} rounds x {steps} steps")
        for name, s in sec.items():
            ratio = sec[name] / sec["scratchformer"] if "scratchformer" in sec else float("nan")
            print(f"  {name:14s} {1000 * s:8.1f} ms/step  {tokens / s:9.0f} tokens/s   "
                  f"scratchformer speed-up vs this: {ratio:.2f}x")
        entry: dict[str, object] = {"ms_per_step": {n: 1000 * s for n, s in sec.items()}}
        if peaks and "scratchformer" in sec:
            flops = model_flops_per_token(c) * tokens
            # per round: model FLOP/s over the mean of the peaks measured just before and after it
            fractions = [flops / t / ((p0 + p1) / 2) for t, p0, p1 in zip(rounds["scratchformer"], peaks, peaks[1:])]
            frac, peak = statistics.median(fractions), max(peaks)
            print(f"  fp32 matmul peak (2048^3, measured between rounds): {min(peaks) / 1e9:.0f}-"
                  f"{peak / 1e9:.0f} GFLOP/s; scratchformer: {flops / sec['scratchformer'] / 1e9:.0f} GFLOP/s "
                  f"of model FLOPs = {100 * frac:.0f}% of peak (median over rounds; "
                  f"{100 * flops / sec['scratchformer'] / peak:.0f}% of the highest peak seen)")
            entry.update(peak_gflops=[p / 1e9 for p in peaks], model_gflops=flops / sec["scratchformer"] / 1e9,
                         fraction_of_peak=frac)
        results[cname] = entry
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
