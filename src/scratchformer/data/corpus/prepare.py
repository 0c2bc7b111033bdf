"""Preparing a source: one streaming pass from the user's files to a corpus of token ids on disk.

The files are read in chunks of about a megabyte (``streams``), cut into texts (rows, or for language
modelling pieces of the text), encoded a megabyte at a time by the tokenizer's batch encoder (Hugging Face
``tokenizers`` runs it on every core) and appended to the corpus files (``writer``); memory holds one batch,
whatever the size of the files. The same streams feed tokenizer training (``training_texts``), optionally
only a sample of them, evenly spread over the files (sentencepiece's ``input_sentence_size``).

The data layer needs nothing of a tokenizer but ``Encoder``: ``vocab_size`` and ``encode_batch``. Training
one, and choosing which, is ``data/prepared.py``'s job, which hands it in.

A language-modelling text is cut only before a newline that is followed by a word character. There the
byte-level BPE pre-tokenizer (GPT-2's pattern) always splits, whatever surrounds it, so encoding the pieces
one by one gives exactly the ids of encoding the whole text at once. A stretch of 8 MB without such a
newline (no line starts with a letter or digit) is cut anyway, at its last newline.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from scratchformer.data.corpus.cache import documents
from scratchformer.data.corpus.store import PreparedCorpus
from scratchformer.data.corpus.writer import CorpusWriter
from scratchformer.data.plan import Source
from scratchformer.data.progress import ByteBar
from scratchformer.data.streams import Progress, iter_lines, text_chunks
from scratchformer.errors import DataError

__all__ = ["Encoder", "segments", "source_bytes", "training_texts", "write_corpus"]

BATCH_CHARS = 1 << 20  # characters per call of the batch encoder
BATCH_ROWS = 1 << 15
LONGEST_PIECE = 8 << 20
_CUT = re.compile(r"(?=\n\w)")  # before a newline followed by a word character
_WORD = re.compile(r"\w")
T = TypeVar("T")
MLM_FORMAT = "a text file of one example a line, or the text column of a .tsv/.csv"


class Encoder(Protocol):
    """What preparation needs of a tokenizer (every ``scratchformer.tokenizers.Tokenizer`` is one). One that
    also has ``encode_arrays`` (the same, giving NumPy arrays; the character tokenizer) is written through it."""

    @property
    def vocab_size(self) -> int: ...

    def encode_batch(self, texts: list[str], *, add_bos: bool = False, add_eos: bool = False) -> list[list[int]]: ...


BatchEncode = Callable[..., Sequence[Sequence[int]]]  # (texts, add_eos=False) -> the ids of each text


def source_bytes(source: Source) -> int:
    """Bytes on disk of every file of a source (what a progress bar counts)."""
    return sum(path.stat().st_size for _, path in documents(source))


def write_corpus(source: Source, encoder: Encoder, directory: Path, meta: dict[str, Any],
                 progress: Progress | None = None) -> PreparedCorpus:
    """Encode ``source`` into a new corpus at ``directory`` (written under a temporary name, renamed when
    complete); ``meta`` goes into its manifest. Problems in the files raise ``DataError`` and leave nothing."""
    started = time.perf_counter()
    notes: list[str] = []
    # about what it takes: the ids (2 or 4 bytes a token, a token for every character or two) and, for rows, the
    # text kept beside them
    with CorpusWriter(directory, encoder.vocab_size, needed=3 * source_bytes(source)) as writer:
        encode = getattr(encoder, "encode_arrays", encoder.encode_batch)
        extra = _WRITERS[source.kind](source, encode, writer, notes, progress)
        return writer.commit({**meta, **extra, "kind": source.kind, "source": [str(p) for p in source.paths],
                              "notes": notes, "input_bytes": source_bytes(source),
                              "seconds": round(time.perf_counter() - started, 3)})


def training_texts(source: Source, sample_chars: int = 0, progress: ByteBar | None = None) -> Iterator[str]:
    """The texts a tokenizer learns from: every text of the source, or about ``sample_chars`` characters of
    them, taken evenly over the files (from every megabyte read, its share; ``progress.done`` counts the bytes
    read)."""
    bar = progress if progress is not None else ByteBar("", 1, None)
    docs = documents(source)
    groups = _documents_text(source, docs, bar) if source.kind == "text" else _row_texts(source, bar)
    texts = itertools.chain.from_iterable(group for _, group in groups)
    if not sample_chars:
        return texts
    return _evenly(texts, sample_chars, bar, total=max(1, sum(path.stat().st_size for _, path in docs)))


def _evenly(texts: Iterator[str], sample_chars: int, bar: ByteBar, total: int) -> Iterator[str]:
    """About ``sample_chars`` characters of ``texts``: after ``bar.done`` of ``total`` bytes read, that share."""
    kept = 0
    for text in texts:
        if kept <= sample_chars * bar.done / total:
            kept += len(text)
            yield text


def _row_texts(source: Source, bar: ByteBar) -> Iterator[tuple[str, Iterable[str]]]:
    """Every text of the rows of a source (both sides of a pair), as one group: ``("", texts)``."""
    from scratchformer.data.labelled import iter_labelled
    from scratchformer.data.parallel import iter_pairs

    if source.kind == "pairs":
        yield "", (text for pair in iter_pairs(source.paths, [], bar) for text in pair)
    elif source.kind == "labelled":
        yield "", (text for _, text, _ in iter_labelled(source.paths[0], [], bar))
    else:
        yield "", _lines(source, [], bar)


# ------------------------------------------------------------------------------------------ reading by kind


def segments(chunks: Iterable[str]) -> Iterator[str]:
    """A text, given in chunks, as pieces cut only where the BPE pre-tokenizer splits (module docstring)."""
    rest = ""
    for chunk in chunks:
        pieces, rest = cut_pieces(rest + chunk)
        yield from pieces
    yield from cut_pieces(rest, final=True)[0]


def cut_pieces(text: str, final: bool = False) -> tuple[list[str], str]:
    """(the whole pieces of ``text``, the rest, to be joined to the next chunk); ``final``: no chunk follows,
    so the rest is cut too. A text without a cut stays whole until it is ``LONGEST_PIECE`` long."""
    cut = len(text) if final else _last_cut(text)
    if cut <= 0:
        if len(text) < LONGEST_PIECE:
            return [], text
        cut = text.rfind("\n") if text.rfind("\n") > 0 else len(text)
    return [piece for piece in _CUT.split(text[:cut]) if piece], text[cut:]


def _last_cut(text: str) -> int:
    i = text.rfind("\n")
    while i >= 0 and not _WORD.match(text, i + 1):
        i = text.rfind("\n", 0, i)
    return i


def _documents_text(source: Source, docs: list[tuple[str, Path]],
                    progress: Progress | None) -> Iterator[tuple[str, Iterator[str]]]:
    """(name, pieces) of each document of ``docs`` (``documents(source)``); in a folder every document ends
    with a newline, so none runs into the next."""
    folder = Path(source.paths[0]).is_dir()
    for name, path in docs:
        chunks = text_chunks(path, progress)
        yield name, segments(_newline_ended(chunks) if folder else chunks)


def _newline_ended(chunks: Iterator[str]) -> Iterator[str]:
    last = ""
    for chunk in chunks:
        last = chunk
        yield chunk
    if not last.endswith("\n"):
        yield "\n"


def _lines(source: Source, notes: list[str], progress: Progress | None) -> Iterator[str]:
    """Masked-token pretraining: the text column of a TSV/CSV, or the non-blank lines of a text file."""
    from scratchformer.data.labelled import iter_labelled

    path = source.paths[0]
    if Path(Path(path).name.removesuffix(".gz")).suffix.lower() in (".tsv", ".csv"):
        yield from (text for _, text, _ in iter_labelled(path, notes, progress))
        return
    found = False
    for line in iter_lines(path, progress):
        if line := line.strip():
            found = True
            yield line
    if not found:
        raise DataError(f"{path} has no text; task=mlm takes {MLM_FORMAT}")


def _batched(items: Iterable[T], size: Callable[[T], int]) -> Iterator[list[T]]:
    batch: list[T] = []
    chars = 0
    for item in items:
        batch.append(item)
        chars += size(item)
        if chars >= BATCH_CHARS or len(batch) >= BATCH_ROWS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


# ------------------------------------------------------------------------------------------ writing by kind


def _write_text(source: Source, encode: BatchEncode, writer: CorpusWriter, notes: list[str],
                progress: Progress | None) -> dict[str, Any]:
    """Each document as one row of tokens, encoded a chunk's pieces at a time (the cut of ``segments``, with
    the batch encoder called once a chunk)."""
    folder = Path(source.paths[0]).is_dir()
    docs = documents(source)
    for _, path in docs:
        rest = last = ""
        for chunk in text_chunks(path, progress):
            pieces, rest = cut_pieces(rest + chunk)
            if pieces:
                writer.extend("text", encode(pieces))
            last = chunk
        if folder and not last.endswith("\n"):  # in a folder every document ends with a newline
            rest += "\n"
        pieces, _ = cut_pieces(rest, final=True)
        if pieces:
            writer.extend("text", encode(pieces))
        writer.end_row("text")
    return {"documents": [name for name, _ in docs]} if folder else {}


def _write_pairs(source: Source, encode: BatchEncode, writer: CorpusWriter, notes: list[str],
                 progress: Progress | None) -> dict[str, Any]:
    from scratchformer.data.parallel import iter_pairs

    for batch in _batched(iter_pairs(source.paths, notes, progress), lambda p: len(p[0]) + len(p[1])):
        sources, targets = [s for s, _ in batch], [t for _, t in batch]
        writer.add_rows("source", encode(sources, add_eos=True))
        writer.add_rows("target", encode(targets))
        writer.add_texts("source", sources)
        writer.add_texts("target", targets)
    return {}


def _write_labelled(source: Source, encode: BatchEncode, writer: CorpusWriter, notes: list[str],
                    progress: Progress | None) -> dict[str, Any]:
    from scratchformer.data.labelled import iter_labelled

    codes: dict[str, int] = {}  # label as written -> its code, in order of first appearance
    first_line: dict[str, int] = {}
    for batch in _batched(iter_labelled(source.paths[0], notes, progress), lambda row: len(row[1])):
        texts = [text for _, text, _ in batch]
        writer.add_rows("text", encode(texts))
        writer.add_texts("text", texts)
        for line, _, label in batch:
            if label not in codes:
                codes[label], first_line[label] = len(codes), line
        writer.add_labels([codes[label] for _, _, label in batch])
    return {"labels": {"names": list(codes), "first_line": [first_line[name] for name in codes]}}


def _write_lines(source: Source, encode: BatchEncode, writer: CorpusWriter, notes: list[str],
                 progress: Progress | None) -> dict[str, Any]:
    for batch in _batched(_lines(source, notes, progress), len):
        writer.add_rows("text", encode(batch))
        writer.add_texts("text", batch)
    return {}


_WRITERS = {"text": _write_text, "pairs": _write_pairs, "labelled": _write_labelled, "lines": _write_lines}
