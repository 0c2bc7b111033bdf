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
from collections.abc import Iterator, Sequence
from pathlib import Path

from scratchformer.data.headers import is_header
from scratchformer.data.streams import Progress, iter_lines
from scratchformer.errors import DataError

__all__ = ["iter_labelled", "map_labels", "read_labelled"]

FORMAT = "text<TAB>label rows (.tsv) or text,label rows (.csv)"


def read_labelled(path: str | Path, label_names: Sequence[str] | None = None,
                  notes: list[str] | None = None) -> tuple[list[str], list[int], list[str]]:
    """(texts, label ids, label names) from a ``.tsv`` / ``.csv`` (optionally ``.gz``) file of ``text, label`` rows.

    Whitespace around the text and the label is stripped. Raises ``DataError`` for a wrong extension,
    a row without exactly two columns, an unknown label (with ``label_names``) or a file without rows.
    ``notes``: a list that receives a line for what was skipped (a header row).
    """
    rows = list(iter_labelled(path, notes))
    first_line: dict[str, int] = {}
    for line, _, label in rows:
        first_line.setdefault(label, line)
    names, ids = map_labels(first_line, label_names, path)
    return [text for _, text, _ in rows], [ids[label] for _, _, label in rows], names


def iter_labelled(path: str | Path, notes: list[str] | None = None,
                  progress: Progress | None = None) -> Iterator[tuple[int, str, str]]:
    """The rows of a labelled file as a stream: (line number, text, label as written), header skipped."""
    path = Path(path)
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    if suffix == ".tsv":
        dialect = dict(delimiter="\t", quoting=csv.QUOTE_NONE)
    elif suffix == ".csv":
        dialect = dict(delimiter=",")
    else:
        raise DataError(f"{path}: cannot tell the format; expected a .tsv or .csv file (optionally .gz) of {FORMAT}")
    reader = csv.reader(iter_lines(path, progress, keepends=True), **dialect)
    first, found = True, False
    try:
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != 2:
                raise DataError(f"{path}, line {reader.line_num}: expected 2 columns (text, label), "
                                f"found {len(row)}; the format is {FORMAT}")
            text, label = row[0].strip(), row[1].strip()
            if first and is_header((text, label), ("text", "label")):
                if notes is not None:
                    notes.append(f"{path}: skipped the header row {text!r}, {label!r}")
            else:
                found = True
                yield reader.line_num, text, label
            first = False
    except csv.Error as err:
        raise DataError(f"{path}, line {reader.line_num}: {err}") from None
    if not found:
        raise DataError(f"{path} has no data rows")


def map_labels(first_line: dict[str, int], label_names: Sequence[str] | None,
               path: str | Path) -> tuple[list[str], dict[str, int]]:
    """(label names, the id of each label as written) for the labels found in a file (each with the line it
    first appears on); ``DataError`` naming that line for a label outside ``label_names``."""
    names = list(label_names) if label_names is not None else _sorted_labels(set(first_line))
    ids = {name: i for i, name in enumerate(names)}
    if not any(_is_int(n) for n in names) and all(label in ids or _is_int(label) for label in first_line):
        ids |= {str(i): i for i in range(len(names))}  # ids standing for the names
    for label, line in sorted(first_line.items(), key=lambda item: item[1]):
        if label not in ids:
            raise DataError(f"{path}, line {line}: unknown label {label!r}; expected one of {names}")
    return names, ids


def _is_int(text: str) -> bool:
    return text.isdigit()


def _sorted_labels(labels: set[str]) -> list[str]:
    try:
        return sorted(labels, key=int)
    except ValueError:
        return sorted(labels)
