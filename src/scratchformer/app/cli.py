"""The ``scratchformer`` command: a thin layer over importable functions.

    scratchformer train [--preset NAME] [--config FILE] [--data PATH ...] [--val PATH ...] [--test PATH ...]
                        [key=value ...] --out DIR [--resume] [--quiet]
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

``key=value`` words may stand anywhere after the command. Errors a user can cause end with one line on
stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from scratchformer.data.sources import DataFiles, data_formats
from scratchformer.models import build_model
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.config import PRESETS, ConfigError, ModelConfig
from scratchformer.train.config import TrainConfig
from scratchformer.train.settings import (
    TASK_DEFAULTS,
    coerce,
    field_types,
    load_preset,
    parse_overrides,
    preset_names,
    resolve,
    resume_settings,
)

DEFAULT_PRESET = "copy"

PRECEDENCE = ("Settings are applied in one order; a later one wins: the task's own defaults, the preset (if "
              "named, and only for its own task), --config FILE, --data (your files replace a preset's dataset), "
              "then key=value words. The run prints the settings that differ from the task's defaults.")


# ------------------------------------------------------------------------------------ argument parsing


class Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block): ``scratchformer train: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"scratchformer: error: {message} (see {self.prog} --help)\n")


def at_least(low: int | float, kind: Callable[[str], Any] = int) -> Callable[[str], Any]:
    """An argparse type: a number ``>= low``."""

    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
        return value

    return check


def in_range(low: float, high: float, low_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a number in ``(low, high]`` (or ``[low, high]``)."""

    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not ((value > low) if low_open else (value >= low)) or value > high:
            raise argparse.ArgumentTypeError(f"must be in {'(' if low_open else '['}{low:g}, {high:g}], got {text}")
        return value

    return check


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _is_setting(word: str) -> bool:
    key, sep, _ = word.partition("=")
    return bool(sep) and key.isidentifier() and not Path(word).exists()


def _take_settings(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Move ``key=value`` words to the end, after ``--``, so they reach the positional ``overrides`` wherever
    they stood (argparse would otherwise give them to a preceding ``--data``, or refuse them after a flag).
    A word that is the value of an option (``--prompt a=b``) stays where it is."""
    sub = argv[0] if argv and not argv[0].startswith("-") else None
    action = next((a for a in parser._subparsers._group_actions if sub in getattr(a, "choices", {})), None) \
        if parser._subparsers and sub else None
    if action is None or sub not in ("train", "explain", "demo", "plot"):
        return argv
    single = {opt for a in action.choices[sub]._actions if a.nargs is None and a.option_strings
              for opt in a.option_strings}
    rest, words, i = [sub], [], 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            words += argv[i + 1:]
            break
        if word in single and i + 1 < len(argv):
            rest += [word, argv[i + 1]]
            i += 2
            continue
        (words if _is_setting(word) else rest).append(word)
        i += 1
    return rest + (["--", *words] if words else [])


# ------------------------------------------------------------------------------------ train


def cmd_train(args: argparse.Namespace) -> int:
    from scratchformer.train.resume import check_out_dir
    from scratchformer.train.run_info import RunInfo
    from scratchformer.train.trainer import train

    out = Path(args.out)
    check_out_dir(out, args.resume)
    files = DataFiles.of(args.data, args.val or (), args.test or ())
    overrides = parse_overrides(args.overrides)
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    if args.resume:
        given = resolve(preset=args.preset, config=args.config, data=files, overrides={}) \
            if (args.preset or args.config or files) else None
        resolved = resume_settings(_saved_run(out), given, overrides)
    else:
        resolved = resolve(preset=args.preset, config=args.config, data=files, overrides=overrides)
    model_kw, cfg = resolved.split()
    result = train(model_kw, cfg, out, resolved.data, resume=args.resume, quiet=args.quiet,
                   run=RunInfo.from_resolved(resolved))
    if not result.is_main:
        return 0
    for split, metrics in (("validation", result.val), ("test", result.test)):
        if metrics:
            print(f"{split}: " + ", ".join(f"{k} {_fmt(k, v)}" for k, v in metrics.items()))
    if result.samples and not args.quiet:
        print("samples:")
        for line in result.samples:
            print("  " + line)
    why = f" (stopped: {result.stop_reason})" if result.stop_reason else ""
    print(f"trained {result.step:,} steps in {result.seconds:.0f} s{why}; checkpoints in {out / 'best'} and "
          f"{out / 'last'}")
    return 0


def _saved_run(out: Path) -> dict[str, Any]:
    """A run directory's config.json; runs written before settings were saved get theirs rebuilt."""
    try:
        saved = json.loads((out / "config.json").read_text())
    except (OSError, ValueError) as err:
        raise ConfigError(f"{out / 'config.json'} is unreadable ({type(err).__name__}); cannot resume") from None
    if "settings" not in saved:
        settings = {k: v for k, v in saved.get("train", {}).items() if v is not None}
        settings |= {k: v for k, v in saved.get("model", {}).items() if k not in ("vocab_size", "pad_id")}
        saved["settings"] = settings
    return saved


def _fmt(name: str, value: float) -> str:
    if name in ("exact_match", "accuracy", "f1"):
        return f"{100 * value:.2f}%"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


# ------------------------------------------------------------------------------------ using a checkpoint


def cmd_info(args: argparse.Namespace) -> int:
    from scratchformer.checkpoint import load_checkpoint
    from scratchformer.checkpoint import resolve as resolve_ckpt

    ckpt = load_checkpoint(args.ckpt)
    cfg = ckpt.model_config
    n = sum(p.numel() for p in ckpt.model.parameters())
    print(f"checkpoint: {resolve_ckpt(args.ckpt)} (step {ckpt.step}, task {ckpt.task})")
    print(f"model: {type(ckpt.model).__name__}, {n:,} parameters (formula {count_parameters_formula(cfg):,})")
    for key, value in cfg.to_dict().items():
        if key in _FAMILY_ONLY and cfg.arch not in _FAMILY_ONLY[key]:
            continue
        print(f"  {key} = {value}")
    print(f"tokenizer: {type(ckpt.tokenizer).__name__}, {ckpt.tokenizer.vocab_size} tokens")
    if "labels" in ckpt.extra:
        print(f"labels: {', '.join(ckpt.extra['labels'])}")
    if ckpt.task == "mlm":
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
                print(f"{split} at step {last['step']}: " + ", ".join(f"{k} {_fmt(k, v)}" for k, v in values.items()))
    return 0


# Model fields that mean something for some families only (info leaves them out elsewhere).
_FAMILY_ONLY = {"n_classes": ("encoder",), "pooling": ("encoder",), "n_encoder_layers": ("seq2seq",),
                "n_decoder_layers": ("seq2seq",), "tgt_vocab_size": ("seq2seq",), "attention_window": ("seq2seq",
                                                                                                       "encoder")}


def cmd_generate(args: argparse.Namespace) -> int:
    from scratchformer.app.inference import generate_text
    from scratchformer.checkpoint import load_checkpoint

    if not args.prompt:
        raise ConfigError("--prompt is empty")
    ckpt = load_checkpoint(args.ckpt)
    print(generate_text(ckpt, args.prompt, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                        top_p=args.top_p, seed=args.seed, greedy=args.greedy))
    return 0


def cmd_translate(args: argparse.Namespace) -> int:
    from scratchformer.app.inference import read_inputs, translate_texts
    from scratchformer.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.ckpt)
    texts = read_inputs(args.texts, args.input)
    for line in translate_texts(ckpt, texts, beam=args.beam, length_penalty=args.length_penalty):
        print(line)
    return 0


def cmd_classify(args: argparse.Namespace) -> int:
    from scratchformer.app.inference import classify_texts, read_inputs
    from scratchformer.checkpoint import load_checkpoint

    ckpt = load_checkpoint(args.ckpt)
    texts = read_inputs(args.texts, args.input)
    for label, prob in classify_texts(ckpt, texts):
        print(f"{label}\t{prob:.4f}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from scratchformer.app.inference import evaluate_checkpoint, evaluate_ensemble
    from scratchformer.checkpoint import load_checkpoint

    if len(args.ckpt) > 1:
        ckpts = [(path, load_checkpoint(path)) for path in args.ckpt]
        result = evaluate_ensemble(ckpts, split=args.split, data=args.data)
    else:
        result = evaluate_checkpoint(load_checkpoint(args.ckpt[0]), split=args.split, data=args.data, beam=args.beam,
                                     length_penalty=args.length_penalty)
    print(json.dumps(result, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from scratchformer.app.export import export_onnx, export_torchscript
    from scratchformer.checkpoint import load_checkpoint

    out = Path(args.out)
    if out.exists() and not args.force:
        raise ConfigError(f"{out} exists; choose another --out or add --force")
    if args.hf_class and args.format != "hf":
        raise ConfigError("--hf-class applies to --format hf")
    if args.format == "hf":
        from scratchformer.app.export.huggingface import export_hf

        done = export_hf(args.ckpt, out, hf_class=args.hf_class, force=args.force)
        print(f"wrote {done.path} ({done.hf_class}; outputs match the checkpoint's within {done.max_abs_diff:.1e})")
        return 0
    ckpt = load_checkpoint(args.ckpt)
    path = (export_onnx if args.format == "onnx" else export_torchscript)(ckpt.model, out)
    print(f"wrote {path}")
    return 0


# ------------------------------------------------------------------------------------ pictures


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
        path = _plot_attention(args, out)
    print(f"wrote {path}")
    return 0


def _schedule_of(args: argparse.Namespace) -> Any:
    """A checkpoint's own schedule (extensions included), or the one a preset and key=value words give."""
    if args.ckpt:
        from scratchformer.checkpoint import load_trainer_state
        from scratchformer.checkpoint import resolve as resolve_ckpt
        from scratchformer.train.optim import Schedule

        state = load_trainer_state(resolve_ckpt(args.ckpt))
        if "schedule" in state:
            return Schedule.from_dict(state["schedule"])
        from scratchformer.checkpoint import load_checkpoint

        return TrainConfig.from_dict(load_checkpoint(args.ckpt).train)
    return resolve(preset=args.preset, overrides=parse_overrides(args.overrides)).split()[1]


def _plot_attention(args: argparse.Namespace, out: Path) -> Path:
    from scratchformer.app import plots as viz
    from scratchformer.app.inference import encode_checked
    from scratchformer.checkpoint import load_checkpoint
    from scratchformer.tokenizers import BOS_ID

    if not args.ckpt or not args.text:
        raise ConfigError("plot attention needs --ckpt DIR and --text TEXT")
    ckpt = load_checkpoint(args.ckpt)
    tok, model = ckpt.tokenizer, ckpt.model
    if ckpt.model_config.arch == "seq2seq":
        from scratchformer.app.inference import translate_texts

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
    from scratchformer.app.explore import Limits, serve

    caps = {"max_chars": args.max_chars, "max_tokens": args.max_tokens}
    serve(args.ckpt, args.host, args.port, limits=Limits(**{k: v for k, v in caps.items() if v is not None}),
          quiet=not args.verbose)
    return 0


def _shorten(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ------------------------------------------------------------------------------------ models on paper


def model_from_preset(preset: str, overrides: dict[str, Any]) -> ModelConfig:
    """A model preset (paper-base, ...) with key=value changes to its ModelConfig fields."""
    types = field_types(ModelConfig)
    unknown = [k for k in overrides if k not in types]
    if unknown:
        raise ConfigError(f"unknown model config key {unknown[0]!r}")
    # preset(**changes), not replace(): fields derived from n_layers etc. are derived again
    return ModelConfig.preset(preset, **{k: coerce(k, v, types[k]) for k, v in overrides.items()})


def demo(preset: str, overrides: dict[str, Any], seed: int = 0) -> None:
    """Build a model, check its parameter count against the formula, run a forward pass and cached decoding."""
    torch.manual_seed(seed)
    cfg = model_from_preset(preset, overrides)
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
    if preset in PRESETS:
        return model_from_preset(preset, overrides), "", None
    if preset not in preset_names():
        raise ConfigError(f"unknown preset {preset!r}; model presets: {', '.join(sorted(PRESETS))}; "
                          f"training presets: {', '.join(preset_names())}")
    vocab = overrides.pop("vocab_size", None)
    model_kw, train = resolve(preset=preset, overrides=overrides).split()
    if train.init_from:
        raise ConfigError(f"preset {preset} fine-tunes a pretrained model; see `scratchformer info` of its checkpoint")
    note = ""
    if vocab is None:  # the real vocabulary comes from the tokenizer trained on the data
        from scratchformer.tokenizers import SPECIAL_TOKENS

        if train.tokenizer == "bpe":
            vocab = train.bpe_vocab_size
        elif train.task in ("copy", "reverse", "sort"):
            vocab = train.n_symbols + len(SPECIAL_TOKENS)
        else:  # a character vocabulary: Tiny Shakespeare's 65 characters, say
            vocab = 65 + len(SPECIAL_TOKENS)
        note = f"vocab_size={vocab} assumed (the real one comes from the tokenizer; set vocab_size=N to change)"
    if train.task in ("classify", "mlm"):
        model_kw.setdefault("n_classes", 2)
    return ModelConfig(**{**model_kw, "vocab_size": int(vocab)}), note, train.task


def cmd_explain(args: argparse.Namespace) -> int:
    from scratchformer.app.explain import explain

    cfg, note, task = explain_config(args.preset, parse_overrides(args.overrides))
    if note:
        print(note)
    print(explain(cfg, batch=args.batch, length=args.length, target_length=args.target_length,
                  predict_tokens=task == "mlm"))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    demo(args.preset, parse_overrides(args.overrides), args.seed)
    return 0


# ------------------------------------------------------------------------------------ the parser


def _train_parser(sub: Any) -> None:
    tasks = ", ".join(TASK_DEFAULTS)
    p = sub.add_parser("train", help="train a model (default: the copy task)",
                       description=f"Train a model. {PRECEDENCE}",
                       epilog=f"tasks: {tasks}. Common keys: task, dataset, max_steps, max_time (e.g. 10m), "
                              "batch_size, grad_accum, lr, schedule (inverse_sqrt|cosine|constant), warmup_steps or "
                              "warmup_fraction, val_fraction, label_smoothing, seed, eval_every, save_every, "
                              "log_every, patience, select_by, test_at_end, bf16, compile; model: d_model, n_heads, "
                              "n_layers, d_ff, max_len, dropout, norm (post|pre), activation "
                              "(relu|gelu|gelu_tanh|swiglu), positional (sinusoidal|learned|rotary|none). All of "
                              "them: TrainConfig and ModelConfig in src/scratchformer/config.py.")
    p.add_argument("--preset", help=f"one of: {', '.join(preset_names())} (default: none; the task's own defaults, "
                                    f"task={DEFAULT_PRESET} without task=)")
    p.add_argument("--config", help="a TOML file of key = value settings")
    p.add_argument("--data", nargs="+", metavar="PATH", help=f"your training data: {data_formats()}")
    p.add_argument("--val", nargs="+", metavar="PATH", help="a validation file, the same form as --data (default: "
                   "a seeded random val_fraction of the training rows; for lm the end of the text)")
    p.add_argument("--test", nargs="+", metavar="PATH", help="a test file, the same form as --data: scored once at "
                   "the end, never used to choose a checkpoint")
    p.add_argument("--data-dir", help="where the named datasets (tinyshakespeare, multi30k, sst2) are looked for "
                   "first; then $SCRATCHFORMER_DATA, then the user cache, else they are downloaded")
    p.add_argument("--out", required=True, help="run directory (must be new or empty unless --resume)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint; "
                   "max_steps=N (N above the step reached) extends it")
    p.add_argument("--quiet", action="store_true", help="no progress or information lines, only warnings and the "
                   "final results")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="settings, anywhere on the line, e.g. "
                   "max_steps=500 d_model=64")
    p.set_defaults(func=cmd_train)


def _inference_parsers(sub: Any) -> None:
    p = sub.add_parser("info", help="describe a checkpoint")
    p.add_argument("ckpt", help="a checkpoint directory, or a run directory (its best/ checkpoint)")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("generate", help="continue a prompt with a language model")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument("--max-new-tokens", type=at_least(1), default=200, help="tokens to add (>= 1; default 200)")
    p.add_argument("--temperature", type=positive_float, default=0.8,
                   help="divide the logits by this before sampling (> 0; default 0.8; lower is more conservative)")
    p.add_argument("--top-k", type=at_least(1), default=None, help="sample from the k most likely tokens only (>= 1)")
    p.add_argument("--top-p", type=in_range(0.0, 1.0), default=None,
                   help="sample from the smallest set of tokens whose probability reaches p (in (0, 1])")
    p.add_argument("--seed", type=at_least(0), default=None,
                   help="seed of the sampling (>= 0), for a reproducible text")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token (no sampling)")
    p.set_defaults(func=cmd_generate)

    for name, help_text in (("translate", "translate sentences with an encoder-decoder"),
                            ("classify", "label texts with a classifier (label and probability per line)")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
        p.add_argument("texts", nargs="*", metavar="TEXT", help="inputs (else --input FILE, else standard input)")
        p.add_argument("--input", help="a file with one input per line ('-' = standard input)")
        if name == "translate":
            _decoding_options(p)
            p.set_defaults(func=cmd_translate)
        else:
            p.set_defaults(func=cmd_classify)

    p = sub.add_parser("evaluate", help="metrics of a checkpoint on held-out data, as JSON")
    p.add_argument("--ckpt", required=True, nargs="+", metavar="DIR",
                   help="checkpoint or run directory; several classifiers: evaluate them as an ensemble "
                        "(the mean of their class probabilities)")
    p.add_argument("--split", default="test", help="the run's own split: test (default) or val")
    p.add_argument("--data", nargs="+", metavar="PATH", help="score all of these files instead (a test set), in the "
                   "form the model's task takes: " + data_formats())
    _decoding_options(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("export", help="export a checkpoint's model to ONNX, TorchScript or Hugging Face transformers")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--format", choices=["onnx", "torchscript", "hf"], required=True,
                   help="hf: a directory that transformers' from_pretrained loads (model, tokenizer, model card)")
    p.add_argument("--out", required=True, help="output file (a directory for --format hf)")
    p.add_argument("--hf-class", choices=["GPT2LMHeadModel", "BertForSequenceClassification", "BertModel"],
                   help="hf: the transformers class (default: GPT2LMHeadModel for a GPT, "
                        "BertForSequenceClassification for a classifier, BertModel for a task=mlm encoder)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.set_defaults(func=cmd_export)


def _decoding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", type=at_least(1), default=4, help="beam size (>= 1; 1 = greedy); the paper uses 4")
    p.add_argument("--length-penalty", type=at_least(0.0, float), default=0.6,
                   help="alpha of the length penalty (>= 0; the paper: 0.6)")


def _model_parsers(sub: Any) -> None:
    p = sub.add_parser("plot", help="draw attention maps, positional encodings, the LR schedule or training curves")
    p.add_argument("what", choices=["attention", "positions", "schedule", "curves"])
    p.add_argument("--out", required=True, help="PNG file to write")
    p.add_argument("--ckpt", help="attention / schedule: a checkpoint or run directory")
    p.add_argument("--text", help="attention: the input text")
    p.add_argument("--target", help="attention (seq2seq): the target text (default: the model's translation)")
    p.add_argument("--kind", help="attention: encoder.self_attn | decoder.self_attn | decoder.cross_attn")
    p.add_argument("--run", help="curves: a training run directory (with metrics.jsonl)")
    p.add_argument("--preset", help="schedule: a training preset (default: the copy task's defaults)")
    p.add_argument("--max-len", type=at_least(1), default=100, help="positions: number of positions")
    p.add_argument("--d-model", type=at_least(2), default=128, help="positions: model size (even)")
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
    p.add_argument("--batch", type=at_least(1), default=1, help="example batch size B (default 1)")
    p.add_argument("--length", type=at_least(1), default=8, help="example input length T (source length S for "
                                                                 "translation; default 8)")
    p.add_argument("--target-length", type=at_least(1), default=None,
                   help="translation: target length (default: --length)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="model settings to change, e.g. n_layers=2")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("demo", help="build a model, count its parameters, run a forward pass")
    p.add_argument("--preset", default="paper-base", help=f"a model preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--seed", type=at_least(0), default=0)
    p.add_argument("overrides", nargs="*", metavar="key=value", help="ModelConfig fields to change")
    p.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="scratchformer", description="Train and inspect Transformers written from scratch.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _train_parser(sub)
    _inference_parsers(sub)
    _model_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(_take_settings(parser, list(sys.argv[1:] if argv is None else argv)))
    except SystemExit as done:  # --help, or a usage error argparse has printed in one line
        return int(done.code or 0)
    from scratchformer.checkpoint import CheckpointError
    from scratchformer.data.errors import DataError
    from scratchformer.train.resume import RunDirError
    from scratchformer.train.trainer import Interrupted, TrainingError

    try:
        return args.func(args)
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Interrupted as err:
        print(f"scratchformer: {err}", file=sys.stderr)
        return 130
    except TrainingError as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 1
    except (ConfigError, DataError, CheckpointError, RunDirError, ValueError, OSError) as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scratchformer: interrupted", file=sys.stderr)
        return 130


def load_preset_settings(name: str) -> dict[str, Any]:
    """A training preset's settings on top of its task's defaults (what ``--preset NAME`` trains)."""
    return resolve(preset=name).settings


__all__ = ["build_parser", "demo", "explain_config", "load_preset", "load_preset_settings", "main", "preset_names"]
