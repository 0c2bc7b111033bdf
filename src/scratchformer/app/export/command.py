"""``scratchformer export``: the command gathers the run (its checkpoint, tokenizer, chat template, and for
``--format hf`` its model card's rows: ``huggingface.py``), makes the checks that decode (``gguf_gelu.py``), and
calls the writers, which live beside the readers of their formats in ``interop/``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scratchformer.checkpoints import find_source, load_checkpoint
from scratchformer.errors import ConfigError
from scratchformer.families import family


def cmd_export(args: argparse.Namespace) -> int:
    from scratchformer.interop import export_onnx, export_torchscript

    out = Path(args.out)
    if out.exists() and not args.force:
        raise ConfigError(f"{out} exists; choose another --out or add --force")
    if args.hf_class and args.format != "hf":
        raise ConfigError("--hf-class applies to --format hf")
    if args.gguf_type != "f32" and args.format != "gguf":
        raise ConfigError("--gguf-type applies to --format gguf")
    source = find_source(args.ckpt)
    entry = family(source.family)  # which formats its family has: refused before any work
    if args.format not in entry.exports:
        raise ConfigError(f"this checkpoint holds {entry.title}, which has no --format {args.format} export (its "
                          f"formats: {', '.join(entry.exports) or 'none yet'})")
    if args.format in ("hf", "gguf") and source.kind == "folder" and not (source.path / "tokenizer.json").is_file():
        raise ConfigError(f"{source.path} has no tokenizer.json, and --format {args.format} carries the model's "
                          "tokenizer: put the model's tokenizer.json (and its tokenizer_config.json) in the folder")
    if args.format in ("onnx", "gguf"):
        return _export_with_cache(args, out)
    if args.format == "hf":
        from scratchformer.app.export.huggingface import export_hf

        done = export_hf(args.ckpt, out, hf_class=args.hf_class, force=args.force)
        print(f"wrote {done.path} ({done.hf_class}; outputs match the checkpoint's within {done.max_abs_diff:.1e})")
        return 0
    ckpt = load_checkpoint(args.ckpt)
    path = (export_onnx if args.format == "onnx-single" else export_torchscript)(ckpt.model, out)
    print(f"wrote {path}")
    return 0


def _export_with_cache(args: argparse.Namespace, out: Path) -> int:
    """--format onnx (a folder: the cached graphs and the torch-free loop) and --format gguf (one file)."""
    from scratchformer.interop import export_gguf, export_onnx_cached

    if out.exists():  # --force: replaced only once the new export is complete
        raise ConfigError(f"{out} exists; remove it first (--force does not replace a {args.format} export)")
    ckpt = load_checkpoint(args.ckpt)
    chat = ckpt.chat_template  # an instruction-tuned run's own, else its tokenizer's (a folder's)
    if args.format == "onnx":
        print(f"wrote {export_onnx_cached(ckpt.model, out, tokenizer=ckpt.tokenizer, chat_template=chat)}")
        return 0
    done = export_gguf(ckpt.model, out, tokenizer=ckpt.tokenizer, gguf_type=args.gguf_type, chat_template=chat,
                       notes=_gelu_notes(ckpt.model, ckpt.tokenizer, chat))
    print(f"wrote {done.path} ({done.summary})")
    return 0


def _gelu_notes(model: Any, tokenizer: Any, chat: str | None) -> list[str]:
    """A GPT with the exact GELU is written as llama.cpp's tanh GELU only if both decode the same greedy tokens
    (``gguf_gelu.py``); what was checked, for the line the command prints."""
    if model.config.activation != "gelu":
        return []
    from scratchformer.app.export.gguf_gelu import gelu_check, instruction_ids
    from scratchformer.interop.gguf import check_gguf

    check_gguf(model, tokenizer)  # a model or tokenizer llama.cpp cannot take is refused before the check decodes
    template = chat or getattr(tokenizer, "chat_template", None)
    return [gelu_check(model, [instruction_ids(template, tokenizer)] if template else [])]
