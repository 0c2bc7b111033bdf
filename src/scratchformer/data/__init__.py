"""Data for the three model families: synthetic tasks, text files, parallel pairs, labelled text, named datasets.

Each module is one kind of source; ``batching`` turns token ids into padded tensors. Every problem a user
can cause raises ``DataError`` with a one-line message naming the file.

==============  =================================================================================
errors          ``DataError``
files           strict UTF-8 reading (``.gz`` transparently), atomic writes
synthetic       copy / reverse / sort tasks with held-out sets (``SyntheticTask``)
text            language-model text: train/validation split, random-offset batches (``LMDataset``)
parallel        sentence pairs from a TSV file or two line-aligned files
labelled        (text, label) rows from TSV or CSV
named           tinyshakespeare, multi30k, sst2: local lookup or verified download
batching        padding with masks, length-bucketed batches
==============  =================================================================================
"""

from scratchformer.data.batching import bucket_batches, pad_batch
from scratchformer.data.errors import DataError
from scratchformer.data.files import atomic_write_text, read_lines, read_text
from scratchformer.data.labelled import read_labelled
from scratchformer.data.named import (
    DATASETS,
    SST2_LABELS,
    cache_dir,
    find_dataset,
    load_multi30k,
    load_sst2,
    load_tinyshakespeare,
)
from scratchformer.data.parallel import read_parallel
from scratchformer.data.synthetic import ALPHABET, TASKS, SyntheticTask
from scratchformer.data.text import LMDataset, lm_splits

__all__ = [
    "ALPHABET", "DATASETS", "SST2_LABELS", "TASKS", "DataError", "LMDataset", "SyntheticTask", "atomic_write_text",
    "bucket_batches", "cache_dir", "find_dataset", "load_multi30k", "load_sst2", "load_tinyshakespeare",
    "lm_splits", "pad_batch", "read_labelled", "read_lines", "read_parallel", "read_text",
]
