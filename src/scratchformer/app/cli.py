"""The ``scratchformer`` command: each subcommand declared once, as data, and dispatched to the function that
runs it; a thin layer over importable functions.

    scratchformer train [--preset NAME] [--config FILE] [--data PATH ...] [--val PATH ...] [--test PATH ...]
                        [key=value ...] --out DIR [--resume] [--quiet]
    scratchformer prepare [--preset NAME] [--config FILE] [--data PATH ...] [--val ...] [--test ...] [key=value ...]
    scratchformer info CKPT
    scratchformer generate --ckpt DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K --top-p P --seed S]
    scratchformer translate --ckpt DIR [TEXT ... | --input FILE] [--beam N --length-penalty A]
    scratchformer classify --ckpt DIR [TEXT ... | IMAGE ... | --input FILE]
    scratchformer evaluate --ckpt DIR [DIR ...] [--split test | --data PATH ...]   (several DIRs: an ensemble)
    scratchformer evaluate --ckpt DIR --benchmark NAMES [--limit N] [--shots K] [--chat auto|yes|no] [--output FILE]
    scratchformer report --ckpt RUN   (RUN/report.md and its figures)
    scratchformer export --ckpt DIR --format onnx|onnx-single|gguf|torchscript|hf --out PATH [--gguf-type f32|f16|q8_0]
    scratchformer plot attention|positions|schedule|curves --out FILE.png|FILE.svg ...
    scratchformer explore --ckpt DIR [--port N]   (or --text TEXT --export FILE.html|.png|.svg [--layer L --head H])
    scratchformer explain [--preset NAME] [key=value ...]
    scratchformer demo [--preset MODEL_PRESET] [key=value ...]

Only the parser is built here: the commands (``commands.py``, ``train_commands.py``) and PyTorch are imported
when a command runs (each command's function is named as ``"module:function"`` and imported then, so that
``scratchformer --help`` starts without PyTorch). The help of ``train`` lists every setting with its allowed
values, generated from the configs and the task registry. Errors a user can cause end with one line on stderr
and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

from scratchformer.app.arguments import Command, build, opt, settings_help, take_settings
from scratchformer.app.options import INFERENCE, model_tools
from scratchformer.errors import Interrupted, TrainingError
from scratchformer.nn.config import CHOICES, ModelConfig
from scratchformer.nn.model_presets import PRESETS
from scratchformer.registry import data_formats, task_names
from scratchformer.settings.choices import TRAIN_CHOICES
from scratchformer.settings.config import TrainConfig
from scratchformer.settings.presets import preset_names

PRECEDENCE = ("Settings are applied in one order; a later one wins: the task's own defaults, the preset (if "
              "named, and only for its own task), --config FILE, --data (your files replace a preset's dataset), "
              "then key=value words. The run prints the settings that differ from the task's defaults.")
SETTINGS = opt("overrides", nargs="*", metavar="key=value", help="settings, anywhere on the line, e.g. "
               "max_steps=500 d_model=64 (a path with '=' in it: write it as ./a=b.txt)")


def _data_options() -> list:
    """What ``train`` and ``prepare`` read: a preset, a config file, the user's files by role."""
    return [
        opt("--preset", help=f"one of: {', '.join(preset_names())} (default: none; the task's own defaults, "
                             "task=copy without task=)"),
        opt("--config", help="a TOML file of key = value settings"),
        opt("--data", nargs="+", metavar="PATH", help=f"your training data: {data_formats()}"),
        opt("--val", nargs="+", metavar="PATH", help="a validation file, the same form as --data (default: a "
            "seeded random val_fraction of the training rows; for lm the end of the text)"),
        opt("--test", nargs="+", metavar="PATH", help="a test file, the same form as --data: scored once at the "
            "end, never used to choose a checkpoint"),
        opt("--data-dir", help="where the named datasets (tinyshakespeare, multi30k, sst2) are looked for first; "
            "then $SCRATCHFORMER_DATA, then the user cache, else they are downloaded"),
    ]


def _all_settings() -> str:
    return (f"tasks: {', '.join(task_names())}. Every setting (key=value), with the allowed values of each choice: "
            + settings_help(("training", TrainConfig, TRAIN_CHOICES), ("model", ModelConfig, CHOICES)))


TRAINING = [
    Command("train", "train a model (default: the copy task)", [
        *_data_options(),
        opt("--out", required=True, help="run directory (must be new or empty unless --resume)"),
        opt("--resume", action="store_true", help="continue the run in --out from its last checkpoint; "
            "max_steps=N (N above the step reached) extends it"),
        opt("--quiet", action="store_true", help="no progress or information lines, only warnings and the final "
            "results"),
        SETTINGS,
    ], "scratchformer.app.train_commands:cmd_train", description=f"Train a model. {PRECEDENCE}",
        epilog=_all_settings, settings=True),
    Command("prepare", "tokenize your data once into corpora on disk that every run reads", [
        *_data_options(),
        opt("--quiet", action="store_true", help="no progress, only the result lines"),
        SETTINGS,
    ], "scratchformer.app.train_commands:cmd_prepare", settings=True,
        description="Read the files a `train` with the same settings would read, train its tokenizer (unless it "
                    "was trained before), and write each file's token ids into a prepared corpus in "
                    "$SCRATCHFORMER_CORPORA (default: the user cache), in one streaming pass with bounded memory; "
                    "then say what was written and how big. A later `train`, `--resume`, `evaluate` or another "
                    "model on the same files reuses it. (train prepares what is missing by itself: this only does "
                    "it ahead of time.)"),
]


def commands() -> list[Command]:
    return [*TRAINING, *INFERENCE, *model_tools(sorted(PRESETS))]


def main(argv: Sequence[str] | None = None) -> int:
    table = commands()
    parser = build("scratchformer", "Train and inspect Transformers written from scratch.", table)
    words = list(sys.argv[1:] if argv is None else argv)
    parser.argv = words
    try:
        args = parser.parse_args(take_settings(table, words))
    except SystemExit as done:  # --help, or a usage error argparse has printed in one line
        return int(done.code or 0)
    from scratchformer.extras import MissingExtra

    module, _, function = next(c.run for c in table if c.name == args.command).partition(":")
    try:
        return getattr(importlib.import_module(module), function)(args)
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Interrupted as err:
        print(f"scratchformer: {err}", file=sys.stderr)
        return 130
    except TrainingError as err:
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError, MissingExtra) as err:  # ConfigError, DataError, CheckpointError, RunDirError, ...
        print(f"scratchformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("scratchformer: interrupted", file=sys.stderr)
        return 130


__all__ = ["main"]
