"""Prepared corpora: a user's files tokenized once, in one streaming pass, into token-id files on disk that
every later run, ``--resume``, evaluation and process of a distributed run reads without loading them.

The layout of the cache folder (``$SCRATCHFORMER_CORPORA``, see ``cache``)::

    fingerprints.json            the SHA-256 of files already hashed (by path, size, time, inode)
    tokenizers/KEY/tokenizer.json  a tokenizer trained on a source with given settings (data/prepared.py)
    KEY/                         one prepared source; KEY = digest(content, format, tokenizer, version)
      manifest.json              written last: what the corpus holds, each file's size and CRC-32, notes
      text.bin  text.idx         token ids (uint16 | uint32) and int64 offsets: documents or rows
      source.bin source.idx      translation: source ids (ending with <eos>), target ids
      target.bin target.idx
      FIELD.text.bin FIELD.text.idx  the raw UTF-8 text of each row (BLEU references, samples)
      labels.bin                 classification: each row's label code (manifest: the names)
    .KEY.tmp-HOST-PID-RANDOM/    a preparation under way (or killed): never read

==========  =========================================================================================
store       reading a corpus: the manifest checked, files mapped only while read (``PreparedCorpus``)
writer      writing one under a temporary name, manifest last, renamed into place (``CorpusWriter``)
cache       the folder, the content fingerprints, the keys
prepare     one source -> one corpus, streaming; the texts a tokenizer is trained on
views       a split: a range of the token stream (``TokenStream``), or a set of rows (``RowSet``)
==========  =========================================================================================
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["CorruptCorpus", "Field", "FlatArray", "PreparedCorpus", "id_dtype"],
                    "scratchformer.data.corpus.store"),
    **dict.fromkeys(["CorpusWriter"], "scratchformer.data.corpus.writer"),
    **dict.fromkeys(["ENV_VAR", "corpora_dir", "digest", "fingerprint", "remove_stale"],
                    "scratchformer.data.corpus.cache"),
    **dict.fromkeys(["Encoder", "segments", "training_texts", "write_corpus"], "scratchformer.data.corpus.prepare"),
    **dict.fromkeys(["RowSet", "TokenStream"], "scratchformer.data.corpus.views"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
