"""Draw every figure of the walkthrough into docs/figures/: ``python docs/make_figures.py``.

All pictures come from the project's own code: ``scratchformer.viz`` and the real modules and training
loop (a small copy-task model is trained here, about a minute on 2 CPU cores, for the attention and loss
pictures). Deterministic: the same figures on every run (up to library versions).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from scratchformer import ModelConfig, build_model, viz
from scratchformer.config import TrainConfig
from scratchformer.nn.masks import causal_mask, combine_masks, key_padding_to_attention_mask, padding_mask
from scratchformer.tokenizers import BOS_ID
from scratchformer.train.trainer import train

OUT = Path(__file__).resolve().parent / "figures"


def masks(path: Path) -> None:
    """The padding mask, the causal mask and their combination for a batch of two, True = may attend."""
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [5, 6, 7, 0, 0, 0]])  # second row: 3 tokens + 3 padding
    pad = key_padding_to_attention_mask(padding_mask(ids, 0))[1, 0].expand(6, 6)  # (T, S) for row 2
    causal = causal_mask(6)
    both = combine_masks(pad, causal)
    fig = Figure(figsize=(9, 3.4), dpi=110, layout="constrained")
    for ax, (title, m) in zip(fig.subplots(1, 3), [("padding (row 2: 3 real keys)", pad),
                                                    ("causal (decoder)", causal), ("padding AND causal", both)]):
        ax.imshow(m.numpy(), cmap="Greens", vmin=0, vmax=1.4)
        for (i, j), v in np.ndenumerate(m.numpy()):
            ax.text(j, i, "T" if v else "F", ha="center", va="center", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
    fig.suptitle("mask[i, j] = True: query i may attend to key j (False: score set to -inf before softmax)")
    fig.savefig(path)


def activations(path: Path) -> None:
    """ReLU (paper), GELU and SwiGLU's gate as used by FeedForward."""
    x = torch.linspace(-4, 4, 400)
    fig = Figure(figsize=(6, 3.6), dpi=110, layout="constrained")
    ax = fig.subplots()
    ax.plot(x, torch.relu(x), label="ReLU (paper, §3.3)")
    ax.plot(x, torch.nn.functional.gelu(x), label="GELU (BERT, GPT-2)")
    ax.plot(x, torch.nn.functional.silu(x), label="SiLU = the gate of SwiGLU (LLaMA)")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    ax.set_title("FFN(x) = act(x W1 + b1) W2 + b2: the activation")
    fig.savefig(path)


def norm_gradients(path: Path) -> None:
    """Gradient norm reaching each layer of a freshly initialised 12-layer GPT: post-LN vs pre-LN."""
    fig = Figure(figsize=(6.4, 3.8), dpi=110, layout="constrained")
    ax = fig.subplots()
    for norm in ("post", "pre"):
        torch.manual_seed(0)
        cfg = ModelConfig(arch="gpt", vocab_size=100, d_model=64, n_heads=4, n_layers=12, d_ff=256, max_len=64,
                          norm=norm, dropout=0.0)
        model = build_model(cfg)
        ids = torch.randint(4, 100, (8, 64))
        logits = model(ids[:, :-1])
        torch.nn.functional.cross_entropy(logits.reshape(-1, 100), ids[:, 1:].reshape(-1)).backward()
        norms = [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
                 for layer in model.decoder.layers]
        ax.plot(range(1, 13), norms, marker="o", label=f"{norm}-LN")
    ax.set_yscale("log")
    ax.set_xlabel("layer (1 = next to the embeddings)")
    ax.set_ylabel("gradient norm of the layer's weights")
    ax.set_title("At initialisation: gradient reaching each layer")
    ax.legend(frameon=False)
    ax.grid(alpha=0.3)
    fig.savefig(path)


def copy_task(out: Path) -> None:
    """Train the copy task briefly; draw the cross-attention before and after, and the loss curve."""
    model_kw = dict(arch="seq2seq", d_model=64, n_heads=4, n_layers=2, d_ff=128, dropout=0.0)
    cfg = TrainConfig(task="copy", max_steps=600, batch_size=64, lr=3e-3, warmup_steps=60, eval_every=100,
                      n_test=100, eval_decode=100, log_every=20, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "copy-task"  # the curves' title names the run folder
        result = train(model_kw, cfg, run, echo=lambda s: None)
        viz.plot_curves(run, out / "copy_curves.png", metrics=("loss",))
        model, tok = result.model.eval(), result.task.tokenizer
        text = "cabbagehij"  # the copy task's alphabet is a..j
        src = torch.tensor([tok.encode(text, add_eos=True)])  # sources end with <eos>, as in training
        tgt = torch.tensor([[BOS_ID] + tok.encode(text)])
        labels = list(text)
        keys = labels + ["<eos>"]
        maps = viz.attention_maps(model, src, tgt)
        viz.plot_attention(maps, out / "copy_cross_attention_trained.png", query_tokens=["<bos>"] + labels,
                           key_tokens=keys, kind="decoder.cross_attn",
                           title=f"trained copy model ({cfg.max_steps} steps): cross-attention on {text!r}")
        torch.manual_seed(0)
        fresh = build_model(result.model_config)
        maps = viz.attention_maps(fresh, src, tgt)
        viz.plot_attention(maps, out / "copy_cross_attention_untrained.png", query_tokens=["<bos>"] + labels,
                           key_tokens=keys, kind="decoder.cross_attn",
                           title="the same model before training: cross-attention is close to uniform")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    viz.plot_positional_encoding(100, 128, OUT / "positional_encoding.png")
    # The paper's schedule (§5.3): d_model 512, warmup 4000, lr = 512^-0.5 * 4000^-0.5 at the peak.
    paper = TrainConfig(schedule="inverse_sqrt", lr=512 ** -0.5 * 4000 ** -0.5, warmup_steps=4000, max_steps=100_000)
    viz.plot_lr_schedule(paper, OUT / "lr_schedule.png")
    masks(OUT / "masks.png")
    activations(OUT / "activations.png")
    norm_gradients(OUT / "norm_gradients.png")
    copy_task(OUT)
    for p in sorted(OUT.glob("*.png")):
        print(f"wrote {p.relative_to(OUT.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
