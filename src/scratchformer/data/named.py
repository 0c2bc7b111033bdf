"""Named public datasets: Tiny Shakespeare, Multi30k (de-en), SST-2, 1,100 instruction records and the same with a
preferred and a dispreferred answer each, found locally or downloaded.

``find_dataset`` looks for a dataset's files, in order, in

1. the ``data_dir`` argument (the CLI's ``--data-dir``),
2. the folder named by the ``SCRATCHFORMER_DATA`` environment variable,
3. the user cache, ``$XDG_CACHE_HOME/scratchformer`` (default ``~/.cache/scratchformer``),

using the layout below relative to that folder. A folder counts only if it holds every file of the
dataset. If none does, the missing files are downloaded from the dataset's canonical public URL into the
cache: streamed to a temporary file, checked against the sha256 recorded here, then renamed into place,
so an interrupted or corrupted download never leaves a file that looks complete. Local copies are
trusted as they are (no hashing on every run); only downloads are verified.

=================  =====================================================  ==========================
name               files                                                  source
=================  =====================================================  ==========================
tinyshakespeare    ``tinyshakespeare.txt``                                karpathy/char-rnn
multi30k           ``multi30k/{train,val,test_2016_flickr}.{de,en}.gz``   multi30k/dataset task1/raw
sst2               ``sst2/{train,dev,test}.tsv``                          forest-snow/alps SST-2
instructions       ``instructions/instruction-data.json``                 rasbt/LLMs-from-scratch ch07
preferences        ``preferences/instruction-data-with-preference.json``  rasbt/LLMs-from-scratch ch07
=================  =====================================================  ==========================
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from scratchformer.data.files import read_text
from scratchformer.data.labelled import read_labelled
from scratchformer.data.parallel import read_parallel
from scratchformer.errors import DataError

__all__ = [
    "CARVED", "DATASETS", "SHAPES", "SPLITS", "SST2_LABELS", "cache_dir", "find_dataset", "load_multi30k", "load_sst2",
    "load_tinyshakespeare",
]

ENV_VAR = "SCRATCHFORMER_DATA"
SST2_LABELS = ["negative", "positive"]  # label ids 0 and 1


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset: where it lives under a data folder, where to get it, and its sha256."""

    path: str  # relative to the data folder, "/"-separated
    url: str
    sha256: str


_MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
_SST2 = "https://raw.githubusercontent.com/forest-snow/alps/main/data/SST-2/"

# name -> (path of the dataset under a data folder, its files). Hashes: the SHA256SUMS file published beside the data.
DATASETS: dict[str, tuple[str, tuple[DataFile, ...]]] = {
    "tinyshakespeare": ("tinyshakespeare.txt", (
        DataFile("tinyshakespeare.txt",
                 "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
                 "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"),
    )),
    "multi30k": ("multi30k", (
        DataFile("multi30k/train.de.gz", _MULTI30K + "train.de.gz",
                 "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
        DataFile("multi30k/train.en.gz", _MULTI30K + "train.en.gz",
                 "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
        DataFile("multi30k/val.de.gz", _MULTI30K + "val.de.gz",
                 "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
        DataFile("multi30k/val.en.gz", _MULTI30K + "val.en.gz",
                 "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
        DataFile("multi30k/test_2016_flickr.de.gz", _MULTI30K + "test_2016_flickr.de.gz",
                 "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"),
        DataFile("multi30k/test_2016_flickr.en.gz", _MULTI30K + "test_2016_flickr.en.gz",
                 "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9"),
    )),
    "sst2": ("sst2", (
        DataFile("sst2/train.tsv", _SST2 + "train.tsv",
                 "920e317b2c52e12cd22db1da2c6708312bd7dc4f3712b9bbf1b50ee6c2c792ba"),
        DataFile("sst2/dev.tsv", _SST2 + "dev.tsv",
                 "92353770071a2a889f75d000a38a9e541ea8f0a5499e50f040b17917a5cbf66f"),
        DataFile("sst2/test.tsv", _SST2 + "test.tsv",
                 "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0"),
    )),
    # its hash is in instructions/SHA256SUMS beside it; split in file order (data/records.py BOOK_SPLIT)
    "instructions": ("instructions/instruction-data.json", (
        DataFile("instructions/instruction-data.json", "https://raw.githubusercontent.com/rasbt/LLMs-from-scratch/"
                 "main/ch07/01_main-chapter-code/instruction-data.json",
                 "7e09a9af353722ca15c18bc580f093f9c39d3178335a75177319cb1e1d163944"),
    )),
    # the same records with a polite (chosen) and an impolite (rejected) answer; preferences/SHA256SUMS; split as above
    "preferences": ("preferences/instruction-data-with-preference.json", (
        DataFile("preferences/instruction-data-with-preference.json", "https://raw.githubusercontent.com/rasbt/"
                 "LLMs-from-scratch/main/ch07/04_preference-tuning-with-dpo/instruction-data-with-preference.json",
                 "305315abf14f65fa42c01a0877572f832606571c2a7d49f152ac1d758b16756e"),
    )),
}


# How each dataset's files make splits. CARVED: one text, split by position (its fraction, and the two parts in
# words). SPLITS: split -> (its files under the dataset's folder, its name in words).
CARVED: dict[str, tuple[float, tuple[str, str]]] = {
    "tinyshakespeare": (0.1, ("the first 90 %", "the last 10 %, nanoGPT's split")),
}
SPLITS: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "multi30k": {split: ((f"{stem}.de.gz", f"{stem}.en.gz"), stem)
                 for split, stem in (("train", "train"), ("val", "val"), ("test", "test_2016_flickr"))},
    "sst2": {"train": (("train.tsv",), "train"), "val": (("dev.tsv",), "dev"),
             "test": (("test.tsv",), "test (GLUE validation)")},
}


# What a model learning a named dataset takes from it, known without reading it: the number of its classes, or of
# the characters of its text (a character tokenizer's vocabulary, before its special tokens). The tests check
# them against the data.
SHAPES: dict[str, dict[str, int]] = {
    "tinyshakespeare": {"characters": 65},
    "sst2": {"classes": 2},
    "digits": {"classes": 10},
}


def cache_dir() -> Path:
    """The user cache folder for downloads: ``$XDG_CACHE_HOME/scratchformer`` or ``~/.cache/scratchformer``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scratchformer"


def find_dataset(name: str, data_dir: str | Path | None = None) -> Path:
    """The local path of dataset ``name`` (its file, or its folder for multi-file datasets), downloading it
    into the cache if no searched folder holds all of its files."""
    if name not in DATASETS:
        raise DataError(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(DATASETS))}")
    dataset_path, files = DATASETS[name]
    roots = [Path(p).expanduser() for p in (data_dir, os.environ.get(ENV_VAR)) if p]
    roots.append(cache_dir())
    for root in roots:
        if all((root / f.path).is_file() for f in files):
            return root / dataset_path

    expected = ", ".join(f.path for f in files)
    searched = ", ".join(str(r) for r in roots)
    download_missing(files, cache_dir(), f"dataset {name!r}",
                     f"put {expected} in a folder and pass --data-dir DIR or set {ENV_VAR}=DIR (searched: {searched})")
    return cache_dir() / dataset_path


def download_missing(files: tuple[DataFile, ...], root: Path, what: str, hint: str) -> None:
    """Download each of ``files`` that ``root`` lacks. A network or disk failure becomes one DataError:
    "``what`` is not available locally and could not be downloaded (reason); ``hint``"."""
    try:
        for f in files:
            if not (root / f.path).is_file():
                _download(f, root / f.path)
    except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise DataError(f"{what} is not available locally and could not be downloaded ({reason}); {hint}") from None


def _download(file: DataFile, dest: Path) -> None:
    """Stream ``file.url`` to a temporary file beside ``dest``, check its sha256, then rename it to ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")  # unique: parallel processes don't collide
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(file.url, timeout=60) as response, open(tmp, "xb") as out:
            total = int(response.headers.get("Content-Length") or 0) or None
            # disable=None: a progress bar on a terminal, silence in logs and CI.
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"downloading {file.path}", disable=None) as bar:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        if digest.hexdigest() != file.sha256:
            raise DataError(f"download of {file.url} has sha256 {digest.hexdigest()}, expected {file.sha256}; "
                            f"the file was deleted (a changed upstream file or a corrupted transfer)")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def load_tinyshakespeare(data_dir: str | Path | None = None) -> tuple[str, str]:
    """Tiny Shakespeare as (train, validation) text, split 90 / 10 by position as nanoGPT does."""
    text = read_text(find_dataset("tinyshakespeare", data_dir))
    return text[:int(len(text) * 0.9)], text[int(len(text) * 0.9):]


def load_multi30k(data_dir: str | Path | None = None) -> dict[str, list[tuple[str, str]]]:
    """Multi30k task 1 as (German source, English target) pairs: ``train``, ``val`` and ``test``
    (``test`` is test_2016_flickr, the split papers report BLEU on)."""
    folder = find_dataset("multi30k", data_dir)
    stems = {"train": "train", "val": "val", "test": "test_2016_flickr"}
    return {split: read_parallel([folder / f"{stem}.de.gz", folder / f"{stem}.en.gz"])
            for split, stem in stems.items()}


def load_sst2(data_dir: str | Path | None = None) -> dict[str, tuple[list[str], list[int]]]:
    """SST-2 (binary sentiment) as (texts, label ids) for ``train``, ``dev`` and ``test``;
    ids index ``SST2_LABELS`` (0 negative, 1 positive). ``test`` is GLUE's labelled validation set."""
    folder = find_dataset("sst2", data_dir)
    splits = {}
    for split in ("train", "dev", "test"):
        texts, ids, _ = read_labelled(folder / f"{split}.tsv", label_names=["0", "1"])
        splits[split] = (texts, ids)
    return splits
