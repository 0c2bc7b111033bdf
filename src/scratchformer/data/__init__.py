"""Data for the model families: synthetic tasks, text files, parallel pairs, labelled text, images, named datasets,
and the prepared corpora every text task trains from; one pipeline that reads any of them into one type.

``pipeline.load_data`` is the way in: a task's files by role -> its tokenizer -> ``TaskData`` (a view of each
split), whatever the form of the data. Every problem a user can cause raises ``DataError`` with a one-line
message naming the file.

==============  =================================================================================
pipeline        ``load_data``: the reader of the task's form of data, one type out (``TaskData``)
roles           a user's files by role (--data, --val, --test), checked against the task's data form
plan            which source each split reads: the files, or a named dataset's splits; validation carving
prepared        text of every form: the tokenizer (trained once) and each source's corpus, then its splits
task_data       ``TaskData``: the tokenizer and a view of each split, whatever holds them
memory          rows held in memory, read as a corpus's rows are (held-out strings, images)
synthetic       copy / reverse / sort with held-out sets (``SyntheticTask``), fresh strings at every step
image_splits    the image task's data, read into memory (images are small; corpora on disk are for text)
files           strict UTF-8 reading (``.gz`` transparently)
streams         the same reading as a stream of chunks and lines: a file of any size in bounded memory
parallel        sentence pairs from a TSV file or two line-aligned files
labelled        (text, label) rows from TSV or CSV
images          a folder of class sub-folders of PNG/JPEG images, image decoding, scikit-learn's digits
named           tinyshakespeare, multi30k, sst2: local lookup or verified download
batching        padding with masks, length-bucketed (training) and length-sorted batches; epochs of batches
headers         the one rule for header rows, shared by every tabular format
splits          validation data carved out of training data, from an index alone
progress        progress in bytes, for hashing, tokenizer training and preparation
corpus/         prepared corpora: token ids on disk, written once by a streaming pass, read by every run
==============  =================================================================================

The names below load on first use (``lazy.py``), so that ``import scratchformer.data`` stays light.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["DataError"], "scratchformer.errors"),
    **dict.fromkeys(["read_lines", "read_text"], "scratchformer.data.files"),
    "ALPHABET": "scratchformer.registry.spec",
    **dict.fromkeys(["SyntheticTask", "TASKS"], "scratchformer.data.synthetic"),
    **dict.fromkeys(["read_parallel"], "scratchformer.data.parallel"),
    **dict.fromkeys(["read_labelled"], "scratchformer.data.labelled"),
    **dict.fromkeys(["load_digits", "read_image", "read_image_folder"], "scratchformer.data.images"),
    **dict.fromkeys(["cache_dir", "DATASETS", "find_dataset", "load_multi30k", "load_sst2", "load_tinyshakespeare",
                     "SST2_LABELS"],
                    "scratchformer.data.named"),
    **dict.fromkeys(["BucketedEpoch", "bucket_batches", "pad_batch", "sorted_batches"], "scratchformer.data.batching"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
