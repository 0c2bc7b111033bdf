"""Labelled text for classification: one text column, then one label column.

The format follows the file name: ``.tsv`` (tab-separated, quotes taken literally, as GLUE writes them)
or ``.csv`` (comma-separated with standard quoting, so a text may contain commas and quotes), either one
optionally gzipped. A first row that names its columns (``sentence``/``text`` then ``label``; see
``headers.py``, the rule every tabular format shares) is a header and is skipped.

Labels are strings mapped to ids ``0..K-1``. Without a fixed list, the label names are the distinct labels
sorted, numerically when all of them are integers (so ``"0"``, ``"1"``, ... ``"10"`` keep their values),
otherwise alphabetically (``"neg"``, ``"pos"`` -> 0, 1). Pass ``label_names`` to fix the mapping, e.g. to
keep train and test consistent when one split lacks a class; a label outside it is an error, except that
the ids ``0..K-1`` stand for the names when no name is itself a number (SST-2's files say ``0``/``1`` for a
model whose labels are named ``negative``/``positive``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from scratchformer.data.errors import DataError
from scratchformer.data.files import read_text
from scratchformer.data.headers import is_header

__all__ = ["read_labelled"]

FORMAT = "text<TAB>label rows (.tsv) or text,label rows (.csv)"


def read_labelled(path: str | Path, label_names: Sequence[str] | None = None,
                  notes: list[str] | None = None) -> tuple[list[str], list[int], list[str]]:
    """(texts, label ids, label names) from a ``.tsv`` / ``.csv`` (optionally ``.gz``) file of ``text, label`` rows.

    Whitespace around the text and the label is stripped. Raises ``DataError`` for a wrong extension,
    a row without exactly two columns, an unknown label (with ``label_names``) or a file without rows.
    ``notes``: a list that receives a line for what was skipped (a header row).
    """
    path = Path(path)
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    if suffix == ".tsv":
        dialect = dict(delimiter="\t", quoting=csv.QUOTE_NONE)
    elif suffix == ".csv":
        dialect = dict(delimiter=",")
    else:
        raise DataError(f"{path}: cannot tell the format; expected a .tsv or .csv file (optionally .gz) of {FORMAT}")
    reader = csv.reader(io.StringIO(read_text(path), newline=""), **dialect)

    rows: list[tuple[int, str, str]] = []  # (line number, text, label)
    try:
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != 2:
                raise DataError(f"{path}, line {reader.line_num}: expected 2 columns (text, label), "
                                f"found {len(row)}; the format is {FORMAT}")
            rows.append((reader.line_num, row[0].strip(), row[1].strip()))
    except csv.Error as err:
        raise DataError(f"{path}, line {reader.line_num}: {err}") from None
    if rows and is_header(rows[0][1:], ("text", "label")):
        if notes is not None:
            notes.append(f"{path}: skipped the header row {rows[0][1]!r}, {rows[0][2]!r}")
        rows = rows[1:]
    if not rows:
        raise DataError(f"{path} has no data rows")

    if label_names is None:
        label_names = _sorted_labels({label for _, _, label in rows})
    label_names = list(label_names)
    label_ids = {name: i for i, name in enumerate(label_names)}
    if not any(_is_int(n) for n in label_names) and all(label in label_ids or _is_int(label) for _, _, label in rows):
        label_ids |= {str(i): i for i in range(len(label_names))}  # ids standing for the names
    texts, ids = [], []
    for line, text, label in rows:
        if label not in label_ids:
            raise DataError(f"{path}, line {line}: unknown label {label!r}; expected one of {label_names}")
        texts.append(text)
        ids.append(label_ids[label])
    return texts, ids, label_names


def _is_int(text: str) -> bool:
    return text.isdigit()


def _sorted_labels(labels: set[str]) -> list[str]:
    try:
        return sorted(labels, key=int)
    except ValueError:
        return sorted(labels)
