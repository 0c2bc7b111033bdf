"""Does the `shakespeare-char` preset beat nanoGPT's CPU validation loss (about 1.88) in no more time?

Train the ``shakespeare-char`` preset (nanoGPT's CPU configuration) and report validation loss and time.

    SCRATCHFORMER_DATA=../shared/data python bench/reproduce/shakespeare_char.py \
        [--out runs/bench-shakespeare] [key=value ...]

nanoGPT's README reports, for exactly this configuration on a laptop CPU (block 64, batch 12, 4 layers,
4 heads, d 128, 2000 iterations, dropout 0, lr decayed over 2000 iterations), a validation loss of about
1.88 after about 3 minutes. Target here: <= 1.80 in no more wall time.

The validation loss is measured twice on the final model: as nanoGPT does during training (20 random
batches of 12 x 64 characters, fixed seed) and more precisely on 500 such batches.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch

from scratchformer.settings.resolve import resolve
from scratchformer.settings.values import parse_overrides
from scratchformer.train import train

NANOGPT_VAL_LOSS = 1.88
NANOGPT_SECONDS = 180


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/bench-shakespeare-char")
    parser.add_argument("--keep", action="store_true", help="keep an existing --out (default: replace it)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists() and not args.keep:
        shutil.rmtree(out)
    resolved = resolve(preset="shakespeare-char", overrides=parse_overrides(args.overrides))
    cfg = resolved.train
    start = time.perf_counter()
    result = train(resolved, out)
    seconds = time.perf_counter() - start
    task, model = result.task, result.model
    model.eval()
    cfg.eval_batches = 500
    precise = task.evaluate(model, "val")["loss"]
    train_loss = task.evaluate(model, "train")["loss"]
    report = {
        "val_loss_20_batches": result.last_val["loss"],
        "val_loss_500_batches": precise,
        "train_loss_500_batches": train_loss,
        "wall_seconds": seconds,
        "steps": result.step,
        "threads": torch.get_num_threads(),
        "nanogpt_published": {"val_loss": NANOGPT_VAL_LOSS, "seconds_approx": NANOGPT_SECONDS},
    }
    (out / "bench.json").write_text(json.dumps(report, indent=2))
    print(f"\nshakespeare-char: val loss {result.last_val['loss']:.4f} (20 batches, as nanoGPT), {precise:.4f} "
          f"(500 batches); train loss {train_loss:.4f}; {result.step} steps in {seconds:.0f} s "
          f"on {torch.get_num_threads()} threads")
    print(f"nanoGPT's published CPU run of the same config: val loss ~{NANOGPT_VAL_LOSS} in ~{NANOGPT_SECONDS} s. "
          f"Target val loss <= 1.80: {'met' if precise <= 1.80 else 'MISSED'}; "
          f"time {'within' if seconds <= NANOGPT_SECONDS else 'OVER'} nanoGPT's.")


if __name__ == "__main__":
    main()
