"""The commands that use a trained model or look at one (``train`` and ``prepare``: ``train_commands.py``;
``export``: ``export/command.py``): each reads its arguments and calls the library (``cmd_NAME``).

Imported only when a command runs, so ``scratchformer --help`` starts without loading PyTorch.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.checkpoints import find_source, load_checkpoint, load_trainer_state
from scratchformer.checkpoints import resolve as resolve_ckpt
from scratchformer.checkpoints.sharded import is_sharded, shard_files
from scratchformer.errors import ConfigError
from scratchformer.families import Family, family
from scratchformer.models.params import count_parameters_formula
from scratchformer.registry import format_metric, pretrains
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.resolve import resolve
from scratchformer.settings.values import parse_overrides
from scratchformer.tasks.inference import (
    answer_instruction,
    classify_images,
    classify_texts,
    evaluate_checkpoint,
    evaluate_ensemble,
    generate_text,
    read_inputs,
    translate_texts,
)
from scratchformer.train.optim import Schedule


def cmd_info(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.ckpt)
    cfg = ckpt.model_config
    n = sum(p.numel() for p in ckpt.model.parameters())
    print(f"checkpoint: {resolve_ckpt(args.ckpt)} (step {ckpt.step}, task {ckpt.task})")
    print(f"model: {type(ckpt.model).__name__}, {n:,} parameters (formula {count_parameters_formula(cfg):,})")
    for key, value in cfg.to_dict().items():
        if key in _APPLIES and not _APPLIES[key](family(cfg.arch)):
            continue
        print(f"  {key} = {value}")
    if ckpt.tokenizer is not None:
        print(f"tokenizer: {type(ckpt.tokenizer).__name__}, {ckpt.tokenizer.vocab_size} tokens")
    else:  # a ViT
        print(f"input: {cfg.image_size} x {cfg.image_size} images, {cfg.channels} channel(s), {cfg.n_patches} patches "
              f"of {cfg.patch_size} x {cfg.patch_size} and a class token")
    if "labels" in ckpt.extra:
        print(f"labels: {', '.join(ckpt.extra['labels'])}")
    if is_sharded(resolve_ckpt(args.ckpt)):  # a shard=fsdp run's: put together whole on loading
        files = len(shard_files(resolve_ckpt(args.ckpt)))
        print(f"weights: sharded (shard=fsdp), {files} shard file{'s' * (files > 1)} put together on loading")
    if "lora" in ckpt.extra:  # a LoRA run: its file holds the adapters, loaded here onto the base and merged
        lora, base = ckpt.extra["lora"], ckpt.extra["lora"]["base"]
        print(f"LoRA: rank {lora['rank']} (alpha {lora['alpha']:g}) on {', '.join(lora['targets'])}, merged into the "
              f"base {base['path']} (init_from={base['init_from']}, sha256 {base['sha256'][:12]})")
    if args.verify:
        _verify_base(args.ckpt)
    if pretrains(ckpt.task):
        print("output: masked-token logits through the tied embedding table; the classification head is "
              f"untrained (fine-tune it: train task=classify init_from={resolve_ckpt(args.ckpt).parent})")
    metrics_file = resolve_ckpt(args.ckpt).parent / "metrics.jsonl"
    if metrics_file.is_file():
        evals = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        for split in ("val", "test"):
            rows = [e for e in evals if e.get("split") == split and e.get("step", 0) <= ckpt.step]
            if rows:
                last = rows[-1]
                values = {k: v for k, v in last.items() if k not in ("step", "split") and isinstance(v, float)}
                print(f"{split} at step {last['step']}: "
                      + ", ".join(f"{k} {format_metric(k, v)}" for k, v in values.items()))
    return 0


def _verify_base(path: str) -> None:
    """``info --verify``: a LoRA run's base hashed in full against the sha256 recorded when the run was made."""
    from scratchformer.checkpoints.adapters import check_base

    source = find_source(path)
    record = source.lora
    if record is None:
        raise ConfigError("--verify checks the base of a LoRA run, and this checkpoint holds no adapters")
    check_base(record, str(source.path), full=True)
    print(f"base verified: every byte of {record.base.path} hashes to sha256 {record.base.sha256[:12]}, as when the "
          "run was made")


# Model fields that mean something for some families only (info leaves them out elsewhere), by what the family
# registry says of each family
_APPLIES: dict[str, Callable[[Family], bool]] = {
    "n_classes": lambda f: f.classifies, "pooling": lambda f: len(f.poolings) > 1,
    **dict.fromkeys(["n_encoder_layers", "n_decoder_layers", "tgt_vocab_size"], lambda f: f.two_stacks),
    "attention_window": lambda f: f.self_attending_encoder,
    **dict.fromkeys(["vocab_size", "pad_id", "scale_embeddings", "tie_embeddings", "embedding_norm"],
                    lambda f: f.reads_tokens),
    **dict.fromkeys(["image_size", "patch_size", "channels"], lambda f: f.reads_pixels)}


def cmd_generate(args: argparse.Namespace) -> int:
    if (args.prompt is None) == (args.instruction is None):
        raise ConfigError("give --prompt TEXT (a text to continue) or --instruction TEXT (an instruction to answer)")
    if not (args.prompt or args.instruction or "").strip():
        raise ConfigError(f"--{'prompt' if args.prompt is not None else 'instruction'} is empty")
    if args.instruction_input and args.instruction is None:
        raise ConfigError("--instruction-input goes with --instruction")
    ckpt = load_checkpoint(args.ckpt)
    sampling = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                    greedy=args.greedy)
    if args.json_schema:
        from scratchformer.app.json_command import generate_json_text

        print(generate_json_text(ckpt, args, sampling))
    elif args.instruction is not None:
        print(answer_instruction(ckpt, args.instruction, args.instruction_input, args.max_new_tokens, **sampling))
    else:
        print(generate_text(ckpt, args.prompt, args.max_new_tokens, **sampling))
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.ckpt)
    texts = read_inputs(args.texts, args.input)
    for line in translate_texts(ckpt, texts, beam=args.beam, length_penalty=args.length_penalty):
        print(line)
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    ckpt = load_checkpoint(args.ckpt)
    inputs = read_inputs(args.texts, args.input)  # texts, or for an image classifier image files
    classify = classify_images if family(ckpt.model_config.arch).reads_pixels else classify_texts
    for label, prob in classify(ckpt, inputs):
        print(f"{label}\t{prob:.4f}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    if args.benchmark is not None:
        from scratchformer.app.benchmark_commands import evaluate_on_benchmarks

        return evaluate_on_benchmarks(args)
    alone = [name for name in ("limit", "output", "data_dir", "shots") if getattr(args, name) is not None]
    alone += ["chat"] if args.chat != "auto" else []
    if alone:
        raise ConfigError(f"--{alone[0].replace('_', '-')} goes with --benchmark NAMES")
    words = [p for p in args.data or () if "=" in Path(p).name and not Path(p).exists()]
    if words:  # not a file to score: a setting, which a checkpoint brings with it
        raise ConfigError(f"evaluate takes no settings ({words[0]}): a checkpoint is scored with its own")
    split = args.split or "test"
    if len(args.ckpt) > 1:
        ckpts = [(path, load_checkpoint(path)) for path in args.ckpt]
        result = evaluate_ensemble(ckpts, split=split, data=args.data)
    else:
        result = evaluate_checkpoint(load_checkpoint(args.ckpt[0]), split=split, data=args.data, beam=args.beam,
                                     length_penalty=args.length_penalty)
    print(json.dumps(result, indent=2))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from scratchformer.app import plots as viz

    out = Path(args.out)
    if args.what == "positions":
        path = viz.plot_positional_encoding(args.max_len, args.d_model, out)
    elif args.what == "schedule":
        path = viz.plot_lr_schedule(_schedule_of(args), out)
    elif args.what == "curves":
        if not args.run:
            raise ConfigError("plot curves needs --run DIR (a training run directory)")
        path = viz.plot_curves(args.run, out)
    else:  # attention
        if not args.ckpt:
            raise ConfigError("plot attention needs --ckpt DIR, and --text TEXT (or --image FILE for a ViT)")
        ckpt = load_checkpoint(args.ckpt)
        if family(ckpt.model_config.arch).reads_pixels:
            if not args.image or args.text:
                raise ConfigError("plot attention of an image classifier (ViT) needs --image FILE, not --text")
            path = viz.plot_checkpoint_image_attention(ckpt, args.image, out)
        else:
            if not args.text or args.image:
                raise ConfigError("plot attention needs --text TEXT (--image FILE is for an image classifier)")
            path = viz.plot_checkpoint_attention(ckpt, args.text, out, target=args.target, kind=args.kind)
    print(f"wrote {path}")
    return 0


def _schedule_of(args: argparse.Namespace) -> Any:
    """A checkpoint's own schedule (extensions included), or the one a preset and key=value words give."""
    if args.ckpt:
        state = load_trainer_state(resolve_ckpt(args.ckpt))
        if "schedule" in state:
            return Schedule.from_dict(state["schedule"])
        return TrainConfig.from_dict(load_checkpoint(args.ckpt).train)
    return resolve(preset=args.preset, overrides=parse_overrides(args.overrides)).train


def cmd_explore(args: argparse.Namespace) -> int:
    from scratchformer.app.explore import Limits, export_view, serve

    caps = {"max_chars": args.max_chars, "max_tokens": args.max_tokens}
    limits = Limits(**{k: v for k, v in caps.items() if v is not None})
    if args.export:
        path = export_view(args.ckpt, args.export, args.text or [], options=args.option or [], kind=args.kind,
                           layer=args.layer, head=args.head, force=args.force, limits=limits)
        print(f"wrote {path}")
        return 0
    stray = [f"--{name}" for name in ("text", "kind", "layer", "head", "option", "force")
             if getattr(args, name) is not None and getattr(args, name) is not False]  # --layer 0 counts
    if stray:
        raise ConfigError(f"{stray[0]} goes with --export FILE (without it, explore serves the page)")
    serve(args.ckpt, args.host, args.port, limits=limits, quiet=not args.verbose)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from scratchformer.app.demo import explain_config
    from scratchformer.app.explain import explain
    from scratchformer.app.explain_lens import explain_lens

    if args.ckpt is not None or args.prompt is not None or args.image is not None:
        if args.ckpt is None:
            raise ConfigError("--prompt and --image go with --ckpt: explain --ckpt RUN --prompt TEXT (an image "
                              "classifier: --image FILE)")
        given = [f"--{name.replace('_', '-')}" for name in ("preset", "batch", "length", "target_length")
                 if getattr(args, name) is not None] + args.overrides[:1]
        if given:
            raise ConfigError(f"{given[0]} describes a fresh model; with --ckpt, explain reads the trained one")
        print(explain_lens(args.ckpt, args.prompt, image=args.image))
        return 0
    cfg, note, task = explain_config(args.preset or "paper-base", parse_overrides(args.overrides))
    if note:
        print(note)
    print(explain(cfg, batch=args.batch or 1, length=args.length or 8, target_length=args.target_length,
                  predict_tokens=task is not None and task.pretrains))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from scratchformer.app.demo import demo

    demo(args.preset, parse_overrides(args.overrides), args.seed)
    return 0
