"""Data for the model families: synthetic tasks, text files, parallel pairs, labelled text, images, named datasets,
and the prepared corpora every text task trains from.

Each module is one kind of source; ``batching`` turns token ids into padded tensors. Every problem a user
can cause raises ``DataError`` with a one-line message naming the file.

==============  =================================================================================
files           strict UTF-8 reading (``.gz`` transparently)
streams         the same reading as a stream of chunks and lines: a file of any size in bounded memory
synthetic       copy / reverse / sort tasks with held-out sets (``SyntheticTask``)
parallel        sentence pairs from a TSV file or two line-aligned files
labelled        (text, label) rows from TSV or CSV
images          a folder of class sub-folders of PNG/JPEG images, image decoding, scikit-learn's digits
named           tinyshakespeare, multi30k, sst2: local lookup or verified download
batching        padding with masks, length-bucketed (training) and length-sorted batches
headers         the one rule for header rows, shared by every tabular format
sources         a user's files by role (--data, --val, --test) or a named dataset: which source each split reads
image_splits    the image task's splits, read into memory (images are small; corpora on disk are for text)
splits          validation data carved out of training data, from an index alone
corpus/         prepared corpora: token ids on disk, written once by a streaming pass, read by every run
==============  =================================================================================
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["DataError"], "scratchformer.errors"),
    **dict.fromkeys(["read_lines", "read_text"], "scratchformer.data.files"),
    **dict.fromkeys(["ALPHABET", "SyntheticTask", "TASKS"], "scratchformer.data.synthetic"),
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
