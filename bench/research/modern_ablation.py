"""What does each change since 2017 buy on `shakespeare-char`, alone and together, and do the modern presets hold?

What each change since 2017 buys on ``shakespeare-char``: the preset, each change alone, and all together.

    SCRATCHFORMER_DATA=../shared/data python bench/research/modern_ablation.py [--out runs/ablation] [--only NAME ...]
    SCRATCHFORMER_DATA=../shared/data python bench/research/modern_ablation.py --equal-time   # second table
    SCRATCHFORMER_DATA=../shared/data python bench/research/modern_ablation.py --presets \
        [--corpus TRAIN VAL]   # the goals

Every run trains the ``shakespeare-char`` preset (nanoGPT's CPU configuration: 4 layers, d 128, context 64,
batch 12) with the same batches, seeds and number of steps (2,000), one setting changed (``VARIANTS``), on
one thread per run so that the runs' wall times compare. Each final model is scored on the whole
validation text (the last 10 % of Tiny Shakespeare, every character predicted once, in consecutive windows
of 64): more precise than the trainer's 20 random batches. ``--equal-time`` trains each variant for the
wall time the baseline took instead of 2,000 steps (``max_time``; the schedule is fitted to the number of
steps that time allows). Writes ``report.json`` and, with matplotlib, ``curves.png`` in ``--out``: the
validation loss at each evaluation (from each run's ``metrics.jsonl``) against the step, or with
``--equal-time`` against seconds. ``--replot`` redraws it from an existing ``--out`` without training.

``--presets`` measures the issue's goals for the two presets, one after the other in one process: the
``shakespeare-char`` preset (its wall time T); ``shakespeare-char-modern`` as it is, in 1.1 T (``max_time``)
and in half the steps (1,000); with ``--corpus TRAIN VAL`` (two text files of a corpus the recipe was not
chosen on) both presets again on that text (``--data TRAIN --val VAL``), scored on all of VAL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from scratchformer.checkpoints import load_checkpoint
from scratchformer.data import load_tinyshakespeare
from scratchformer.data.roles import DataFiles
from scratchformer.settings.resolve import resolve
from scratchformer.settings.values import parse_overrides
from scratchformer.tasks.inference import evaluate_checkpoint
from scratchformer.train import train

# name -> the key=value words that differ from the preset
VARIANTS: dict[str, list[str]] = {
    "baseline": [],
    "rmsnorm": ["norm_type=rmsnorm"],
    "qk_norm": ["qk_norm=true"],
    "relu2": ["activation=relu2"],
    "zero_out": ["init=zero_out"],
    "untied": ["tie_embeddings=false"],
    "muon": ["optimizer=muon"],
    "all": ["norm_type=rmsnorm", "qk_norm=true", "activation=relu2", "init=zero_out", "tie_embeddings=false",
            "optimizer=muon"],
}


def train_variant(out: Path, words: list[str], preset: str = "shakespeare-char",
                  data: DataFiles | None = None) -> float:
    """Train one variant into ``out``; its wall time in seconds."""
    if out.exists():
        shutil.rmtree(out)
    resolved = resolve(preset=preset, data=data, overrides=parse_overrides(["num_threads=1", *words]))
    start = time.perf_counter()
    train(resolved, out, quiet=True)
    return time.perf_counter() - start


def curve(run: Path) -> list[tuple[int, float, float]]:
    """(step, seconds, validation loss) at each evaluation of a run."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["time_s"], r["loss"]) for r in rows if r.get("split") == "val" and "time_s" in r]


def plot(report: list[dict], path: Path, by_time: bool) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'scratchformer[plots]')")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in report:
        x = [c[1] if by_time else c[0] for c in row["curve"]]
        ax.plot(x, [c[2] for c in row["curve"]], marker="o", markersize=3,
                lw=2.5 if row["name"] in ("baseline", "all") else 1.2, label=f"{row['name']} ({row['val_loss']:.3f})")
    ax.set_xlabel("seconds of training (one thread)" if by_time else "step")
    ax.set_ylabel("validation loss (nats per character)")
    ax.set_title("shakespeare-char: each change since 2017 alone, and all together")
    ax.set_ylim(top=2.6)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency; 32 colours: a third of the size, no visible change

    Image.open(path).convert("RGB").quantize(colors=32, method=Image.Quantize.FASTOCTREE,
                                             dither=Image.Dither.NONE).save(path, optimize=True)


@contextlib.contextmanager
def validation_file() -> Iterator[Path]:
    """Tiny Shakespeare's validation text (the last 10 %) as a temporary file, for ``whole_text_loss``."""
    _, val_text = load_tinyshakespeare()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "val.txt"
        path.write_text(val_text)
        yield path


def whole_text_loss(run: Path, text_file: Path) -> tuple[float, int, int]:
    """(loss on every character of ``text_file``, steps, parameters) of a run's last checkpoint."""
    ckpt = load_checkpoint(run / "last")
    return (evaluate_checkpoint(ckpt, data=[str(text_file)])["loss"], ckpt.step,
            sum(p.numel() for p in ckpt.model.parameters()))


def presets(out: Path, corpus: list[Path] | None) -> None:
    """The goals of the modern preset, measured side by side (module docstring)."""
    old, new = "shakespeare-char", "shakespeare-char-modern"
    seconds = {old: train_variant(out / old, [], old)}
    budget = 1.1 * seconds[old]
    plan = [(new, [], None), (f"{new} in 1.1x the time", [f"max_time={budget:.0f}s", "max_steps=0"], None),
            (f"{new} in 1,000 steps", ["max_steps=1000"], None)]
    if corpus:
        files = DataFiles.of([str(corpus[0])], val=[str(corpus[1])])
        plan += [(f"{old} on {corpus[0].name}", [], files), (f"{new} on {corpus[0].name}", [], files)]
    for name, words, files in plan:
        preset = new if name.startswith(new) else old
        seconds[name] = train_variant(out / name.replace(" ", "_"), words, preset, files)
        print(f"trained {name} in {seconds[name]:.0f} s")
    report = []
    with validation_file() as val_file:
        for name, secs in seconds.items():
            scored_on = corpus[1] if corpus and name.endswith(f"on {corpus[0].name}") else val_file
            loss, steps, params = whole_text_loss(out / name.replace(" ", "_"), scored_on)
            report.append({"name": name, "val_loss": round(loss, 4), "steps": steps, "seconds": round(secs, 1),
                           "time_ratio": round(secs / seconds[old], 3), "parameters": params})
            print(f"{name:<50} val loss {loss:.4f}  steps {steps:>5}  {secs:6.0f} s ({secs / seconds[old]:.2f}x)  "
                  f"{params:,} parameters")
    (out / "presets.json").write_text(json.dumps(report, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/ablation"))
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="train only these variants")
    parser.add_argument("--equal-time", action="store_true",
                        help="train each variant for the baseline's wall time instead of its steps")
    parser.add_argument("--max-steps", type=int, default=0, help="fewer steps than the preset's 2,000 (a smoke test)")
    parser.add_argument("--replot", action="store_true", help="redraw curves.png from --out's report.json")
    parser.add_argument("--presets", action="store_true",
                        help="the goals: shakespeare-char against shakespeare-char-modern (module docstring)")
    parser.add_argument("--corpus", nargs=2, type=Path, metavar=("TRAIN", "VAL"),
                        help="with --presets: both presets on this text too (a corpus the recipe was not tuned on)")
    args = parser.parse_args()
    if args.presets:
        presets(args.out, args.corpus)
        return
    if args.replot:
        saved = json.loads((args.out / "report.json").read_text())
        for row in saved["runs"]:
            row["curve"] = curve(args.out / row["name"])
        (args.out / "report.json").write_text(json.dumps(saved, indent=1))
        plot(saved["runs"], args.out / "curves.png", saved["equal_time"])
        return
    names = args.only or list(VARIANTS)
    extra = [f"max_steps={args.max_steps}"] if args.max_steps else []
    seconds: dict[str, float] = {}
    if args.equal_time:  # the baseline's time first, then every variant within it
        seconds["baseline"] = train_variant(args.out / "baseline", extra)
        extra = [f"max_time={seconds['baseline']:.0f}s", "max_steps=0"]
    for name in names:
        if name not in seconds:
            seconds[name] = train_variant(args.out / name, [*VARIANTS[name], *extra])
            print(f"trained {name} in {seconds[name]:.0f} s")

    report = []
    with validation_file() as val_file:
        for name in seconds:
            loss, steps, params = whole_text_loss(args.out / name, val_file)
            report.append({"name": name, "settings": VARIANTS[name], "val_loss": round(loss, 4), "steps": steps,
                           "seconds": round(seconds[name], 1), "parameters": params, "curve": curve(args.out / name)})
            print(f"{name:<10} val loss {loss:.4f}  steps {steps:>5}  {seconds[name]:6.0f} s  "
                  f"{params:,} parameters")
    (args.out / "report.json").write_text(json.dumps({"equal_time": args.equal_time, "runs": report}, indent=1))
    plot(report, args.out / "curves.png", args.equal_time)


if __name__ == "__main__":
    main()
