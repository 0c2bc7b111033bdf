"""Does the paper's checkpoint averaging, or a moving average of the weights, help `shakespeare-char`?

The paper's checkpoint averaging beside the moving average, measured on the ``shakespeare-char`` preset.

    SCRATCHFORMER_DATA=../shared/data python bench/research/checkpoint_averaging.py [--out runs/bench-averaging]

The paper (§6.1) used "a single model obtained by averaging the last 5 checkpoints, which were written at
10-minute intervals": about 1,400 of the base model's 100,000 steps apart, so the 5 span the last 6 % of
training. Two runs of the preset (2,000 steps, the same batches, dropout masks and learning rates):

1. ``average_last=20 save_every=25``: its ``last/`` is the plain final model; its ``averaged/`` is the
   mean of the last 20 saves (steps 1,525 to 2,000); the other means below are taken from the same
   ``history/``: the last 5 saves 25 steps apart (the last 5 % of training, as the paper's), and the last
   5 saves 100 steps apart (the last 20 %).
2. ``ema_decay=0.99``, then ``0.998``: a moving average over about the last 100 (500) steps.

Every model is scored on the whole validation text (the last 10 % of Tiny Shakespeare), each character
predicted once in consecutive windows of 64 characters: these numbers differ from the trainer's 20 random
batches, which are noisier. Writes ``report.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import torch

from scratchformer.checkpoints import load_checkpoint, save_checkpoint
from scratchformer.data import load_tinyshakespeare
from scratchformer.settings.resolve import resolve
from scratchformer.settings.values import parse_overrides
from scratchformer.tasks.inference import evaluate_checkpoint
from scratchformer.train import train
from scratchformer.train.averaging import CheckpointHistory


def run(out: Path, overrides: list[str]) -> None:
    if out.exists():
        shutil.rmtree(out)
    resolved = resolve(preset="shakespeare-char", overrides=parse_overrides(overrides))
    train(resolved, out, quiet=True)


def mean_of(run_dir: Path, steps: list[int], out: Path) -> Path:
    """A checkpoint holding the mean of the run's kept weights at ``steps``."""
    ckpt = load_checkpoint(run_dir / "last")
    history = CheckpointHistory(run_dir / "history", keep=len(steps))
    chosen = out / "history"
    chosen.mkdir(parents=True, exist_ok=True)
    for step in steps:
        shutil.copy(history.path(step), chosen / history.path(step).name)
    CheckpointHistory(chosen, keep=len(steps)).load_mean(ckpt.model)
    save_checkpoint(out, ckpt.model, ckpt.tokenizer, ckpt.model_config, ckpt.train, ckpt.step, None, ckpt.extra)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-averaging")
    args = parser.parse_args()
    out = Path(args.out)
    run(out / "checkpoints", ["average_last=20", "save_every=25"])
    run(out / "ema-0.99", ["ema_decay=0.99"])
    run(out / "ema-0.998", ["ema_decay=0.998"])

    runs = out / "checkpoints"
    models = {
        "the final weights (step 2,000)": runs / "last",
        "best/ (the best of the 8 evaluations)": runs / "best",
        "mean of the last 5 checkpoints, 25 steps apart (the last 5 %)":
            mean_of(runs, list(range(1900, 2001, 25)), out / "mean-5x25"),
        "mean of the last 5 checkpoints, 100 steps apart (the last 20 %)":
            mean_of(runs, list(range(1600, 2001, 100)), out / "mean-5x100"),
        "mean of the last 20 checkpoints, 25 steps apart (the last 24 %)": runs / "averaged",
        "moving average, ema_decay 0.99 (about 100 steps)": out / "ema-0.99" / "last",
        "moving average, ema_decay 0.998 (about 500 steps)": out / "ema-0.998" / "last",
    }
    _, val_text = load_tinyshakespeare()
    report = []
    with tempfile.TemporaryDirectory() as tmp:
        val_file = Path(tmp) / "val.txt"
        val_file.write_text(val_text)
        for name, path in models.items():
            metrics = evaluate_checkpoint(load_checkpoint(path), data=[str(val_file)])
            report.append({"model": name, "checkpoint": str(path.relative_to(out)),
                           "val_loss": round(metrics["loss"], 4), "characters": metrics["examples"]})
            print(f"{metrics['loss']:.4f}  {name}")
    (out / "report.json").write_text(json.dumps({"threads": torch.get_num_threads(), "models": report}, indent=2))


if __name__ == "__main__":
    main()
