"""The ``scratchformer`` command: a thin layer over importable functions.

    scratchformer train [--preset NAME] [--config FILE] [--data PATH ...] [--val PATH ...] [--test PATH ...]
                        [key=value ...] --out DIR [--resume] [--quiet]
    scratchformer prepare [--preset NAME] [--config FILE] [--data PATH ...] [--val ...] [--test ...] [key=value ...]
    scratchformer info CKPT
    scratchformer generate --ckpt DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K --top-p P --seed S]
    scratchformer translate --ckpt DIR [TEXT ... | --input FILE] [--beam N --length-penalty A]
    scratchformer classify --ckpt DIR [TEXT ... | IMAGE ... | --input FILE]
    scratchformer evaluate --ckpt DIR [DIR ...] [--split test | --data PATH ...]   (several DIRs: an ensemble)
    scratchformer export --ckpt DIR --format onnx|onnx-single|gguf|torchscript|hf --out PATH [--gguf-type f32|f16|q8_0]
    scratchformer plot attention|positions|schedule|curves --out FILE.png ...
    scratchformer explore --ckpt DIR [--port N]
    scratchformer explain [--preset NAME] [key=value ...]
    scratchformer demo [--preset MODEL_PRESET] [key=value ...]

This module only builds the parser and dispatches: the commands (``commands.py``) and PyTorch are imported
when a command runs. ``key=value`` words may stand anywhere after the command. Errors a user can cause end
with one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from scratchformer.app.arguments import Parser, at_least, in_range, positive_float, take_settings
from scratchformer.data.sources import data_formats
from scratchformer.nn.config import PRESETS, ConfigError
from scratchformer.train.settings import TASK_DEFAULTS, preset_names

DEFAULT_PRESET = "copy"

PRECEDENCE = ("Settings are applied in one order; a later one wins: the task's own defaults, the preset (if "
              "named, and only for its own task), --config FILE, --data (your files replace a preset's dataset), "
              "then key=value words. The run prints the settings that differ from the task's defaults.")


def _train_parser(sub: Any) -> None:
    tasks = ", ".join(TASK_DEFAULTS)
    p = sub.add_parser("train", help="train a model (default: the copy task)",
                       description=f"Train a model. {PRECEDENCE}",
                       epilog=f"tasks: {tasks}. Common keys: task, dataset, max_steps, max_time (e.g. 10m), "
                              "batch_size, grad_accum, lr, schedule (inverse_sqrt|cosine|constant), warmup_steps or "
                              "warmup_fraction, val_fraction, label_smoothing, seed, eval_every, save_every, "
                              "log_every, patience, select_by, test_at_end, device (auto|cpu|cuda|mps), precision "
                              "(fp32|bf16|fp16), compile; model: d_model, n_heads, "
                              "n_layers, d_ff, max_len, dropout, norm (post|pre), activation "
                              "(relu|gelu|gelu_tanh|swiglu), positional (sinusoidal|learned|rotary|none), attention "
                              "(softmax|linear). All of them: TrainConfig in src/scratchformer/train/config.py, "
                              "ModelConfig in src/scratchformer/nn/config.py.")
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


def _prepare_parser(sub: Any) -> None:
    p = sub.add_parser("prepare", help="tokenize your data once into corpora on disk that every run reads",
                       description="Read the files a `train` with the same settings would read, train its tokenizer "
                                   "(unless it was trained before), and write each file's token ids into a prepared "
                                   "corpus in $SCRATCHFORMER_CORPORA (default: the user cache), in one streaming "
                                   "pass with bounded memory; then say what was written and how big. A later "
                                   "`train`, `--resume`, `evaluate` or another model on the same files reuses it. "
                                   "(train prepares what is missing by itself: this only does it ahead of time.)")
    p.add_argument("--preset", help=f"one of: {', '.join(preset_names())}")
    p.add_argument("--config", help="a TOML file of key = value settings")
    p.add_argument("--data", nargs="+", metavar="PATH", help=f"training data: {data_formats()}")
    p.add_argument("--val", nargs="+", metavar="PATH", help="a validation file, the same form as --data")
    p.add_argument("--test", nargs="+", metavar="PATH", help="a test file, the same form as --data")
    p.add_argument("--data-dir", help="where the named datasets are looked for first")
    p.add_argument("--quiet", action="store_true", help="no progress, only the result lines")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="settings (task, tokenizer, bpe_vocab_size, "
                   "lowercase, tokenizer_sample, ...)")


def _inference_parsers(sub: Any) -> None:
    p = sub.add_parser("info", help="describe a checkpoint")
    p.add_argument("ckpt", help="a checkpoint directory, or a run directory (its best/ checkpoint)")

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

    for name, help_text in (("translate", "translate sentences with an encoder-decoder"),
                            ("classify", "label texts, or image files with an image classifier (ViT): label and "
                                         "probability per line")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
        p.add_argument("texts", nargs="*", metavar="TEXT", help="inputs (else --input FILE, else standard input); "
                       + ("for an image classifier, image files" if name == "classify" else "sentences"))
        p.add_argument("--input", help="a file with one input per line ('-' = standard input)")
        if name == "translate":
            _decoding_options(p)

    p = sub.add_parser("evaluate", help="metrics of a checkpoint on held-out data, as JSON")
    p.add_argument("--ckpt", required=True, nargs="+", metavar="DIR",
                   help="checkpoint or run directory; several classifiers: evaluate them as an ensemble "
                        "(the mean of their class probabilities)")
    p.add_argument("--split", default="test", help="the run's own split: test (default) or val")
    p.add_argument("--data", nargs="+", metavar="PATH", help="score all of these files instead (a test set), in the "
                   "form the model's task takes: " + data_formats())
    _decoding_options(p)

    p = sub.add_parser("export", help="export a checkpoint's model to ONNX, GGUF (llama.cpp), TorchScript or "
                                      "Hugging Face transformers")
    p.add_argument("--ckpt", required=True, help="checkpoint or run directory")
    p.add_argument("--format", choices=["onnx", "onnx-single", "gguf", "torchscript", "hf"], required=True,
                   help="onnx: a folder of graphs with the KV cache, a manifest and onnx_decode.py (decodes without "
                        "PyTorch); onnx-single: one graph, every position's logits in one pass; gguf: one file for "
                        "llama.cpp (a GPT); hf: a directory that transformers' from_pretrained loads")
    p.add_argument("--out", required=True, help="output file (a directory for --format onnx and hf)")
    p.add_argument("--gguf-type", choices=["f32", "f16", "q8_0"], default="f32",
                   help="gguf: the weight matrices' type (norms and biases stay float32)")
    p.add_argument("--hf-class", choices=["GPT2LMHeadModel", "BertForSequenceClassification", "BertModel"],
                   help="hf: the transformers class (default: GPT2LMHeadModel for a GPT, "
                        "BertForSequenceClassification for a classifier, BertModel for a task=mlm encoder)")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")


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
    p.add_argument("--image", help="attention (an image classifier, ViT): an image file; the picture shows the class "
                   "token's attention over its patches")
    p.add_argument("--target", help="attention (seq2seq): the target text (default: the model's translation)")
    p.add_argument("--kind", help="attention: encoder.self_attn | decoder.self_attn | decoder.cross_attn")
    p.add_argument("--run", help="curves: a training run directory (with metrics.jsonl)")
    p.add_argument("--preset", help="schedule: a training preset (default: the copy task's defaults)")
    p.add_argument("--max-len", type=at_least(1), default=100, help="positions: number of positions")
    p.add_argument("--d-model", type=at_least(2), default=128, help="positions: model size (even)")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="schedule: settings, e.g. warmup_steps=4000")

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

    p = sub.add_parser("demo", help="build a model, count its parameters, run a forward pass")
    p.add_argument("--preset", default="paper-base", help=f"a model preset: {', '.join(sorted(PRESETS))}")
    p.add_argument("--seed", type=at_least(0), default=0)
    p.add_argument("overrides", nargs="*", metavar="key=value", help="ModelConfig fields to change")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="scratchformer", description="Train and inspect Transformers written from scratch.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _train_parser(sub)
    _prepare_parser(sub)
    _inference_parsers(sub)
    _model_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(take_settings(parser, list(sys.argv[1:] if argv is None else argv)))
    except SystemExit as done:  # --help, or a usage error argparse has printed in one line
        return int(done.code or 0)
    from scratchformer.app import commands
    from scratchformer.checkpoint import CheckpointError
    from scratchformer.data.errors import DataError
    from scratchformer.extras import MissingExtra
    from scratchformer.train.interrupt import Interrupted
    from scratchformer.train.resume import RunDirError
    from scratchformer.train.trainer import TrainingError

    try:
        return getattr(commands, f"cmd_{args.command}")(args)
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Interrupted as err:
        print(f"scratchformer: {err}", file=sys.stderr)
        return 130
    except TrainingError as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 1
    except (ConfigError, DataError, CheckpointError, RunDirError, MissingExtra, ValueError, OSError) as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scratchformer: interrupted", file=sys.stderr)
        return 130


__all__ = ["build_parser", "main"]
