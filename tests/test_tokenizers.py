"""Tokenizers: fixed special ids, exact round trips, unknown characters, save/load, error messages."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from conftest import SHARED_DATA, needs_data
from scratchformer.data import DataError
from scratchformer.tokenizers import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    BPETokenizer,
    CharTokenizer,
    load_tokenizer,
)

DATA = SHARED_DATA
needs_shakespeare = needs_data("tinyshakespeare.txt")
needs_multi30k = needs_data("multi30k/train.de.gz")

GERMAN = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Zwei junge Männer spielen Fußball auf einer grünen Wiese.",
    "Größere Hunde laufen über die Straße, während Mädchen zuschauen.",
    "Ä Ö Ü ä ö ü ß — „Anführungszeichen“ und 3,5 € kosten!",
]
ENGLISH = ["A man in an orange hat starring at something.", "Two young guys with shaggy hair look at their hands."]

# A small corpus for BPE tests that run without the shared data.
CORPUS = (GERMAN + ENGLISH) * 20


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.train(CORPUS, vocab_size=400, min_frequency=2)


def test_special_constants() -> None:
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert SPECIAL_TOKENS == ["<pad>", "<bos>", "<eos>", "<unk>"]


def test_char_vocabulary_and_special_ids() -> None:
    tok = CharTokenizer.train(["hello", "world"])
    assert tok.vocab_size == 4 + len(set("helloworld"))
    assert [tok.id_to_token(i) for i in range(4)] == SPECIAL_TOKENS
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.id_to_token(4) == "d"  # sorted characters follow the specials
    assert tok.encode("held", add_bos=True, add_eos=True)[0] == BOS_ID
    assert tok.encode("held", add_bos=True, add_eos=True)[-1] == EOS_ID


def test_char_round_trip_and_unknown() -> None:
    text = "Größere Männer über Äpfel!\nZeile zwei."
    tok = CharTokenizer.train([text])
    ids = tok.encode(text)
    assert len(ids) == len(text) and UNK_ID not in ids
    assert tok.decode(ids) == text
    assert tok.decode(torch.tensor(ids)) == text  # tensors decode too
    unk = tok.encode("Gx§")
    assert unk == [tok.encode("G")[0], UNK_ID, UNK_ID]
    assert tok.decode(unk) == "G"  # unknowns are special: dropped by default
    assert tok.decode(unk, skip_special=False) == "G<unk><unk>"
    assert tok.decode([BOS_ID, *ids[:3], EOS_ID, PAD_ID], skip_special=False) == "<bos>Grö<eos><pad>"


def test_special_token_text_is_not_a_special_id(bpe: BPETokenizer) -> None:
    for tok in (CharTokenizer.train(["a <eos> b"]), bpe):
        ids = tok.encode("a <eos> b")
        assert not set(ids) & {PAD_ID, BOS_ID, EOS_ID}
        assert tok.decode(ids) == "a <eos> b"


def test_out_of_range_id_raises() -> None:
    tok = CharTokenizer.train(["ab"])
    with pytest.raises(IndexError, match="outside the vocabulary"):
        tok.decode([4, 6])
    with pytest.raises(IndexError):
        tok.id_to_token(-1)


def test_char_save_load_round_trip(tmp_path: Path) -> None:
    tok = CharTokenizer.train(["Grüße, Welt!"])
    path = tok.save(tmp_path / "ckpt")
    assert path == tmp_path / "ckpt" / "tokenizer.json"
    assert json.loads(path.read_text(encoding="utf-8")) == {"kind": "char", "chars": tok.chars,
                                                            "specials": ["<pad>", "<bos>", "<eos>", "<unk>"]}
    loaded = load_tokenizer(tmp_path / "ckpt")
    assert isinstance(loaded, CharTokenizer)
    assert loaded.chars == tok.chars
    assert loaded.encode("Welt? Grüße") == tok.encode("Welt? Grüße")
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["tokenizer.json"]  # no temp file left


@needs_shakespeare
def test_char_tinyshakespeare_has_69_tokens() -> None:
    text = (DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")
    tok = CharTokenizer.train([text])
    assert tok.vocab_size == 65 + 4
    assert tok.decode(tok.encode(text[:5000])) == text[:5000]


def test_bpe_special_ids_and_round_trip(bpe: BPETokenizer) -> None:
    assert [bpe.id_to_token(i) for i in range(4)] == SPECIAL_TOKENS
    assert bpe.vocab_size == 400
    for text in GERMAN + ENGLISH + ["new words: Quarkstrudel, zebra  (two spaces)\tand a tab"]:
        ids = bpe.encode(text, add_bos=True, add_eos=True)
        assert ids[0] == BOS_ID and ids[-1] == EOS_ID
        assert UNK_ID not in ids  # byte-level: nothing is unknown
        assert bpe.decode(ids) == text
    assert bpe.decode([BOS_ID, *bpe.encode("Hut"), EOS_ID], skip_special=False) == "<bos>Hut<eos>"


def test_bpe_learns_merges(bpe: BPETokenizer) -> None:
    # Frequent words become few tokens: fewer ids than UTF-8 bytes.
    text = GERMAN[1]
    assert len(bpe.encode(text)) < len(text.encode("utf-8")) / 2


def test_bpe_encode_batch_matches_encode(bpe: BPETokenizer) -> None:
    batch = bpe.encode_batch(GERMAN, add_eos=True)
    assert batch == [bpe.encode(t, add_eos=True) for t in GERMAN]


def test_bpe_lowercase() -> None:
    tok = BPETokenizer.train(CORPUS, vocab_size=300, lowercase=True)
    assert tok.decode(tok.encode("Zwei MÄNNER")) == "zwei männer"


def test_bpe_save_load_round_trip(bpe: BPETokenizer, tmp_path: Path) -> None:
    bpe.save(tmp_path)
    state = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert state["kind"] == "bpe"
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, BPETokenizer)
    assert loaded.hf.to_str() == bpe.hf.to_str()
    text = "Zwei Männer spielen: <eos> ist hier nur Text."
    assert loaded.encode(text) == bpe.encode(text)  # includes encode_special_tokens being restored
    assert loaded.decode(loaded.encode(text)) == text


def test_bpe_vocab_too_small_and_empty_corpus() -> None:
    with pytest.raises(DataError, match="vocab_size=100 is too small"):
        BPETokenizer.train(CORPUS, vocab_size=100)
    with pytest.raises(DataError, match="empty"):
        BPETokenizer.train([], vocab_size=300)
    with pytest.raises(DataError, match="empty"):
        CharTokenizer.train(["", ""])


@needs_multi30k
def test_bpe_on_multi30k_round_trips_german() -> None:
    with gzip.open(DATA / "multi30k" / "train.de.gz", "rt", encoding="utf-8") as f:
        lines = [next(f).rstrip("\n") for _ in range(400)]
    tok = BPETokenizer.train(lines, vocab_size=1000)
    assert tok.vocab_size <= 1000
    with gzip.open(DATA / "multi30k" / "val.de.gz", "rt", encoding="utf-8") as f:
        held_out = [next(f).rstrip("\n") for _ in range(50)]
    assert any(ch in "äöüÄÖÜß" for line in held_out for ch in line)
    for line in held_out + GERMAN:
        assert tok.decode(tok.encode(line)) == line
    # Subwords compress: on average well under one token per character.
    n_tokens = sum(len(tok.encode(line)) for line in held_out)
    assert n_tokens < 0.5 * sum(len(line) for line in held_out)


def test_load_errors_are_one_line_data_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file: .*tokenizer.json") as err:
        load_tokenizer(tmp_path)
    assert "\n" not in str(err.value)
    bad = tmp_path / "tokenizer.json"
    for content in ("{not json", json.dumps({"kind": "wordpiece"}), json.dumps({"kind": "char", "chars": ["ab"]}),
                    json.dumps({"kind": "bpe", "hf": {"model": 3}}), "[]"):
        bad.write_text(content, encoding="utf-8")
        with pytest.raises(DataError, match="tokenizer.json is not a valid tokenizer file") as err:
            load_tokenizer(tmp_path)
        assert "\n" not in str(err.value)


def test_bpe_token_labels_are_readable_text(bpe: BPETokenizer) -> None:
    """Plots label tokens with ``token_label``: the piece's text, "▁" for a leading space, not "Ġ"."""
    ids = bpe.encode("the cat", add_bos=True, add_eos=True)
    labels = [bpe.token_label(i) for i in ids]
    assert labels[0] == "<bos>" and labels[-1] == "<eos>"
    assert "".join(labels[1:-1]).replace("▁", " ") == "the cat"
    assert any(label.startswith("▁") for label in labels) and not any("Ġ" in label for label in labels)
    umlaut = bpe.encode("ä")  # two bytes; a piece that is half a character keeps its byte-level symbol
    assert all(bpe.token_label(i) for i in umlaut)
    chars = CharTokenizer.train(["ab c"])
    assert [chars.token_label(i) for i in chars.encode("a c")] == ["a", " ", "c"]
