"""What 8 bits cost: the validation loss of a GPT in PyTorch and in llama.cpp from its f32, f16 and Q8_0 GGUF files.

    python bench/speed/gguf_loss.py --ckpt runs/shakespeare-tanh
    python bench/speed/gguf_loss.py --ckpt RUN --text VAL.txt --types f32 q8_0 --max-chars 12800

The text (default: the last 10 % of Tiny Shakespeare, 111,540 characters, from ``$SCRATCHFORMER_DATA``) is cut into
consecutive windows of ``max_len + 1`` tokens that overlap by one, so every token after the first is predicted once,
with up to ``max_len`` tokens of context; the loss is the mean cross-entropy (nats per token) over all of them. The
same windows go through PyTorch (float32) and through llama.cpp (``llama-cpp-python``) for each file type. llama.cpp
computes only GELU's tanh approximation: train the model with ``activation=gelu_tanh`` (e.g.
``scratchformer train --preset shakespeare-char activation=gelu_tanh --out runs/shakespeare-tanh``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import torch


def windows(ids: list[int], max_len: int) -> list[list[int]]:
    return [ids[i:i + max_len + 1] for i in range(0, len(ids) - 1, max_len)]


def cross_entropy(logits: np.ndarray, targets: list[int]) -> tuple[float, int]:
    """Summed negative log-likelihood of ``targets`` under ``logits (T, V)``, and T."""
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(-logp[np.arange(len(targets)), targets].sum()), len(targets)


def pytorch_loss(model, parts: list[list[int]]) -> float:
    total, n = 0.0, 0
    with torch.no_grad():
        for w in parts:
            logits = model(torch.tensor([w[:-1]]))[0].double().numpy()
            s, k = cross_entropy(logits, w[1:])
            total, n = total + s, n + k
    return total / n


def llama_loss(path: Path, parts: list[list[int]], max_len: int, threads: int) -> float:
    from scratchformer.interop.llamacpp import LlamaCpp

    total, n = 0.0, 0
    with LlamaCpp(path, n_ctx=max_len, threads=threads) as llm:
        for w in parts:
            s, k = cross_entropy(llm.score(w[:-1]).astype(np.float64), w[1:])
            total, n = total + s, n + k
    return total / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True, help="a GPT's checkpoint or run directory")
    p.add_argument("--text", help="the text to score (default: Tiny Shakespeare's validation tenth)")
    p.add_argument("--types", nargs="+", default=["f32", "f16", "q8_0"], choices=["f32", "f16", "q8_0"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-chars", type=int, help="score only the first N characters of the text")
    p.add_argument("--json", help="write the losses here")
    args = p.parse_args()
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.interop import export_gguf

    ckpt = load_checkpoint(args.ckpt)
    if args.text:
        text = Path(args.text).read_text(encoding="utf-8")
    else:
        from scratchformer.data.named import load_tinyshakespeare

        text = load_tinyshakespeare()[1]  # the validation 10 %, found as every named dataset is
    text = text[:args.max_chars] if args.max_chars else text
    max_len = ckpt.model_config.max_len
    parts = windows(ckpt.tokenizer.encode(text), max_len)
    torch.set_num_threads(args.threads)
    result = {"characters": len(text), "windows": len(parts), "pytorch_f32": pytorch_loss(ckpt.model, parts)}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.types:
            done = export_gguf(ckpt.model, Path(tmp) / f"{kind}.gguf", tokenizer=ckpt.tokenizer, gguf_type=kind)
            result[f"llama.cpp_{kind}"] = llama_loss(done.path, parts, max_len, args.threads)
            result[f"{kind}_mb"] = done.path.stat().st_size / 2**20
    base = result["llama.cpp_f32"] if "llama.cpp_f32" in result else result["pytorch_f32"]
    for kind in args.types:
        result[f"{kind}_vs_f32_percent"] = 100 * (result[f"llama.cpp_{kind}"] / base - 1)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
