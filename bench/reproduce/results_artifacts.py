"""Tooling for the reproduction: what of each finished run goes into results/, and the pictures RESULTS.md shows.

Copy the small files of finished runs into results/ and draw the pictures RESULTS.md shows.

    python bench/reproduce/results_artifacts.py [NAME ...]      # default: every runs/NAME that exists

For each run ``runs/NAME``: its ``config.json`` and ``NAME.eval.json`` go to ``results/NAME/``, with, where
RESULTS.md shows them, ``curves.png`` (the training curves) and, by task, sample outputs (``samples.txt``) and
for translation the cross-attention of a real test sentence (``cross_attention.png``); for the digits, a test
digit as a PNG file (``digit.png``), the class token's attention over it (``attention.png``) and the logistic
regression baseline (``baseline.txt``). Pictures are saved with a small palette (16 colours, 64 for
heatmaps; a third of the size). Where ``runs/NAME-ensemble.eval.json`` exists (three seeds voting), it and
the members' configurations go to ``results/NAME-ensemble/``. Checkpoints, console logs and ``metrics.jsonl``
stay in runs/: the commands make them again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS, RESULTS = ROOT / "runs", ROOT / "results"
ALL = ["copy", "reverse", "sort", "shakespeare-char", "shakespeare-char-large", "shakespeare-char-modern", "multi30k",
       "multi30k-modern", "sst2", "sst2-minilm", "digits-vit"]
# the runs whose training curves RESULTS.md shows
CURVES = {"copy", "reverse", "sort", "shakespeare-char-large", "multi30k", "multi30k-modern", "digits-vit"}
DIGIT = 1795  # the digit of page 14 and the README: scikit-learn's image 1795, a 9 of the test split


def copy_portable(src: Path, dst: Path) -> None:
    """Copy a run's text file with this machine's paths written as the reader's: the data folder as
    ``$SCRATCHFORMER_DATA``, the home folder (the prepared-corpora cache) as ``~``."""
    text = src.read_text(encoding="utf-8")
    data = os.environ.get("SCRATCHFORMER_DATA")
    if data:
        text = text.replace(str(Path(data).resolve()), "$SCRATCHFORMER_DATA").replace(data, "$SCRATCHFORMER_DATA")
    dst.write_text(text.replace(str(Path.home()), "~"), encoding="utf-8")


def palette(png: Path, colors: int = 16) -> None:
    """Re-save a PNG with a small palette: a plot of a few lines has few colours (16 keep them; a heatmap
    wants 64), and the file shrinks to about a third, which keeps results/ small."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    image.quantize(colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE).save(png, optimize=True)


def samples(name: str, run: Path) -> str:
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.data import load_multi30k
    from scratchformer.tasks.inference import classify_texts, generate_text, translate_texts

    ckpt = load_checkpoint(run)
    task = ckpt.task
    if task == "translate":
        pairs = load_multi30k()["test"][:8]
        sources = [s for s, _ in pairs]
        beam = translate_texts(ckpt, sources, beam=4, length_penalty=0.6)
        greedy = translate_texts(ckpt, sources, beam=1)
        return "".join(f"de:     {s}\nref:    {r}\nbeam:   {b}\ngreedy: {g}\n\n"
                       for (s, r), b, g in zip(pairs, beam, greedy))
    if task == "lm":
        return "".join(f"--- sample {i + 1} (temperature 0.8, top-k 50, seed {i}) ---\n"
                       f"{generate_text(ckpt, chr(10), 400, temperature=0.8, top_k=50, seed=i)}\n\n" for i in range(2))
    if task == "classify":
        texts = ["a gorgeous , witty , seductive movie .", "the plot is nothing but boilerplate clichés .",
                 "it 's not a bad film , just a forgettable one .", "an utterly charming and hilarious film ."]
        return "".join(f"{label:>9} {p:.2f}  {t}\n" for t, (label, p) in zip(texts, classify_texts(ckpt, texts)))
    return ""


def digits(run: Path, out: Path) -> None:
    """The digits' test images 0-7 and ``DIGIT`` as the model classifies them from PNG files, the attention over
    ``DIGIT`` (saved as ``digit.png``, what the README's command writes), and the baseline."""
    import tempfile

    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    from scratchformer.app.cli import main as cli
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.data.splits import carve_rows
    from scratchformer.tasks.inference import classify_images

    raw = load_digits()
    labels = [int(y) for y in raw.target]
    test = carve_rows(len(labels), 0.2, 0, labels)[1][:8] + [DIGIT]  # the split of data/images.py
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in test:
            files.append(str(Path(tmp) / f"digit{i}.png"))
            Image.fromarray((raw.images[i] * 255 / 16).round().astype(np.uint8)).save(files[-1])
        shutil.copyfile(files[-1], out / "digit.png")
        found = classify_images(load_checkpoint(run), files)
        (out / "samples.txt").write_text("".join(f"image {i} (true {labels[i]}): {label} {p:.2f}\n"
                                                 for i, (label, p) in zip(test, found)))
    cli(["plot", "attention", "--ckpt", str(run), "--image", str(out / "digit.png"), "--out",
         str(out / "attention.png")])
    palette(out / "attention.png", colors=64)
    if (RUNS / "digits-baseline.txt").is_file():
        shutil.copyfile(RUNS / "digits-baseline.txt", out / "baseline.txt")


def main(names: list[str]) -> int:
    from scratchformer.app import plots as viz
    from scratchformer.app.cli import main as cli

    for name in names or [n for n in ALL if (RUNS / n).is_dir()]:
        run, out = RUNS / name, RESULTS / name
        out.mkdir(parents=True, exist_ok=True)
        for src, dst in [(run / "config.json", "config.json"), (RUNS / f"{name}.eval.json", "eval.json")]:
            if src.is_file():
                copy_portable(src, out / dst)
        if name in CURVES:
            palette(viz.plot_curves(run, out / "curves.png", metrics=("loss",)))
        text = samples(name, run)
        if text:
            (out / "samples.txt").write_text(text)
        if name == "digits-vit":
            digits(run, out)
        if name == "multi30k":
            sentence = "Ein Mädchen in einem Karateanzug bricht ein Brett mit einem Tritt."  # test sentence 3
            cli(["plot", "attention", "--ckpt", str(run), "--text", sentence, "--kind", "decoder.cross_attn",
                 "--out", str(out / "cross_attention.png")])
            palette(out / "cross_attention.png", colors=64)
        print(f"results/{name}: " + ", ".join(sorted(p.name for p in out.iterdir())))
        if (RUNS / f"{name}-ensemble.eval.json").is_file():  # seeds voting (reproduce_results.sh)
            ensemble = RESULTS / f"{name}-ensemble"
            ensemble.mkdir(exist_ok=True)
            copy_portable(RUNS / f"{name}-ensemble.eval.json", ensemble / "eval.json")
            for seed in (1, 2):
                (ensemble / f"seed{seed}").mkdir(exist_ok=True)
                copy_portable(RUNS / f"{name}-seed{seed}" / "config.json", ensemble / f"seed{seed}" / "config.json")
            print(f"results/{name}-ensemble: eval.json, seed1/, seed2/")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="runs/NAME to copy (default: every one that exists)")
    sys.exit(main(parser.parse_args().names))
