"""Small deterministic inputs and run settings shared by the prepared-corpus tests and by the recording of the
reference batches in ``tests/data/in_memory_batches.json``.

That file was recorded once from the in-memory data path that prepared corpora replaced (each task tokenizing
its whole split into Python lists; commit 9b2cafd), running exactly these cases: the memory-mapped path must
give the same batches for the same seed. The in-memory path is gone; the recording is the reference.
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = ("the a of and to in is was he she it they zebra quux jazz fizz buzz über straße Müller naïve café "
         "don't I'm 42 1,000 3.14 - , . ; : ! ? ( ) \" ' Romeo Juliet speak hear proceed citizen").split()


def _line(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _text(rng: random.Random, n_lines: int) -> str:
    out = []
    for _ in range(n_lines):
        r = rng.random()
        line = _line(rng, 1, 14)
        if r < 0.08:
            line = ""  # blank lines between paragraphs
        elif r < 0.14:
            line += "  "  # trailing spaces, which a careless chunked encoder would tokenize differently
        elif r < 0.2:
            line = "    " + line  # indented
        elif r < 0.24:
            line = line.upper() + ":"
        out.append(line)
    return "\n".join(out) + "\n"


def make_inputs(directory: Path) -> dict[str, Path]:
    """The files every case reads, written into ``directory``; their content depends on nothing else."""
    rng = random.Random(20170612)
    files = {"lm": _text(rng, 400), "lm_val": _text(rng, 60)}
    files["pairs"] = "".join(f"{_line(rng, 1, 9)}\t{_line(rng, 1, 11)}\n" for _ in range(240))
    files["pairs_val"] = "".join(f"{_line(rng, 1, 9)}\t{_line(rng, 1, 11)}\n" for _ in range(30))
    files["labels"] = "text\tlabel\n" + "".join(f"{_line(rng, 1, 12)}\t{rng.choice(['neg', 'pos', 'mixed'])}\n"
                                                for _ in range(180))
    files["lines"] = "".join(f"{_line(rng, 1, 16)}\n" + ("\n" if rng.random() < 0.1 else "") for _ in range(200))
    names = {"lm": "lm.txt", "lm_val": "lm_val.txt", "pairs": "pairs.tsv", "pairs_val": "pairs_val.tsv",
             "labels": "labels.tsv", "lines": "lines.txt"}
    paths = {}
    for key, text in files.items():
        paths[key] = directory / names[key]
        paths[key].write_text(text, encoding="utf-8")
    return paths


# case -> (train settings, model settings, --data files, --val files)
CASES: dict[str, tuple[dict, dict, list[str], list[str]]] = {
    "lm-char": ({"task": "lm", "tokenizer": "char", "batch_size": 4, "seed": 3}, {"max_len": 16}, ["lm"], []),
    "lm-bpe": ({"task": "lm", "tokenizer": "bpe", "bpe_vocab_size": 300, "batch_size": 4, "seed": 5},
               {"max_len": 24}, ["lm"], ["lm_val"]),
    "translate-char": ({"task": "translate", "tokenizer": "char", "batch_size": 8, "seed": 1}, {"max_len": 40},
                       ["pairs"], []),
    "translate-bpe": ({"task": "translate", "tokenizer": "bpe", "bpe_vocab_size": 300, "batch_size": 8, "seed": 2,
                       "max_tokens": 200}, {"max_len": 20}, ["pairs"], ["pairs_val"]),
    "classify-char": ({"task": "classify", "tokenizer": "char", "batch_size": 8, "seed": 4, "word_dropout": 0.1},
                      {"max_len": 48}, ["labels"], []),
    "mlm-char": ({"task": "mlm", "tokenizer": "char", "batch_size": 8, "seed": 6}, {"max_len": 64}, ["lines"], []),
}
STEPS = (0, 1, 2, 7, 30, 61)
