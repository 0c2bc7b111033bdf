"""A tokenizer as llama.cpp's ``gpt2`` tokenizer model reads it (the ``tokenizer.ggml.*`` keys of a GGUF file).

llama.cpp runs byte-level BPE itself: text -> UTF-8 bytes, each byte shown as one printable symbol (GPT-2's
``bytes_to_unicode``), words split by GPT-2's regex (``tokenizer.ggml.pre = "gpt-2"``), then the merges applied
by rank. Two of this project's tokenizers map onto that exactly:

- **byte-level BPE** (``tokenizer=bpe``): the same regex, the same byte symbols, the vocabulary and merges copied
  in order. One difference: this project NFKC-normalises text before splitting it and llama.cpp does not, so text
  already in NFKC form (ordinary text, accented letters included) gets the same ids; a lower-casing tokenizer
  (``lowercase``) is refused, since llama.cpp would not lower-case.
- **characters** (``tokenizer=char``): each character is a token whose text is its UTF-8 bytes in byte symbols;
  a character of several bytes gets the merges that join its bytes, nothing else is merged. A character the
  vocabulary lacks is dropped by llama.cpp (this project maps it to ``<unk>``).

The special tokens (``<pad>``, ``<bos>``, ``<eos>``, ``<unk>``, ``<mask>``) are control tokens at their ids;
no bos is added to a prompt (the language models here are trained without one). A pretrained model's own
byte-level BPE (GPT-2's, Llama 3's, Qwen3's) is copied with its special tokens and the ids its folder names, its
word-splitting regex named for llama.cpp (``pre_tokenizer``); WordPiece (BERT's) has no llama.cpp counterpart and is
refused. What the folder's tokenizer does by itself, llama.cpp is told to do: ``add_bos_token`` is true where its
post-processor puts bos before every text (Llama 3's ``<|begin_of_text|>``), and a tokenizer that adds anything
else around a text is refused. Its end-of-generation ids go in the keys llama.cpp stops at: the eos, then the others
as ``eot`` and ``eom`` (llama.cpp has these three; it also stops at any token it knows by name, ``<|eot_id|>``,
``<|im_end|>``, ...); ``stops`` says which of the tokenizer's ids a file holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scratchformer.interop.traced import ExportError
from scratchformer.tokenizers import Tokenizer

NORMAL, CONTROL = 1, 3  # llama.cpp's token types


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map from the 256 byte values to printable characters (printable Latin-1 bytes map to themselves)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


@dataclass
class GGUFVocab:
    tokens: list[str]
    types: list[int]
    merges: list[str]
    specials: dict[str, int]  # bos, eos, unk, pad, eot, eom -> id
    add_bos: bool = False  # llama.cpp puts bos before a prompt, as the tokenizer does
    unkept: tuple[int, ...] = ()  # end-of-generation ids beyond the three keys (llama.cpp may know them by name)

    def notes(self) -> list[str]:
        """What the export says of the tokenizer's special ids."""
        stops = [str(self.specials[k]) for k in ("eos", "eot", "eom") if k in self.specials]
        notes = [f"adds bos {self.specials['bos']}"] if self.add_bos else []
        notes += [f"stops at {', '.join(stops)}"] if stops else []
        if self.unkept:
            notes.append(f"end-of-generation ids {list(self.unkept)} have no key left (llama.cpp stops at them only if "
                         "it knows their names)")
        return notes


def gguf_vocab(tokenizer: Tokenizer | None) -> GGUFVocab:
    """The ``tokenizer.ggml.*`` contents for ``tokenizer``; ``ExportError`` naming why if llama.cpp cannot run it."""
    if tokenizer is None:
        raise ExportError("a model without a tokenizer has no llama.cpp counterpart (byte-level BPE and characters "
                          "do): export without a tokenizer is not supported for GGUF")
    vocab = _char_vocab(tokenizer) if tokenizer.per_character else _bpe_vocab(tokenizer)
    before, after = tokenizer.added_around()  # a model's own (Llama's, Qwen3's, GPT-2's): as its folder names them
    if after or before not in ([], [tokenizer.bos_id]):
        raise ExportError(f"this tokenizer adds ids {before} before and {after} after every text, which llama.cpp "
                          "does not (it can add bos only)")
    vocab.add_bos = bool(before)
    named = {"bos": tokenizer.own_bos_id, "unk": tokenizer.unknown_id,
             "pad": tokenizer.pad_id if tokenizer.has_pad else None}
    vocab.specials = {role: i for role, i in named.items() if i is not None}
    stops = list(tokenizer.eos_ids)
    if stops:
        others = [i for i in stops if i != tokenizer.eos_id]
        vocab.specials |= {"eos": tokenizer.eos_id, **dict(zip(("eot", "eom"), others))}
        vocab.unkept = tuple(others[2:])
    return vocab


# llama.cpp's names for the word-splitting regexes of byte-level BPE tokenizers (tokenizer.ggml.pre): a fragment of
# each regex that tells it apart; a plain ByteLevel pre-tokenizer is GPT-2's own
PRE_TOKENIZERS = {"\\p{N}{1,3}": "llama-bpe", "\\p{N}|": "qwen2"}


def pre_tokenizer(tokenizer: Tokenizer) -> str:
    """llama.cpp's name for how ``tokenizer`` splits text into words before merging (``gpt-2`` for this project's
    byte-level BPE); ``ExportError`` for a regex llama.cpp is not known to hold."""
    import json

    state = json.dumps(json.loads(tokenizer.hf_json()).get("pre_tokenizer"))
    if '"Split"' not in state:
        return "gpt-2"
    for fragment, name in PRE_TOKENIZERS.items():
        if fragment in state:
            return name
    raise ExportError("this tokenizer splits words with a regex llama.cpp is not known to hold (known: GPT-2's, "
                      "Llama 3's, Qwen2's and Qwen3's)")


def _char_vocab(tokenizer: Any) -> GGUFVocab:
    symbols = bytes_to_unicode()
    n_special = len(tokenizer.specials)
    tokens, types, merges = list(tokenizer.specials), [CONTROL] * n_special, []
    for c in tokenizer.chars:
        pieces = [symbols[b] for b in c.encode("utf-8")]
        for i in range(1, len(pieces)):  # join a character's bytes left to right, and nothing else
            merges.append(f"{''.join(pieces[:i])} {pieces[i]}")
        tokens.append("".join(pieces))
        types.append(NORMAL)
    return GGUFVocab(tokens, types, merges, {})


def _bpe_vocab(tokenizer: Tokenizer) -> GGUFVocab:
    import json

    state = json.loads(tokenizer.hf_json())
    normalizers = json.dumps(state.get("normalizer"))
    if "Lowercase" in normalizers:
        raise ExportError("a lower-casing BPE tokenizer (lowercase=true) has no llama.cpp counterpart: llama.cpp "
                          "does not lower-case text")
    model = state["model"]
    if model.get("type") != "BPE" or "ByteLevel" not in json.dumps(state.get("pre_tokenizer")):
        raise ExportError("only byte-level BPE tokenizers map to llama.cpp's gpt2 tokenizer")
    by_id = {i: t for t, i in model["vocab"].items()}
    for added in state.get("added_tokens", []):
        by_id[added["id"]] = added["content"]
    n = tokenizer.vocab_size
    if sorted(by_id) != list(range(n)):
        raise ExportError("the BPE vocabulary has gaps in its ids; llama.cpp needs ids 0..V-1")
    special = tokenizer.special_ids
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return GGUFVocab([by_id[i] for i in range(n)], [CONTROL if i in special else NORMAL for i in range(n)],
                     merges, {})
