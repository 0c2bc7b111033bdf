"""How much do several seeds voting together gain over one, on SST-2 sentences held out of training?

    SCRATCHFORMER_DATA=../shared/data python bench/sst2_seeds.py --seeds 0 1 --out /tmp/seeds &  # one core each
    SCRATCHFORMER_DATA=../shared/data python bench/sst2_seeds.py --seeds 2 3 --out /tmp/seeds
    SCRATCHFORMER_DATA=../shared/data python bench/sst2_seeds.py --set ema_decay=0.998 --name ema \
        --seeds 0 1 --out /tmp/seeds                                # the preset with changes: ema-seed0, ...
    python bench/sst2_seeds.py --combine /tmp/seeds/sst2-seed*

Uses the held-out split of ``sst2_tuning.py`` (800 whole training sentences, their phrases removed from
training). Each seed of ``--preset`` (with the ``--set`` changes) is trained on the rest (one thread,
so two runs share two cores) and its best checkpoint's probabilities on the held-out sentences are
saved; ``--combine`` prints each run's accuracy and the mean, lowest and highest accuracy of every
ensemble (the mean of the members' class probabilities, as ``scratchformer evaluate --ckpt A B ...``
computes it) of each size.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import torch

from scratchformer.checkpoint import load_checkpoint
from scratchformer.data import load_sst2
from scratchformer.train.settings import load_preset, parse_overrides, split_settings
from scratchformer.train.trainer import train
from sst2_tuning import held_out_split, write_tsv


def run_seeds(preset: str, seeds: list[int], out: Path, threads: int, changes: dict[str, object], name: str) -> None:
    torch.set_num_threads(threads)
    texts, labels = load_sst2()["train"]
    keep, held = held_out_split(texts, labels)
    out.mkdir(parents=True, exist_ok=True)
    train_tsv, held_tsv = out / "train.tsv", out / "held_out.tsv"
    if not held_tsv.exists():
        write_tsv(train_tsv, texts, labels, keep)
        write_tsv(held_tsv, texts, labels, held)
    for seed in seeds:
        run = out / f"{name}-seed{seed}"
        settings = {**load_preset(preset), **changes, "dataset": None, "seed": seed, "num_threads": threads}
        start = time.perf_counter()
        result = train(*split_settings(settings), run, [str(train_tsv), str(held_tsv)], echo=lambda s: None)
        probs = result.task.probabilities(load_checkpoint(run).model, "val")  # type: ignore[attr-defined]
        ys = [y for _, y in result.task.splits["val"]]  # type: ignore[attr-defined]
        (run / "held_out_probs.json").write_text(json.dumps({"probs": probs.tolist(), "labels": ys}))
        accuracy = float((probs.argmax(-1) == torch.tensor(ys)).float().mean())
        print(json.dumps({"run": run.name, "held_out_accuracy": round(100 * accuracy, 2), "steps": result.step,
                          "seconds": round(time.perf_counter() - start)}), flush=True)


def combine(runs: list[Path]) -> None:
    saved = [json.loads((run / "held_out_probs.json").read_text()) for run in runs]
    labels = torch.tensor(saved[0]["labels"])
    probs = [torch.tensor(s["probs"]) for s in saved]

    def accuracy(p: torch.Tensor) -> float:
        return 100 * float((p.argmax(-1) == labels).float().mean())

    for run, p in zip(runs, probs):
        print(f"{run.name}: {accuracy(p):.2f} %")
    for k in range(1, len(runs) + 1):
        scores = [accuracy(sum(probs[i] for i in group) / k) for group in itertools.combinations(range(len(runs)), k)]
        print(f"ensembles of {k}: mean {sum(scores) / len(scores):.2f} %, lowest {min(scores):.2f} %, "
              f"highest {max(scores):.2f} % ({len(scores)} of them)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="sst2")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--out", type=Path, default=Path("runs/sst2-seeds"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="changes to the preset")
    parser.add_argument("--name", help="the runs' name (default: the preset's)")
    parser.add_argument("--combine", type=Path, nargs="+", metavar="RUN", help="only combine these finished runs")
    args = parser.parse_args()
    if args.combine:
        combine(args.combine)
    else:
        changes = parse_overrides(args.set)
        run_seeds(args.preset, args.seeds, args.out, args.threads, changes, args.name or args.preset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
