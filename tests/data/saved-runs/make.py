"""Make the saved runs of every family in this folder, and what each gives (``expected/``), for
``tests/test_saved_families.py``.

These runs were made once, by the code as it was before the family registry (issue "One place for each model
family"), and are kept as they were written: the test checks that today's code still loads them and gives the same
outputs. Run again only to make new fixtures (it overwrites them):

    python tests/data/saved-runs/make.py

Each run is tiny (a few KB of weights): trained for a few steps on data this script writes into a temporary folder,
whose path is stored in the runs as ``DATA/`` (the test puts its own folder there). ``expected/NAME.safetensors``
holds the model's outputs on fixed inputs; ``expected/NAME.json`` a command and what it printed.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from scratchformer import load_model
from scratchformer.app.cli import main
from scratchformer.checkpoints.adapters import fingerprint
from scratchformer.data.named import cache_dir

HERE = Path(__file__).resolve().parent
SMALL = ["d_model=16", "n_heads=2", "n_layers=1", "d_ff=32", "max_steps=30", "eval_every=30", "log_every=10",
         "batch_size=4", "seed=0", "--quiet"]


def words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = "the a cat dog sat on mat ran to house and saw big small red blue bird sang good bad film".split()
    return [" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def write_data(folder: Path) -> None:
    (folder / "tiny.txt").write_text("\n".join(w.capitalize() + "." for w in words(300, 0)) + "\n")
    rows = words(120, 1)
    (folder / "labelled.tsv").write_text("".join(f"{r}\t{'pos' if 'good' in r or len(r) % 2 else 'neg'}\n"
                                                 for r in rows))


def train(name: str, *words_: str) -> Path:
    out = HERE / name
    if out.exists():
        shutil.rmtree(out)
    code = main(["train", *words_, *SMALL, "--out", str(out)])
    assert code == 0, name
    for extra in ("tensorboard", "events"):
        for f in out.glob(f"*{extra}*"):
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    return out


def printed(args: list[str]) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(args) == 0, args
    return buffer.getvalue()


def make() -> None:
    data = Path(tempfile.mkdtemp())
    write_data(data)
    (HERE / "expected").mkdir(exist_ok=True)
    runs = {
        "gpt": train("gpt", "task=lm", f"--data={data / 'tiny.txt'}", "max_len=32"),
        "gpt-classifier": train("gpt-classifier", "task=classify", "arch=gpt", "tokenizer=char", "max_len=48",
                                f"--data={data / 'labelled.tsv'}"),
        "encoder": train("encoder", "task=classify", "tokenizer=char", "max_len=48", f"--data={data / 'labelled.tsv'}"),
        "mlm": train("mlm", "task=mlm", "tokenizer=char", "max_len=48", f"--data={data / 'labelled.tsv'}"),
        "seq2seq": train("seq2seq", "task=copy", "n_test=8", "eval_decode=8"),
        "vit": train("vit", "--preset", "digits-vit", "n_test=8"),
    }
    runs["lora"] = train("lora", "task=classify", f"init_from={runs['gpt']}", "lora_rank=2", "lora_alpha=4",
                         f"--data={data / 'labelled.tsv'}", "max_len=32")
    images = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    commands = {
        "gpt": ["generate", "--ckpt", "RUN", "--prompt", "The cat", "--greedy", "--max-new-tokens", "12"],
        "gpt-classifier": ["classify", "--ckpt", "RUN", "the good film", "a bad dog"],
        "encoder": ["classify", "--ckpt", "RUN", "the good film", "a bad dog"],
        "seq2seq": ["translate", "--ckpt", "RUN", "abcd", "fedcba"],
        "lora": ["classify", "--ckpt", "RUN", "the good film", "a bad dog"],
    }
    for name, run in runs.items():
        model = load_model(run)
        with torch.no_grad():
            if name != "vit":
                ids = torch.randint(4, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
                ids[1, 6:] = model.config.pad_id  # a padded row
            if name == "vit":
                outputs = {"input": images, "output": model(images)}
            elif name == "seq2seq":
                outputs = {"input": ids, "output": model(ids, ids[:, :5])}
            elif name == "mlm":
                outputs = {"input": ids, "output": model.predict_tokens(ids, None, ids > 0)}
            else:
                outputs = {"input": ids, "output": model(ids)}
        save_file({k: v.contiguous() for k, v in outputs.items()}, str(HERE / "expected" / f"{name}.safetensors"))
        if name in commands:
            text = printed([str(run) if a == "RUN" else a for a in commands[name]])
            (HERE / "expected" / f"{name}.json").write_text(json.dumps({"command": commands[name], "stdout": text},
                                                                         indent=2) + "\n")
    for run in runs.values():  # one checkpoint a run (last/), without its optimizer state: enough to load
        shutil.rmtree(run / "best", ignore_errors=True)
        (run / "last" / "trainer_state.pt").unlink()
    lora = HERE / "lora" / "last" / "config.json"  # its base: the GPT's best/, which was its last/ (one evaluation)
    meta = json.loads(lora.read_text())
    assert meta["lora"]["base"]["sha256"] == fingerprint(runs["gpt"] / "last")
    meta["lora"]["base"]["path"] = str(runs["gpt"] / "last")
    lora.write_text(json.dumps(meta, indent=2))
    cache = str(cache_dir())  # where the runs' prepared corpora were kept: a path of this machine
    for config in HERE.rglob("config.json"):  # the data folder, the runs' own paths and the cache, by name
        text = config.read_text().replace(str(data), "DATA").replace(str(HERE), "RUNS").replace(cache, "CACHE")
        config.write_text(text)
    shutil.rmtree(data)


if __name__ == "__main__":
    sys.exit(make())
