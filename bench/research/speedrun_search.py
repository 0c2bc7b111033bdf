"""The CPU speedrun's recipes compared at a fixed budget: dozens of candidates, each trained for the steps the
preset's budget buys, scored on the whole validation block.

    python bench/research/speedrun_search.py cost --out results/speedrun-search/cost.json      # on 2 CPU cores
    python bench/research/speedrun_search.py search --cost cost.json --out DIR [--minutes 8]   # on a GPU
    python bench/research/speedrun_search.py search --cost cost.json --out DIR --around NAME --vary WORDS ...

A recipe's result depends on its steps and settings, not on the clock, so the search fixes the budget and runs
where a run takes seconds (a GPU), then the best recipe is confirmed on 2 CPU cores with the clock
(``bench/speed/speedrun.py``). The budget is the preset's as the search found it (``BASE``, the words that
restore it): ``BASE_STEPS`` steps of 32 x 128 characters. A
candidate that changes what a step costs (its context, batch, shape, activation, positions) gets the steps that
fit the same CPU time: ``cost`` measures each such shape's training step on this machine's 2 cores, taking turns
with the preset's shape, and ``search`` gives each candidate ``BASE_STEPS x cost(preset) / cost(candidate)``.

The search runs in float32 without TF32 and with Muon's Newton-Schulz iteration in float32, as the CPU runs it,
so that its losses carry over. It goes in phases, as many runs at once as ``--workers``: every candidate on one
seed (the preset on three); the best third on two more; then the winners stacked, on three seeds; then, with the
time left, the best of all with its rates and schedule retuned (``TUNING``). ``--around NAME --vary ...`` runs the
same phases on one candidate and its variants only. Each run is ``scratchformer train --preset
shakespeare-char-speedrun WORDS max_steps=N`` in a process of its own, then ``scratchformer evaluate --data
VAL.txt`` on its kept checkpoint; a few candidates are not settings of the library yet but changes tried
here first (``PATCHES``: monkeypatches, the same in training and scoring); a winner among them becomes a
setting before it enters the preset. Writes ``DIR/runs.jsonl`` (a line per run) and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

PRESET = "shakespeare-char-speedrun"
# the preset as the search found it (before it took the search's winners): every candidate's words are changes to it
BASE = ["positional=learned", "max_len=128", "batch_size=32", "n_heads=6", "decay_fraction=0.4", "decay_shape=cosine"]
BASE_STEPS = 890  # its steps in 9 min 40 s on the 2-core machine of the record table
SEEDS = (1337, 1338, 1339)
# model and batch settings that change what a step costs (the others change only numbers)
COST_KEYS = ("max_len", "batch_size", "n_layers", "d_model", "n_heads", "d_ff", "activation", "positional",
             "norm_type", "qk_norm", "tie_embeddings", "bias")

# name -> (settings changed from the preset, patches)
CANDIDATES: dict[str, tuple[list[str], list[str]]] = {
    "preset": ([], []),
    # what settings of the library already cover
    "rotary": (["positional=rotary"], []),
    "rmsnorm": (["norm_type=rmsnorm"], []),
    "qk_norm": (["qk_norm=true"], []),
    "relu2": (["activation=relu2"], []),
    "swiglu": (["activation=swiglu", "d_ff=512"], []),
    "zero_out": (["init=zero_out"], []),
    "untied": (["tie_embeddings=false"], []),
    "wd0": (["weight_decay=0"], []),
    "wd0.3": (["weight_decay=0.3"], []),
    "ema0.99": (["ema_decay=0.99"], []),
    "warmup0": (["warmup_fraction=0"], []),
    "warmup0.1": (["warmup_fraction=0.1"], []),
    "decay0.25": (["decay_fraction=0.25"], []),
    "decay0.6": (["decay_fraction=0.6"], []),
    "decay0.8": (["decay_fraction=0.8"], []),
    "muon0.03": (["muon_lr=0.03"], []),
    "muon0.04": (["muon_lr=0.04"], []),
    "muon0.015": (["muon_lr=0.015"], []),
    "lr4e-3": (["lr=4e-3"], []),
    "lr8e-3": (["lr=8e-3"], []),
    "lr1e-3": (["lr=1e-3"], []),
    "beta2_0.95": (["beta2=0.95"], []),
    "beta1_0.8": (["beta1=0.8"], []),
    "clip0": (["grad_clip=0"], []),
    "ctx256": (["max_len=256", "batch_size=16"], []),
    "ctx512": (["max_len=512", "batch_size=8"], []),
    "ctx64": (["max_len=64", "batch_size=64"], []),
    "ctx256_b24": (["max_len=256", "batch_size=24"], []),
    "ctx256_b12": (["max_len=256", "batch_size=12"], []),
    "batch16": (["batch_size=16"], []),
    "batch24": (["batch_size=24"], []),
    "batch48": (["batch_size=48"], []),
    "wide4": (["n_layers=4", "d_model=240", "n_heads=6", "d_ff=960"], []),
    "deep8": (["n_layers=8", "d_model=168", "n_heads=6", "d_ff=672"], []),
    "wide4_256": (["n_layers=4", "d_model=256", "n_heads=8", "d_ff=1024"], []),
    "five216": (["n_layers=5", "d_model=216", "n_heads=6", "d_ff=864"], []),
    "heads3": (["n_heads=3"], []),
    "heads12": (["n_heads=12"], []),
    "ff3": (["d_ff=576"], []),
    # not settings yet: tried here first (PATCHES)
    "softcap30": ([], ["softcap:30"]),
    "softcap15": ([], ["softcap:15"]),
    "unet": ([], ["unet"]),
    "value_embed": ([], ["value_embed:2"]),
    "cooldown_linear": (["decay_shape=linear"], []),  # tried as a patch first, now a setting
    "cooldown_sqrt": (["decay_shape=1-sqrt"], []),
    "muon_momentum_warmup": ([], ["momentum_warmup:300"]),
    "muon_no_shape_scale": ([], ["muon_scale:none"]),
    "muon_shape_scale_full": ([], ["muon_scale:full"]),
    "untied_head_zero": (["tie_embeddings=false"], ["head_zero"]),
    "untied_head_lr0.2": (["tie_embeddings=false"], ["head_lr:0.2"]),
    # a few stacks chosen beforehand
    "modern": (["positional=rotary", "norm_type=rmsnorm", "qk_norm=true", "activation=relu2", "init=zero_out"],
               []),
    "rotary_ctx256": (["positional=rotary", "max_len=256", "batch_size=16"], []),
    "rotary_ctx512": (["positional=rotary", "max_len=512", "batch_size=8"], []),
    "modern_ctx256": (["positional=rotary", "norm_type=rmsnorm", "qk_norm=true", "activation=relu2",
                       "init=zero_out", "max_len=256", "batch_size=16"], []),
    "modern_ctx256_fast": (["positional=rotary", "norm_type=rmsnorm", "qk_norm=true", "activation=relu2",
                            "init=zero_out", "max_len=256", "batch_size=16", "muon_lr=0.03", "lr=4e-3"], []),
}


# phase 4's changes to the best recipe
TUNING = ["muon_lr=0.03", "muon_lr=0.015", "lr=4e-3", "lr=1e-3", "decay_fraction=0.6", "decay_fraction=0.25",
          "warmup_fraction=0", "weight_decay=0", "muon_lr=0.04", "weight_decay=0.3"]
# run first, in case the time runs out: the likeliest to matter
FIRST = ["preset", "ctx256", "rotary", "rotary_ctx256", "modern", "modern_ctx256", "ctx512", "rotary_ctx512",
         "relu2", "qk_norm", "untied", "softcap30", "unet", "value_embed", "batch16", "muon0.03", "lr4e-3"]


# ---------------------------------------------------------------------------------------------------- patches
def patch_softcap(cap: str) -> None:
    """logits = cap * tanh(logits / cap) (Gemma 2; the NanoGPT speedrun)."""
    import torch

    from scratchformer.models.gpt import GPT

    c = float(cap)
    plain = GPT.forward

    def forward(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return c * torch.tanh(plain(self, *args, **kwargs) / c)

    GPT.forward = forward


def patch_unet(_: str = "") -> None:
    """The first half's layer outputs added, with learned weights (from 1), to the second half's inputs in
    reverse order (the NanoGPT speedrun's U-net skips)."""
    import torch
    from torch import nn

    from scratchformer.models.gpt import GPT
    from scratchformer.nn.layers import Decoder
    from scratchformer.nn.masks import key_padding_to_attention_mask

    init = GPT.__init__

    def __init__(self, config):  # noqa: ANN001, ANN202
        init(self, config)
        self.decoder.skip_weights = nn.Parameter(torch.ones(len(self.decoder.layers) // 2))

    def forward(self, x, memory=None, *, key_mask=None, memory_key_mask=None, positions=None, cache=None):  # noqa
        self_mask = None if key_mask is None else key_padding_to_attention_mask(key_mask)
        n, skips = len(self.layers), []
        for i, layer in enumerate(self.layers):
            if i >= n - n // 2:
                x = x + self.skip_weights[n - 1 - i] * skips.pop()
            x = layer(x, self_mask=self_mask, positions=positions, cache=None if cache is None else cache.self_attn[i])
            if i < n // 2:
                skips.append(x)
        return x if self.norm is None else self.norm(x)

    GPT.__init__, Decoder.forward = __init__, forward


def patch_value_embed(k: str) -> None:
    """k token tables whose rows are added to the values of layer i and of layer n-1-i, i < k (the NanoGPT
    speedrun's value embeddings)."""
    from torch import nn

    from scratchformer.models.gpt import GPT
    from scratchformer.nn.attention import MultiHeadAttention

    k_ = int(k)
    init, hidden = GPT.__init__, GPT.hidden_states

    def __init__(self, config):  # noqa: ANN001, ANN202
        init(self, config)
        self.value_embeds = nn.ModuleList(nn.Embedding(config.vocab_size, config.d_model) for _ in range(k_))
        for e in self.value_embeds:
            nn.init.normal_(e.weight, std=0.02)

    def hidden_states(self, input_ids, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        layers = self.decoder.layers
        for layer in layers:
            layer.self_attn._ve = None
        for i, table in enumerate(self.value_embeds):
            ve = table(input_ids)
            layers[i].self_attn._ve = ve
            layers[len(layers) - 1 - i].self_attn._ve = ve
        return hidden(self, input_ids, *args, **kwargs)

    def forward(self, x, *, mask=None, is_causal=False, positions=None, cache=None):  # noqa: ANN001, ANN202
        B, T, C = x.shape
        qkv = self.in_proj(x).view(B, T, 3, self.n_heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        ve = getattr(self, "_ve", None)
        if ve is not None:
            v = v + self._split_heads(ve)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q, positions), self.rope(k, positions)
        return self._attend(q, k, v, mask, is_causal, cache)

    GPT.__init__, GPT.hidden_states, MultiHeadAttention.forward = __init__, hidden_states, forward


def patch_momentum_warmup(steps: str) -> None:
    """Muon's momentum from 0.85 to 0.95 over the first N steps (the NanoGPT speedrun)."""
    from scratchformer.train.muon import MuonAdamW

    n, plain = int(steps), MuonAdamW._muon

    def _muon(self, params):  # noqa: ANN001, ANN202
        self._t = getattr(self, "_t", 0) + 1
        for _, group in params:
            group["momentum"] = 0.85 + 0.10 * min(1.0, self._t / n)
        return plain(self, params)

    MuonAdamW._muon = _muon


def patch_muon_scale(kind: str) -> None:
    """Muon's rate per matrix shape: none (1 for every matrix) or full (rows / cols, not its square root)."""
    import torch

    from scratchformer.train import muon as m

    def _muon(self, params):  # noqa: ANN001, ANN202 - MuonAdamW._muon with another shape factor
        blocks = {}
        for i, (p, group) in enumerate(params):
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).add_(p.grad)
            g = p.grad.add(buf, alpha=group["momentum"]) if group["nesterov"] else buf
            g = g.reshape(group["split"], g.size(0) // group["split"], -1)
            dtype = group["ns_dtype"] or m.fast_ns_dtype(p.device)
            g = g.mT if g.size(-2) > g.size(-1) else g
            blocks.setdefault((*g.shape[1:], p.device, dtype, group["ns_steps"]), []).append((i, g))
        for (*_, dtype, steps), members in blocks.items():
            updates = m.newton_schulz(torch.cat([g for _, g in members]), steps, dtype=getattr(torch, dtype))
            for (i, _), update in zip(members, updates.split([len(g) for _, g in members])):
                p, group = params[i]
                rows, cols = p.size(0) // group["split"], p.size(1)
                update = (update.mT if rows > cols else update).reshape_as(p)
                scale = 1.0 if kind == "none" else max(1.0, rows / cols)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(update, alpha=-group["lr"] * scale)

    m.MuonAdamW._muon = _muon


def patch_head_zero(_: str = "") -> None:
    """An untied output layer that starts at zero (the NanoGPT speedrun)."""
    from torch import nn

    from scratchformer.models.gpt import GPT

    init = GPT.__init__

    def __init__(self, config):  # noqa: ANN001, ANN202
        init(self, config)
        if self.lm_head is not None:
            nn.init.zeros_(self.lm_head.weight)

    GPT.__init__ = __init__


def patch_head_lr(scale: str) -> None:
    """An untied output layer at its own rate: ``scale`` x lr."""
    from scratchformer.train import muon as m

    plain = m.muon_groups

    def muon_groups(model, **kw):  # noqa: ANN001, ANN003, ANN202
        groups = plain(model, **kw)
        head = getattr(model, "lm_head", None)
        if head is None:
            return groups
        for g in groups:
            if any(p is head.weight for p in g["params"]):
                g["params"] = [p for p in g["params"] if p is not head.weight]
                groups.append({**g, "params": [head.weight], "lr_scale": float(scale), "lr": kw["lr"] * float(scale)})
                break
        return [g for g in groups if g["params"]]

    m.muon_groups = muon_groups


PATCHES = {"softcap": patch_softcap, "unet": patch_unet, "value_embed": patch_value_embed,
           "momentum_warmup": patch_momentum_warmup, "muon_scale": patch_muon_scale,
           "head_zero": patch_head_zero, "head_lr": patch_head_lr}


def apply_patches(patches: list[str]) -> None:
    for patch in patches:
        name, _, arg = patch.partition(":")
        PATCHES[name](arg)


def keys_of(name: str) -> set[str]:
    """The settings and patches a candidate changes."""
    words, patches = CANDIDATES[name]
    return {w.partition("=")[0] for w in words} | {p.partition(":")[0] for p in patches}


# ------------------------------------------------------------------------------------------------------- cost
def cost_signature(words: list[str]) -> str:
    return " ".join(sorted(w for w in words if w.partition("=")[0] in COST_KEYS))


def measure_costs(signatures: list[str], rounds: int = 3, steps: int = 6) -> dict[str, float]:
    """Median seconds per step of each shape, measured taking turns (round-robin) in this process."""
    import torch
    import torch.nn.functional as F

    from scratchformer.models import build_model
    from scratchformer.settings.resolve import resolve
    from scratchformer.settings.values import parse_overrides
    from scratchformer.train.optim import make_optimizer

    torch.set_num_threads(2)
    setups = {}
    for sig in signatures:
        run = resolve(preset=PRESET, overrides=parse_overrides([*BASE, *sig.split(), "max_time=none", "max_steps=1"]))
        model = build_model(run.model.replace(vocab_size=69))
        opt = make_optimizer(model, run.train, torch.device("cpu"))
        setups[sig] = (model, opt, run.train.batch_size, run.model.max_len)
    times: dict[str, list[float]] = {sig: [] for sig in signatures}
    gen = torch.Generator().manual_seed(0)
    for r in range(rounds + 1):  # round 0 warms up
        for sig, (model, opt, B, T) in setups.items():
            x = torch.randint(0, 65, (B, T + 1), generator=gen)
            start = time.perf_counter()
            for _ in range(steps):
                logits = model(x[:, :-1])
                loss = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten())
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            if r:
                times[sig].append((time.perf_counter() - start) / steps)
        print(f"round {r}: " + ", ".join(f"{s or 'preset'} {t[-1]:.3f}" for s, t in times.items() if t), flush=True)
    return {sig: sorted(t)[len(t) // 2] for sig, t in times.items()}


def cmd_cost(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speed"))
    from speedrun import matmul_peak

    signatures = sorted({cost_signature(w) for w, _ in CANDIDATES.values()})
    peak = matmul_peak()
    costs = measure_costs(signatures, rounds=args.rounds, steps=args.steps)
    out = {"matmul_gflops": round(peak, 1), "seconds_per_step": {s: round(t, 4) for s, t in costs.items()},
           "relative": {s: round(t / costs[""], 4) for s, t in costs.items()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    for s, t in sorted(out["relative"].items(), key=lambda kv: kv[1]):
        print(f"{t:6.3f}  {s or 'preset'}")


# -------------------------------------------------------------------------------------------------------- runs
def cmd_job(args: argparse.Namespace) -> None:
    """One run, in this process: the candidate's patches, train, score on the whole validation block."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from scratchformer.app.cli import main
    from scratchformer.train import muon

    muon.fast_ns_dtype = lambda device: "float32"  # as on a CPU without native bfloat16
    job = json.loads(args.spec)
    apply_patches(job["patches"])
    run = Path(job["run"])
    start = time.perf_counter()
    words = [*BASE, *job["words"], f"max_steps={job['steps']}", "max_time=none", f"seed={job['seed']}",
             f"eval_every={job['steps']}", "eval_batches=10", "log_every=100000"]
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["train", "--preset", PRESET, *words, "--quiet", "--out", str(run)])
    if code:
        raise SystemExit(f"train failed ({code}): {' '.join(words)}")
    train_s = time.perf_counter() - start
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["evaluate", "--ckpt", str(run), "--data", job["val"]])
    if code:
        raise SystemExit(f"evaluate failed ({code})")
    loss = json.loads(buf.getvalue())["loss"]
    print(json.dumps({**{k: job[k] for k in ("name", "seed", "steps")}, "loss": round(loss, 5),
                      "train_s": round(train_s, 1)}))


class Search:
    """Runs jobs ``workers`` at a time, each in its own process, until the deadline."""

    def __init__(self, args: argparse.Namespace, costs: dict[str, float]) -> None:
        self.args, self.costs = args, costs
        self.deadline = time.time() + 60 * args.minutes
        self.results: list[dict] = []
        self.running: list[tuple[subprocess.Popen, dict, float]] = []
        self.log = open(args.out / "runs.jsonl", "a")  # noqa: SIM115

    def relative_cost(self, words: list[str]) -> float:
        """A step's cost against the preset's: measured for this shape, else the product of the measured costs
        of the candidates whose settings it stacks (a stack's shape is rarely measured)."""
        sig = cost_signature(words)
        if sig in self.costs:
            return self.costs[sig]
        rel, left = 1.0, set(sig.split())
        for msig in sorted(self.costs, key=lambda m: -len(m.split())):  # the largest measured parts first
            if msig and set(msig.split()) <= left:
                rel, left = rel * self.costs[msig], left - set(msig.split())
        return rel

    def steps(self, name: str) -> int:
        return round(self.args.base_steps / self.relative_cost(CANDIDATES[name][0]))

    def spec(self, name: str, seed: int) -> dict:
        words, patches = CANDIDATES[name]
        return {"name": name, "seed": seed, "steps": self.steps(name), "words": words, "patches": patches,
                "run": str(self.args.runs / re.sub(r"[^\w.-]", "_", f"{name}-{seed}")), "val": str(self.args.val)}

    def run(self, specs: list[dict], reserve_s: float = 0.0) -> None:
        """Run these jobs (in order, ``workers`` at once); none starts after the deadline less ``reserve_s``."""
        queue = list(specs)
        while queue or self.running:
            while queue and len(self.running) < self.args.workers and time.time() < self.deadline - reserve_s:
                job = queue.pop(0)
                argv = [sys.executable, __file__, "job", json.dumps(job)]
                env = {**os.environ, "OMP_NUM_THREADS": "1"}  # the GPU computes; each run's CPU side is one thread
                proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                self.running.append((proc, job, time.time()))
            if queue and time.time() >= self.deadline - reserve_s and not self.running:
                break
            time.sleep(0.2)
            for item in list(self.running):
                proc, job, began = item
                if proc.poll() is None:
                    if time.time() > self.deadline + 30:
                        proc.kill()
                    continue
                self.running.remove(item)
                out, err = proc.communicate()
                if proc.returncode:
                    row = {**{k: job[k] for k in ("name", "seed", "steps")}, "error": (err.strip().splitlines()
                                                                                      or ["?"])[-1][:300]}
                else:
                    row = json.loads(out.strip().splitlines()[-1])
                row["wall_s"] = round(time.time() - began, 1)
                self.results.append(row)
                self.log.write(json.dumps(row) + "\n")
                self.log.flush()
                print(json.dumps(row), flush=True)

    def means(self) -> dict[str, tuple[float, int]]:
        by: dict[str, list[float]] = {}
        for r in self.results:
            if "loss" in r:
                by.setdefault(r["name"], []).append(r["loss"])
        return {n: (sum(v) / len(v), len(v)) for n, v in by.items()}


def cmd_search(args: argparse.Namespace) -> None:
    from scratchformer.data.named import load_tinyshakespeare

    args.out.mkdir(parents=True, exist_ok=True)
    args.runs = args.runs or args.out / "runs"
    args.val = args.out / "val.txt"  # the whole validation block: the preset's validation split
    args.val.write_text(load_tinyshakespeare()[1], encoding="utf-8")
    costs = json.loads(args.cost.read_text())["relative"] if args.cost else {}
    search = Search(args, costs)
    if args.around:  # the candidate and its variants, each one more word (or a patch: "patch:NAME:ARG")
        words, patches = CANDIDATES[args.around]
        args.only = [args.around]
        for vary in args.vary:
            extra = vary.split()
            more = [w.partition(":")[2] for w in extra if w.startswith("patch:")]
            name = f"{args.around}|{' '.join(w.removeprefix('patch:') for w in extra)}"
            CANDIDATES[name] = ([*words, *(w for w in extra if not w.startswith("patch:"))], [*patches, *more])
            args.only.append(name)
    names = args.only or sorted(CANDIDATES, key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST)))
    # phase 1: every candidate on one seed (the preset on all three, for the noise)
    first = [search.spec("preset", s) for s in SEEDS] + [search.spec(n, SEEDS[0]) for n in names if n != "preset"]
    search.run(first[:1])  # alone: it prepares the corpora (training text, validation block) the others then read
    search.run(first[1:], reserve_s=120)
    base = search.means().get("preset", (math.inf, 0))[0]
    # phase 2: the best third (at least the ones that beat the preset) on two more seeds
    ranked = sorted((m[0], n) for n, m in search.means().items() if n != "preset")
    best = [n for loss, n in ranked[:max(6, len(ranked) // 3)] if loss < base + 0.002]
    search.run([search.spec(n, s) for n in best for s in SEEDS[1:]], reserve_s=60)
    # phase 3: the winners (better than the preset by more than the noise) stacked, best first, skipping one that
    # changes a setting or patch an earlier one set; cumulative stacks of 2 to 6, on three seeds
    used: set[str] = set()
    chosen: list[str] = []
    for _, n in sorted((m[0], n) for n, m in search.means().items() if n != "preset" and m[0] < base - 0.002):
        if not used & keys_of(n):
            chosen.append(n)
            used |= keys_of(n)
    jobs = []
    for k in range(2, min(len(chosen), 6) + 1):
        name = "stack:" + "+".join(chosen[:k])
        CANDIDATES[name] = ([w for s in chosen[:k] for w in CANDIDATES[s][0]],
                            [p for s in chosen[:k] for p in CANDIDATES[s][1]])
        jobs += [search.spec(name, s) for s in SEEDS]
    search.run(jobs, reserve_s=60)
    # phase 4, with the time left: the rates, schedule and decay retuned around the best of all (two seeds or more)
    means = {n: m for n, m in search.means().items() if m[1] >= 2}
    top = min(means, key=lambda n: means[n][0])
    jobs = []
    for word in TUNING:
        name = f"{top}|{word}"
        CANDIDATES[name] = ([*CANDIDATES[top][0], word], CANDIDATES[top][1])
        jobs += [search.spec(name, s) for s in SEEDS]
    search.run(jobs, reserve_s=0)
    print(f"\n{'candidate':48s} {'steps':>6s} {'mean':>8s} {'vs preset':>10s} seeds")
    for n, (m, k) in sorted(search.means().items(), key=lambda kv: kv[1][0]):
        steps = next(r["steps"] for r in search.results if r["name"] == n)
        print(f"{n[:48]:48s} {steps:6d} {m:8.4f} {m - base:+10.4f} {k}")
    errors = [r for r in search.results if "error" in r]
    for r in errors:
        print(f"error: {r['name']} seed {r['seed']}: {r['error']}")


def cmd_table(args: argparse.Namespace) -> None:
    """The recorded runs as a Markdown table: each candidate's settings, steps, mean loss, its difference from the
    preset's mean, and every run's loss (a candidate run in two searches counts both)."""
    runs: dict[str, list[float]] = {}
    steps: dict[str, int] = {}
    for file in args.runs:
        for row in map(json.loads, file.read_text().splitlines()):
            if "loss" in row:
                runs.setdefault(row["name"], []).append(row["loss"])
                steps[row["name"]] = row["steps"]
    base = sum(runs["preset"]) / len(runs["preset"])
    print("| recipe (changes from the preset before the search) | steps | whole block, mean | vs the preset | runs |")
    print("|---|---|---|---|---|")
    for name, losses in sorted(runs.items(), key=lambda kv: sum(kv[1]) / len(kv[1])):
        mean = sum(losses) / len(losses)
        base_name, _, extra = name.partition("|")
        words, patches = CANDIDATES.get(base_name, ([], []))
        extra_words = [f"[{w}]" if ":" in w else w for w in extra.split()]  # a patch as in CANDIDATES
        what = " ".join([*words, *(f"[{p}]" for p in patches), *extra_words]) or "(the preset before the search)"
        print(f"| `{what}` | {steps[name]:,} | {mean:.4f} | {mean - base:+.4f} | "
              f"{', '.join(f'{x:.4f}' for x in losses)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cost = sub.add_parser("cost", help="seconds per step of each candidate's shape on this CPU (2 threads)")
    cost.add_argument("--out", type=Path, required=True)
    cost.add_argument("--rounds", type=int, default=3)
    cost.add_argument("--steps", type=int, default=6)
    search = sub.add_parser("search", help="every candidate at the fixed budget, in phases")
    search.add_argument("--out", type=Path, required=True)
    search.add_argument("--cost", type=Path, help="cost.json from the cost command (else every step costs the same)")
    search.add_argument("--runs", type=Path, help="where the runs' checkpoints go (default OUT/runs)")
    search.add_argument("--base-steps", type=int, default=BASE_STEPS, help="the preset's steps (the budget)")
    search.add_argument("--workers", type=int, default=10)
    search.add_argument("--minutes", type=float, default=8.0)
    search.add_argument("--only", nargs="+", help="these candidates only")
    search.add_argument("--around", help="this candidate and its variants (--vary) only")
    search.add_argument("--vary", nargs="+", default=[], metavar="WORDS",
                        help='with --around: one variant per argument, settings ("n_heads=3", "n_layers=4 '
                             'd_model=240") or a patch ("patch:softcap:30")')
    table = sub.add_parser("table", help="the recorded runs (runs.jsonl files) as a Markdown table")
    table.add_argument("runs", nargs="+", type=Path)
    job = sub.add_parser("job")
    job.add_argument("spec")
    args = parser.parse_args()
    {"cost": cmd_cost, "search": cmd_search, "job": cmd_job, "table": cmd_table}[args.command](args)


if __name__ == "__main__":
    main()
