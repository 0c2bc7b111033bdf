"""Each layer's prediction, as the explorer's page shows it and as ``scratchformer explain --ckpt RUN --prompt
TEXT`` prints it: the logit lens (``models/lens.py``) turned into plain data, and that data into text.

A GPT's and an encoder-decoder's decoder's view has one row per layer (the embeddings, then ``layer 0``,
``layer 1``, ...: the residual stream after that block, the same numbering as the attention maps) and one
column per position (the token it reads), and in each cell the ``LENS_TOP_K`` most likely next tokens with
their probabilities and the probability that layer gives the token the model finally predicts there::

    {"kind": "tokens", "rows": ["embeddings", "layer 0", ...], "positions": [token, ...],
     "final": [{"id", "token"}, ...],          # the model's own prediction at each position
     "final_probs": [[p, ...], ...],           # rows x positions
     "top": [[[{"token", "prob"}, ...], ...], ...], "readout": "...", "title": "..."}

A classifier's view (an encoder's, a GPT classifier's, a ViT's) has its class probabilities after each layer through
its pooling and head (``"kind": "classes"``, ``"labels"``, ``"probs"``: rows x classes); a masked-token pretrained
encoder has no view (``"kind": "none"``), and its ``note`` says why. Which view a model has is its family's
``lens`` (the family registry).
"""

from __future__ import annotations

from typing import Any

import torch

from scratchformer.checkpoints import Checkpoint
from scratchformer.families import family
from scratchformer.models.lens import class_lens, logit_lens
from scratchformer.nn.config import POOLING_WORDS, ModelConfig

LENS_TOP_K = 5  # tokens listed for each layer and position
_DECIMALS = 6


def _rows(n_layers: int) -> list[str]:
    return ["embeddings", *(f"layer {i}" for i in range(n_layers))]


def readout(cfg: ModelConfig) -> str:
    """How a layer's residual stream is read, in a sentence for the page and the terminal."""
    norm = "RMSNorm" if cfg.norm_type == "rmsnorm" else "LayerNorm"
    head = (f"its pooling ({POOLING_WORDS[cfg.pooling]}) and classification head" if family(cfg.arch).classifies
            else "the output layer")
    if cfg.norm == "pre":
        return (f"each row reads the residual stream after that layer as the model reads its last one: the final "
                f"{norm}, then {head}; so the last row is the model's own output")
    return (f"post-LN (the paper's norm): there is no final norm, since every block already ends in its own "
            f"{norm}, so each row is {head} applied to that layer's output, the last row being the model's own "
            f"output; the embeddings row is read before any norm, at the embeddings' own scale")


def token_lens(ckpt: Checkpoint, positions: list[str], input_ids: torch.Tensor | None = None, *,
               src: torch.Tensor | None = None, tgt: torch.Tensor | None = None) -> dict[str, Any]:
    """The view of a GPT on ``input_ids (1, T)``, or of an encoder-decoder's decoder on ``tgt (1, T)`` over
    ``src (1, S)``; ``positions``: the labels of the tokens read."""
    cfg = ckpt.model_config
    inputs = {"src": src, "tgt": tgt} if input_ids is None else {"input_ids": input_ids}
    lens = logit_lens(ckpt.model, top_k=LENS_TOP_K, **inputs)
    label = ckpt.tokenizer.token_label
    final = lens.final_ids[0].tolist()
    top = [[[{"token": label(int(i)), "prob": round(float(p), _DECIMALS)} for i, p in zip(ids, probs)]
            for ids, probs in zip(layer_ids, layer_probs)]
           for layer_ids, layer_probs in zip(lens.top_ids[:, 0], lens.top_probs[:, 0])]  # rows x T x k
    return {"kind": "tokens", "title": "Next token, layer by layer (logit lens)", "readout": readout(cfg),
            "rows": _rows(len(top) - 1), "positions": positions,
            "final": [{"id": i, "token": label(i)} for i in final],
            "final_probs": [[round(float(p), _DECIMALS) for p in row] for row in lens.final_probs[:, 0]], "top": top}


def classes_lens(ckpt: Checkpoint, inputs: torch.Tensor, labels: list[str] | None) -> dict[str, Any]:
    """The view of a classifier on ``inputs`` (``input_ids (1, T)``, a ViT's ``images (1, ch, S, S)``); ``labels``:
    its classes' names, None for a masked-token pretrained encoder (then a note instead of numbers)."""
    if labels is None:
        return {"kind": "none", "title": "Layer by layer (logit lens)",
                "note": "no layer-by-layer view: an encoder predicts no next token (it reads the whole text at "
                        "once), and this masked-token pretrained encoder's classification head is untrained, "
                        "so its class probabilities would mean nothing"}
    probs = class_lens(ckpt.model, inputs)[:, 0]  # (L + 1, K)
    return {"kind": "classes", "title": "Class probabilities, layer by layer (logit lens)",
            "readout": readout(ckpt.model_config), "rows": _rows(len(probs) - 1), "labels": labels,
            "probs": [[round(float(p), _DECIMALS) for p in row] for row in probs],
            "note": "a classifier predicts no next token: its lens is the class probabilities each layer would "
                    "give"}


def _q(token: str) -> str:
    return repr(token)


def lens_lines(view: dict[str, Any]) -> list[str]:
    """The view as lines of text: for a token model, one block per position and one line per layer in it;
    for a classifier, one line per layer."""
    lines = [f"{view['title']}: {view.get('readout') or view['note']}."]
    width = max(len(r) for r in view.get("rows", [""]))
    if view["kind"] == "classes":
        cols = [max(len(lab), 6) for lab in view["labels"]]
        lines += [view["note"] + ".", "", " " * (width + 2) + "  ".join(f"{lab:>{w}}" for lab, w in
                                                                        zip(view["labels"], cols))]
        for row, probs in zip(view["rows"], view["probs"]):
            lines.append(f"{row:<{width}}  " + "  ".join(f"{p:>{w}.4f}" for p, w in zip(probs, cols)))
        best = max(range(len(view["labels"])), key=lambda k: view["probs"][-1][k])
        lines.append(f"the model's own answer (the last row): {view['labels'][best]}")
    elif view["kind"] == "tokens":
        lines.append("p(final): the probability a layer gives the token the model finally predicts there.")
        for t, token in enumerate(view["positions"]):
            lines += ["", f"position {t} reads {_q(token)}; the model predicts {_q(view['final'][t]['token'])} next"]
            for row, finals, tops in zip(view["rows"], view["final_probs"], view["top"]):
                best = "  ".join(f"{_q(c['token'])} {c['prob']:.4f}" for c in tops[t])
                lines.append(f"  {row:<{width}}  p(final) {finals[t]:.4f}   top: {best}")
    return lines


__all__ = ["LENS_TOP_K", "classes_lens", "lens_lines", "readout", "token_lens"]
