"""Tokenizers: characters or byte-level BPE, with the same special tokens at fixed ids.

Every tokenizer reserves ids 0..3 for ``<pad>``, ``<bos>``, ``<eos>`` and ``<unk>``, so models, losses
(``ignore_index=PAD_ID``) and decoding loops can rely on the constants below whatever the tokenizer. A
tokenizer made for masked-token pretraining (``task=mlm``) also has ``<mask>``, at id 4 (``MASK_ID``);
the others do not, so their vocabularies are what they always were. Special tokens are never produced from
text: encoding the string ``"<eos>"`` gives the ids of its characters or pieces, not ``EOS_ID``; they are
added only through ``add_bos`` / ``add_eos``.

- ``CharTokenizer`` (``char.py``): one token per character seen in training (Tiny Shakespeare: 65 + 4 = 69),
  the char-rnn / nanoGPT setup. Characters not seen in training encode to ``UNK_ID``.
- ``BPETokenizer`` (``bpe.py``): byte-pair encoding (Sennrich et al., 2016), the subword scheme of the
  paper's translation experiments, trained and run by Hugging Face ``tokenizers``.
- ``PretrainedTokenizer`` (``pretrained.py``): a pretrained model's own tokenizer (BERT's WordPiece), for
  fine-tuning.

What differs between the kinds is answered by the tokenizer itself, never by its ``kind`` compared elsewhere: what it
can encode (``cannot_encode``, ``unknown_id``, ``per_character``), what it adds around a text (``adds_bos``,
``added_around``, ``encode_bare``), its own special ids (``own_bos_id``, ``has_pad``, ``eos_ids``) and its file for an
export (``hf_json``). ``train.py`` maps the ``tokenizer=`` setting to the class that learns a new one.

A tokenizer is saved as ``tokenizer.json`` in a directory (a checkpoint directory, typically), written
atomically; the JSON records its ``kind`` (and its special tokens) so that ``load_tokenizer`` (``load.py``) rebuilds
it.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["BOS_ID", "EOS_ID", "MASK_ID", "MASK_TOKEN", "PAD_ID", "SPECIAL_TOKENS", "TOKENIZER_FILE",
                     "UNK_ID", "WORD_START", "Tokenizer"], "scratchformer.tokenizers.base"),
    **dict.fromkeys(["load_tokenizer"], "scratchformer.tokenizers.load"),
    **dict.fromkeys(["CharTokenizer"], "scratchformer.tokenizers.char"),
    **dict.fromkeys(["BPETokenizer"], "scratchformer.tokenizers.bpe"),
    **dict.fromkeys(["PretrainedTokenizer"], "scratchformer.tokenizers.pretrained"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
