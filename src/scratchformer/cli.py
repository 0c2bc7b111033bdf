"""The ``scratchformer`` command: a thin layer over importable functions.

    scratchformer train [--preset NAME] [--config FILE] [--data PATH ...] [key=value ...] --out DIR [--resume]
    scratchformer info CKPT
    scratchformer generate --ckpt DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K --top-p P --seed S]
    scratchformer translate --ckpt DIR [TEXT ... | --input FILE] [--beam N --length-penalty A]
    scratchformer classify --ckpt DIR [TEXT ... | --input FILE]
    scratchformer evaluate --ckpt DIR [DIR ...] [--split test | --data PATH ...]   (several DIRs: an ensemble)
    scratchformer export --ckpt DIR --format onnx|torchscript --out FILE
    scratchformer plot attention|positions|schedule|curves --out FILE.png ...
    scratchformer explore --ckpt DIR [--port N --host ADDR]   (the attention explorer, a local web page)
    scratchformer explain [--preset NAME] [key=value ...]
    scratchformer demo [--preset MODEL_PRESET] [key=value ...]

Errors a user can cause end with one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from .config import PRESETS, ConfigError, ModelConfig, count_parameters_formula, split_settings
from .models import build_model

DEFAULT_PRESET = "copy"


# ------------------------------------------------------------------------------------ settings


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("scratchformer").joinpath("presets").iterdir()
                  if p.name.endswith(".toml"))


def load_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(preset_names())}")
    return _toml_loads(resources.files("scratchformer").joinpath("presets", f"{name}.toml").read_text())


def load_config_file(path: str) -> dict[str, Any]:
    """A TOML (or JSON) file of ``key = value`` settings, the same keys as the presets."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file {path} does not exist")
    text = file.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if file.suffix == ".json" else _toml_loads(text)
    except ValueError as err:
        raise ConfigError(f"config file {path} is not valid {'JSON' if file.suffix == '.json' else 'TOML'}: "
                          f"{str(err).splitlines()[0]}") from None
    if not isinstance(data, dict) or any(isinstance(v, dict) for v in data.values()):
        raise ConfigError(f"config file {path} must hold flat key = value settings")
    return data


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``["d_model=64", "norm=pre"]`` -> ``{"d_model": "64", "norm": "pre"}``; types are checked later
    against each field's declared type."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def resolve_settings(preset: str | None, config: str | None, overrides: dict[str, Any],
                     resume_from: Path | None = None) -> dict[str, Any]:
    """Defaults <- preset (or the resumed run's own settings) <- config file <- key=value.

    Fine-tuning (``init_from``) without a named preset starts from the bare defaults: the default preset's
    model settings would contradict the pretrained model's architecture."""
    settings: dict[str, Any] = {}
    chosen = {**(load_config_file(config) if config else {}), **overrides}
    if resume_from is not None and preset is None and config is None:
        saved = json.loads((resume_from / "config.json").read_text())
        settings.update(saved["train"])
        settings.update({k: v for k, v in saved["model"].items() if k not in ("vocab_size", "pad_id")})
    elif preset is not None or not chosen.get("init_from"):
        settings.update(load_preset(preset or DEFAULT_PRESET))
    settings.update(chosen)
    return settings


# ------------------------------------------------------------------------------------ commands


def cmd_train(args: argparse.Namespace) -> int:
    from .train.trainer import check_out_dir, train

    out = Path(args.out)
    check_out_dir(out, args.resume)
    # "--data a.txt max_steps=10": argparse hands the key=value words to --data; take them back.
    paths = [p for p in (args.data or []) if not _is_setting(p)]
    args.overrides = [p for p in (args.data or []) if _is_setting(p)] + list(args.overrides)
    args.data = paths
    if args.data_dir:
        args.overrides.append(f"data_dir={args.data_dir}")
    settings = resolve_settings(args.preset, args.config, parse_overrides(args.overrides),
                                out if args.resume else None)
    model_kw, train_cfg = split_settings(settings)
    # Validate the model fields now, before any data is read (vocab_size is filled in from the data).
    ModelConfig(**{"vocab_size": 1000, "pad_id": 0, **model_kw})
    data = list(args.data or [])
    if args.resume and not data:
        data = json.loads((out / "config.json").read_text()).get("data", []) if (out / "config.json").is_file() else []
    result = train(model_kw, train_cfg, out, data, resume=args.resume)
    if not result.is_main:
        return 0
    if result.test or result.val:
        for split, metrics in (("validation", result.val), ("test", result.test)):
            if metrics:
                print(f"{split}: " + ", ".join(f"{k} {_fmt(k, v)}" for k, v in metrics.items()))
    if result.samples:
        print("samples:")
        for line in result.samples:
            print("  " + line)
    print(f"trained {result.step} steps in {result.seconds:.0f} s; checkpoints in {out / 'best'} and {out / 'last'}")
    return 0


def _is_setting(word: str) -> bool:
    key, sep, _ = word.partition("=")
    return bool(sep) and key.isidentifier() and not Path(word).exists()


def _fmt(name: str, value: float) -> str:
    if name in ("exact_match", "accuracy", "f1"):
        return f"{100 * value:.2f}%"
    return f"{value:.4g}"


def cmd_info(args: argparse.Namespace) -> int:
    from .train.checkpoint import load_checkpoint, resolve

    ckpt = load_checkpoint(args.ckpt)
    cfg = ckpt.model_config
    n = sum(p.numel() for p in ckpt.model.parameters())
    print(f"checkpoint: {resolve(args.ckpt)} (step {ckpt.step}, task {ckpt.train_config.task})")
    print(f"model: {type(ckpt.model).__name__}, {n:,} parameters (formula {count_parameters_formula(cfg):,})")
    for key, value in cfg.to_dict().items():
        print(f"  {key} = {value}")
    print(f"tokenizer: {type(ckpt.tokenizer).__name__}, {ckpt.tokenizer.vocab_size} tokens")
    if "labels" in ckpt.extra:
        print(f"labels: {', '.join(ckpt.extra['labels'])}")
    if ckpt.train_config.task == "mlm":
        print("output: masked-token logits through the tied embedding table; the classification head is "
              f"untrained (fine-tune it: train task=classify init_from={resolve(args.ckpt).parent})")
    metrics_file = resolve(args.ckpt).parent / "metrics.jsonl"
    if metrics_file.is_file():
        evals = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()]
        for split in ("val", "test"):
            rows = [e for e in evals if e.get("split") == split and e.get("step", 0) <= ckpt.step]
            if rows:
                last = rows[-1]
                values = {k: v for k, v in last.items() if k not in ("step", "split") and isinstance(v, float)}
                print(f"{split} at step {last['step']}: " + ", ".join(f"{k} {_fmt(k, v)}" for k, v in values.items()))
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .inference import generate_text
    from .train.checkpoint import load_checkpoint

    if not args.prompt:
        raise ConfigError("--prompt is empty")
    ckpt = load_checkpoint(args.ckpt)
    print(generate_text(ckpt, args.prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                        top_p=args.top_p, seed=args.seed, greedy=args.greedy))
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from .inference import read_inputs, translate_texts
    from .train.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.ckpt)
    texts = read_inputs(args.texts, args.input)
    for line in translate_texts(ckpt, texts, beam=args.beam, length_penalty=args.length_penalty):
        print(line)
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    from .inference import classify_texts, read_inputs
    from .train.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.ckpt)
    texts = read_inputs(args.texts, args.input)
    for label, prob in classify_texts(ckpt, texts):
        print(f"{label}\t{prob:.4f}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .inference import evaluate_checkpoint, evaluate_ensemble
    from .train.checkpoint import load_checkpoint

    if len(args.ckpt) > 1:
        ckpts = [(path, load_checkpoint(path)) for path in args.ckpt]
        result = evaluate_ensemble(ckpts, split=args.split, data=args.data)
    else:
        result = evaluate_checkpoint(load_checkpoint(args.ckpt[0]), split=args.split, data=args.data, beam=args.beam,
                                     length_penalty=args.length_penalty)
    print(json.dumps(result, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_onnx, export_torchscript
    from .train.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.ckpt)
    out = Path(args.out)
    if out.exists() and not args.force:
        raise ConfigError(f"{out} exists; choose another --out or add --force")
    path = (export_onnx if args.format == "onnx" else export_torchscript)(ckpt.model, out)
    print(f"wrote {path}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from . import viz

    out = Path(args.out)
    if args.what == "positions":
        path = viz.plot_positional_encoding(args.max_len, args.d_model, out)
    elif args.what == "schedule":
        from .config import TrainConfig

        if args.ckpt:
            from .train.checkpoint import load_checkpoint

            cfg = load_checkpoint(args.ckpt).train_config
        else:
            _, cfg = split_settings(resolve_settings(args.preset, None, parse_overrides(args.overrides)))
        assert isinstance(cfg, TrainConfig)
        path = viz.plot_lr_schedule(cfg, out)
    elif args.what == "curves":
        if not args.run:
            raise ConfigError("plot curves needs --run DIR (a training run directory)")
        path = viz.plot_curves(args.run, out)
    else:  # attention
        path = _plot_attention(args, out)
    print(f"wrote {path}")
    return 0


def _plot_attention(args: argparse.Namespace, out: Path) -> Path:
    from . import viz
    from .inference import encode_checked
    from .tokenizers import BOS_ID
    from .train.checkpoint import load_checkpoint

    if not args.ckpt or not args.text:
        raise ConfigError("plot attention needs --ckpt DIR and --text TEXT")
    ckpt = load_checkpoint(args.ckpt)
    tok, model = ckpt.tokenizer, ckpt.model
    if ckpt.model_config.arch == "seq2seq":
        from .inference import translate_texts

        src = encode_checked(tok, args.text, add_eos=True)
        target = args.target if args.target is not None else translate_texts(ckpt, [args.text], beam=1)[0]
        tgt = [BOS_ID] + encode_checked(tok, target)
        maps = viz.attention_maps(model, src=torch.tensor([src]), tgt=torch.tensor([tgt]))
        kind = args.kind or "decoder.cross_attn"
        queries = [tok.token_label(i) for i in tgt]
        keys = [tok.token_label(i) for i in src] if kind.endswith("cross_attn") or kind.startswith("encoder") \
            else queries
        if kind.startswith("encoder"):
            queries = keys
    else:
        ids = encode_checked(tok, args.text) or [BOS_ID]
        inputs = {"input_ids": torch.tensor([ids])}
        maps = viz.attention_maps(model, **inputs)
        kind = args.kind or ("decoder.self_attn" if ckpt.model_config.arch == "gpt" else "encoder.self_attn")
        queries = keys = [tok.token_label(i) for i in ids]
        target = None
    title = f"{kind}: {_shorten(args.text)}" + (f"\n-> {_shorten(target)}" if target is not None else "")
    return viz.plot_attention(maps, out, query_tokens=queries, key_tokens=keys, kind=kind, title=title)


def cmd_explore(args: argparse.Namespace) -> int:
    from .explore import Limits, serve

    caps = {"max_chars": args.max_chars, "max_tokens": args.max_tokens}
    serve(args.ckpt, args.host, args.port, limits=Limits(**{k: v for k, v in caps.items() if v is not None}),
          quiet=not args.verbose)
    return 0


def _shorten(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def demo(preset: str, overrides: dict[str, Any], seed: int = 0) -> None:
    """Build a model, check its parameter count against the formula, run a forward pass and cached decoding."""
    torch.manual_seed(seed)
    model_types = ModelConfig.__dataclass_fields__
    unknown = [k for k in overrides if k not in model_types]
    if unknown:
        raise ConfigError(f"unknown model config key {unknown[0]!r}")
    from .config import _field_types, coerce

    types = _field_types(ModelConfig)
    # preset(**changes), not replace(): fields derived from n_layers etc. are derived again
    cfg = ModelConfig.preset(preset, **{k: coerce(k, v, types[k]) for k, v in overrides.items()})
    model = build_model(cfg).eval()
    n = sum(p.numel() for p in model.parameters())
    formula = count_parameters_formula(cfg)
    print(f"preset {preset}: arch={cfg.arch} d_model={cfg.d_model} heads={cfg.n_heads} layers={cfg.n_layers} "
          f"d_ff={cfg.d_ff} norm={cfg.norm} activation={cfg.activation} positions={cfg.positional}")
    print(f"parameters: {n:,} (analytic formula: {formula:,}, {'match' if n == formula else 'MISMATCH'})")
    B, T = 2, min(16, cfg.max_len)
    ids = torch.randint(1, cfg.vocab_size, (B, T))
    with torch.no_grad():
        start = time.perf_counter()
        if cfg.arch == "seq2seq":
            tgt = torch.randint(1, cfg.target_vocab_size, (B, T))
            out = model(ids, tgt)
            print(f"forward: src {tuple(ids.shape)} + tgt {tuple(tgt.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            memory = model.encode(ids)
            cache = model.new_cache(B)
            steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(T)], 1)
        elif cfg.arch == "gpt":
            out = model(ids)
            print(f"forward: input_ids {tuple(ids.shape)} -> logits {tuple(out.shape)} "
                  f"in {1000 * (time.perf_counter() - start):.1f} ms")
            cache = model.new_cache(B)
            steps = torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(T)], 1)
        else:
            out = model(ids)
            hidden = model.encode(ids)
            print(f"forward: input_ids {tuple(ids.shape)} -> hidden {tuple(hidden.shape)} -> class logits "
                  f"{tuple(out.shape)} in {1000 * (time.perf_counter() - start):.1f} ms")
            return
    diff = (steps - out).abs().max().item()
    print(f"KV-cached decoding, one token at a time: max |cached - full| = {diff:.2e}")


def explain_config(preset: str, overrides: dict[str, Any]) -> tuple[ModelConfig, str, str | None]:
    """The model of a model preset (paper-base, ...) or of a training preset (copy, multi30k, ...) with
    key=value changes; returns it, a note on where its vocabulary size came from and the training task
    (None for a model preset)."""
    from .config import _field_types, coerce

    if preset in PRESETS:
        types = _field_types(ModelConfig)
        unknown = [k for k in overrides if k not in types]
        if unknown:
            raise ConfigError(f"unknown model config key {unknown[0]!r}")
        return ModelConfig.preset(preset, **{k: coerce(k, v, types[k]) for k, v in overrides.items()}), "", None
    if preset not in preset_names():
        raise ConfigError(f"unknown preset {preset!r}; model presets: {', '.join(sorted(PRESETS))}; "
                          f"training presets: {', '.join(preset_names())}")
    vocab = overrides.pop("vocab_size", None)
    model_kw, train = split_settings(resolve_settings(preset, None, overrides))
    if train.init_from:
        raise ConfigError(f"preset {preset} fine-tunes a pretrained model; see `scratchformer info` of its checkpoint")
    note = ""
    if vocab is None:  # the real vocabulary comes from the tokenizer trained on the data
        vocab = train.bpe_vocab_size if train.tokenizer == "bpe" else (
            train.n_symbols + 4 if train.task in ("copy", "reverse", "sort") else 69)
        note = f"vocab_size={vocab} assumed (the real one comes from the tokenizer; set vocab_size=N to change)"
    if train.task in ("classify", "mlm"):
        model_kw.setdefault("n_classes", 2)
    return ModelConfig(**{**model_kw, "vocab_size": int(vocab)}), note, train.task


def cmd_explain(args: argparse.Namespace) -> int:
    from .explain import explain

    cfg, note, task = explain_config(args.preset, parse_overrides(args.overrides))
    if note:
        print(note)
    print(explain(cfg, batch=args.batch, length=args.length, target_length=args.target_length,
                  predict_tokens=task == "mlm"))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    demo(args.preset, parse_overrides(args.overrides), args.seed)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scratchformer",
                                     description="Train and inspect Transformers written from scratch.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train a model (default: the copy task)",
                       description="Train a model. Settings: the preset, then --config, then key=value "
                                   "(any TrainConfig or ModelConfig field).",
                       epilog="common keys: task (copy|reverse|sort|lm|translate|classify|mlm), dataset, max_steps, "
                              "batch_size, grad_accum, lr, schedule (inverse_sqrt|cosine|constant), warmup_steps, "
                              "label_smoothing, seed, eval_every, save_every, log_every, patience, select_by, "
                              "test_at_end, bf16, compile; model: d_model, n_heads, n_layers, d_ff, max_len, dropout, "
                              "norm (post|pre), activation (relu|gelu|gelu_tanh|swiglu), "
                              "positional (sinusoidal|learned|rotary|none). "
                              "All of them: src/scratchformer/config.py.")
    p.add_argument("--preset", help=f"one of: {', '.join(preset_names())} (default: {DEFAULT_PRESET})")
    p.add_argument("--config", help="a TOML file of key = value settings")
    p.add_argument("--data", nargs="+", metavar="PATH", help="your data: a text file (lm), a TSV or two "
                   "line-aligned files (translate), a TSV/CSV of text,label (classify), "
                   "a text file of one example a line or a TSV/CSV (mlm)")
    p.add_argument("--data-dir", help="where the named datasets (tinyshakespeare, multi30k, sst2) are looked for "
                   "first; then $SCRATCHFORMER_DATA, then the user cache, else they are downloaded")
    p.add_argument("--out", required=True, help="run directory (must be new or empty unless --resume)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="settings, e.g. max_steps=500 d_model=64")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("info", help="describe a checkpoint")
    p.add_argument("ckpt", help="a checkpoint directory, or a run directory (its best/ checkpoint)")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="continue a prompt with a language model")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--prompt", required=True)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--greedy", action="store_true", help="always take the most likely token (no sampling)")
    p.set_defaults(func=cmd_generate)

    for name, help_text in (("translate", "translate sentences with an encoder-decoder"),
                            ("classify", "label texts with a classifier (label and probability per line)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
        p.add_argument("texts", nargs="*", metavar="TEXT", help="inputs (else --input FILE, else standard input)")
        p.add_argument("--input", help="a file with one input per line ('-' = standard input)")
        if name == "translate":
            p.add_argument("--beam", type=int, default=4, help="beam size (1 = greedy); the paper uses 4")
            p.add_argument("--length-penalty", type=float, default=0.6, help="alpha of the length penalty (paper: 0.6)")
            p.set_defaults(func=cmd_translate)
        else:
            p.set_defaults(func=cmd_classify)

    p = sub.add_parser("evaluate", help="metrics of a checkpoint on held-out data, as JSON")
    p.add_argument("--ckpt", required=True, nargs="+", metavar="DIR",
                   help="checkpoint or run directory; several classifiers: evaluate them as an ensemble "
                        "(the mean of their class probabilities)")
    p.add_argument("--split", default="test", help="test (default) or val")
    p.add_argument("--data", nargs="+", metavar="PATH", help="evaluate on these files instead")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=0.6)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="export a checkpoint's model to ONNX or TorchScript")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--format", choices=["onnx", "torchscript"], required=True)
    p.add_argument("--out", required=True, help="output file")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("plot", help="draw attention maps, positional encodings, the LR schedule or training curves")
    p.add_argument("what", choices=["attention", "positions", "schedule", "curves"])
    p.add_argument("--out", required=True, help="PNG file to write")
    p.add_argument("--ckpt", help="attention / schedule: a checkpoint or run directory")
    p.add_argument("--text", help="attention: the input text")
    p.add_argument("--target", help="attention (seq2seq): the target text (default: the model's translation)")
    p.add_argument("--kind", help="attention: encoder.self_attn | decoder.self_attn | decoder.cross_attn")
    p.add_argument("--run", help="curves: a training run directory (with metrics.jsonl)")
    p.add_argument("--preset", help="schedule: a training preset (default: copy)")
    p.add_argument("--max-len", type=int, default=100, help="positions: number of positions")
    p.add_argument("--d-model", type=int, default=128, help="positions: model size")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="schedule: settings, e.g. warmup_steps=4000")
    p.set_defaults(func=cmd_plot)

    p = sub.add_parser("explore", help="the attention explorer: a local web page that draws every layer's and "
                       "head's attention for what you type",
                       description="Serve a web page (on this computer only, by default) where you type an input "
                                   "and see its tokens, every layer's and head's attention, and the model's output: "
                                   "next-token probabilities and a sampled continuation (GPT), the beam-search "
                                   "translation (encoder-decoder) or the class probabilities (classifier). "
                                   "POST /api/explore serves the same numbers as JSON.")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000; 0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this computer only)")
    p.add_argument("--max-chars", type=int, help="longest input accepted, in characters (default 1000)")
    p.add_argument("--max-tokens", type=int, help="longest input accepted, in tokens (default 128; "
                   "never more than the model's max_len)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=cmd_explore)

    p = sub.add_parser("explain", help="print a model's data flow: each stage's tensor shape and parameters",
                       description="Build the model of a preset (model presets: "
                                   f"{', '.join(sorted(PRESETS))}; or any training preset) with key=value "
                                   "changes, run one random example through it and print every stage in order: "
                                   "embedding, each layer's attention scores (B, H, T, S), feed-forward "
                                   "expansion, add & norm, logits; then the parameter total checked against "
                                   "the analytic formula.")
    p.add_argument("--preset", default="paper-base", help="a model or training preset (default: paper-base)")
    p.add_argument("--batch", type=int, default=1, help="example batch size B (default 1)")
    p.add_argument("--length", type=int, default=8, help="example input length T (source length S for "
                                                          "translation; default 8)")
    p.add_argument("--target-length", type=int, default=None, help="translation: target length (default: --length)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="model settings to change, e.g. n_layers=2")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("demo", help="build a model, count its parameters, run a forward pass")
    p.add_argument("--preset", default="paper-base", help=f"a model preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", metavar="key=value", help="ModelConfig fields to change")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .data.errors import DataError
    from .train.checkpoint import CheckpointError
    from .train.trainer import RunDirError, TrainingError

    try:
        return args.func(args)
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except TrainingError as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 1
    except (ConfigError, DataError, CheckpointError, RunDirError, ValueError, OSError) as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scratchformer: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
