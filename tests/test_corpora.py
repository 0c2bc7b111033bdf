"""Prepared corpora: the same batches as the in-memory path they replaced, token ids that never wrap, a second
run that tokenizes nothing, and faults (a kill, a damaged file, a full disk) that never leave a corpus a later
run would trust."""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import shared_runs
from conftest import task_of
from corpus_cases import CASES, STEPS, make_inputs
from scratchformer.app.cli import main
from scratchformer.data import prepared as corpora_module
from scratchformer.data.corpus import CorpusWriter, PreparedCorpus, segments, training_texts
from scratchformer.data.corpus import writer as writer_module
from scratchformer.data.corpus.store import FlatArray
from scratchformer.data.plan import Source, plan
from scratchformer.data.progress import ByteBar
from scratchformer.data.roles import DataFiles
from scratchformer.data.streams import text_chunks
from scratchformer.data.task_data import DataRequest
from scratchformer.distributed import DistInfo
from scratchformer.errors import DataError
from scratchformer.registry import spec
from scratchformer.settings.config import TrainConfig
from scratchformer.tokenizers import BPETokenizer

REFERENCE = json.loads((Path(__file__).parent / "data" / "in_memory_batches.json").read_text())
# Not shared_runs.QUICK: the tests read the runs' information lines (which --quiet leaves out) and decode.
QUICK = [*shared_runs.TINY, "max_steps=4", "eval_every=2", "eval_batches=1", "eval_decode=2", "batch_size=8",
         "max_tokens=0", "num_threads=1"]


@pytest.fixture
def corpora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of this test's own."""
    root = tmp_path / "corpora"
    monkeypatch.setenv("SCRATCHFORMER_CORPORA", str(root))
    return root


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_inputs(tmp_path_factory.mktemp("inputs"))


def case_task(name: str, inputs: dict[str, Path], **changes):
    cfg_kw, model_kw, data, val = CASES[name]
    files = DataFiles.of([str(inputs[k]) for k in data], [str(inputs[k]) for k in val])
    return task_of({**cfg_kw, **model_kw, **changes}, files)


def entries(root: Path) -> list[str]:
    """The corpus folders and temporary folders in a cache folder."""
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "tokenizers") if root.exists() else []


def said_prepared(err: str) -> int:
    """How many corpora a run said it prepared."""
    return sum(line.startswith("prepared ") for line in err.splitlines())


def one_line_error(capsys, code: int, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code != 0 and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.startswith("scratchformer: error:"), err
    for needle in needles:
        assert needle in last, last
    return last


# ------------------------------------------------------------------------------------ the same batches


@pytest.mark.parametrize("case", sorted(CASES))
def test_batches_from_disk_equal_the_recorded_batches_of_the_in_memory_path(case, inputs):
    task = case_task(case, inputs)
    expected = REFERENCE[case]
    assert task.tokenizer.vocab_size == expected["vocab_size"]
    assert (task.split_size("train"), task.split_size("val")) == (expected["train_size"], expected["val_size"])
    for step in STEPS:
        batch = {k: v.tolist() for k, v in task.global_batch(step).items()}
        assert batch == expected["batches"][str(step)], f"step {step}"
    first = range(10)
    if case.startswith("lm"):
        x, y = task._random_windows("val")[0]
        assert {"x": x.tolist(), "y": y.tolist()} == expected["val"]
    elif case.startswith("translate"):
        assert [list(p) for p in task.pairs("val", first)] == expected["val"]
    elif case.startswith("classify"):
        assert [list(r) for r in task.examples("val", first)] == expected["val"]
    else:
        assert task.examples("val", first) == expected["val"]


def test_a_text_encoded_piece_by_piece_gives_the_ids_of_the_whole(tmp_path):
    tricky = ("trailing  \nspaces\r\nand\tTabs\n\n\nblank lines  \n  indented\nÜber straße\n´accent\n"
              "ﬁ ligature\n42 is 6 x 7\n_under\n\u2028sep\n")
    text = make_inputs(tmp_path)["lm"].read_text() + tricky * 20
    path = tmp_path / "tricky.txt"
    path.write_text(text, encoding="utf-8")
    for lowercase in (False, True):
        tok = BPETokenizer.train([text], 400, lowercase=lowercase)
        whole = tok.encode(text)
        for chunk_bytes in (7, 100, 1 << 20):  # a 7-byte chunk cuts inside UTF-8 characters too
            pieces = list(segments(text_chunks(path, chunk_bytes=chunk_bytes)))
            assert "".join(pieces) == text and len(pieces) > 100
            assert [i for ids in tok.encode_batch(pieces) for i in ids] == whole, (lowercase, chunk_bytes)


# ------------------------------------------------------------------------------------ id types


def test_a_vocabulary_beyond_uint16_is_stored_as_uint32_and_every_id_round_trips(tmp_path, corpora):
    rng = np.random.default_rng(0)
    chars = [chr(c) for c in range(0x10000, 0x10000 + 70_000)]  # with newline and the specials: 70,005 ids
    order = rng.permutation(len(chars))
    text = "\n".join("".join(chars[i] for i in order[j:j + 100]) for j in range(0, len(chars), 100)) + "\n"
    path = tmp_path / "wide.txt"
    path.write_text(text, encoding="utf-8")
    task = task_of(dict(task="lm", tokenizer="char", batch_size=2, max_len=8), [str(path)])
    corpus = task.data.prepared[0].corpus
    assert task.tokenizer.vocab_size == 70_005 and corpus.id_type == "uint32"
    stored = corpus.fields["text"].data.read(0, corpus.fields["text"].n_items)
    assert stored.dtype == np.dtype("<u4") and int(stored.max()) >= 65_536
    assert stored.tolist() == task.tokenizer.encode(text) and task.tokenizer.decode(stored.tolist()) == text


def test_uint16_holds_exactly_65536_ids_and_an_id_outside_the_vocabulary_is_never_written(tmp_path):
    with CorpusWriter(tmp_path / "full", 65_536) as w:
        w.add_rows("text", [[0, 65_535], [7]])
        corpus = w.commit({"kind": "lines"})
    assert corpus.id_type == "uint16" and [r.tolist() for r in corpus.fields["text"].rows([0, 1])] == [[0, 65_535], [7]]
    with pytest.raises(ValueError, match="token id 65536 is outside the vocabulary of 65,536 ids"):
        with CorpusWriter(tmp_path / "wrap", 65_536) as w:
            w.add_rows("text", [[1, 65_536]])  # would wrap to 0 as uint16
    assert not list(tmp_path.glob("*wrap*"))  # nothing left behind


# ------------------------------------------------------------------------------------ reuse


def test_a_second_run_tokenizes_nothing_and_a_changed_byte_or_setting_prepares_again(tmp_path, corpora,
                                                                                     monkeypatch):
    calls = {"write": 0, "train": 0}
    real_write, real_train = corpora_module.write_corpus, BPETokenizer.train.__func__

    def write(*args, **kwargs):
        calls["write"] += 1
        return real_write(*args, **kwargs)

    def train(cls, *args, **kwargs):
        calls["train"] += 1
        return real_train(cls, *args, **kwargs)

    monkeypatch.setattr(corpora_module, "write_corpus", write)
    monkeypatch.setattr(BPETokenizer, "train", classmethod(train))
    text = tmp_path / "book.txt"
    text.write_text(make_inputs(tmp_path)["lm"].read_text())

    def run(model=None, **cfg) -> dict[str, int]:
        calls.update(write=0, train=0)
        task_of({"task": "lm", "tokenizer": "bpe", "bpe_vocab_size": 300, **(model or {"max_len": 16}), **cfg},
                [str(text)])
        return dict(calls)

    assert run() == {"write": 1, "train": 1}
    with monkeypatch.context() as m:  # a second run, and another model: no tokenizing at all
        m.setattr(BPETokenizer, "encode_batch", lambda *a, **k: pytest.fail("tokenized again"))
        m.setattr(BPETokenizer, "encode", lambda *a, **k: pytest.fail("tokenized again"))
        assert run() == {"write": 0, "train": 0}
        assert run({"max_len": 32, "d_model": 64}, seed=9) == {"write": 0, "train": 0}
    content = text.read_bytes()
    i = content.index(b"e")
    text.write_bytes(content[:i] + b"o" + content[i + 1:])  # one byte, same size, within the same second
    assert run() == {"write": 1, "train": 1}
    assert run(bpe_vocab_size=310) == {"write": 1, "train": 1}
    assert run(lowercase=True) == {"write": 1, "train": 1}
    assert run(tokenizer_sample=2000) == {"write": 1, "train": 1}
    assert len(entries(corpora)) == 5 and not [e for e in entries(corpora) if ".tmp-" in e]


def test_the_splits_are_chosen_from_the_index_without_reading_the_token_files(inputs, corpora, monkeypatch):
    for case in ("translate-char", "lm-char", "classify-char"):
        case_task(case, inputs)  # prepared
        read: list[str] = []
        real = FlatArray._mapped

        def mapped(self, real=real, read=read):
            read.append(self.path.name)
            return real(self)

        with monkeypatch.context() as m:
            m.setattr(FlatArray, "_mapped", mapped)
            task = case_task(case, inputs)
        assert task.split_size("val") > 0
        assert not [name for name in read if name.endswith(".bin") and name != "labels.bin"], (case, read)


def test_prepare_says_what_it_wrote_and_how_big_and_train_reuses_it_with_its_notes(tmp_path, corpora, capsys):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("de\ten\n" + "".join(f"zebra {i}\tjazz {i}\n" for i in range(60)) + "leer\t \n \tempty\n")
    assert main(["prepare", "task=translate", "tokenizer=char", "--data", str(pairs)]) == 0
    out = capsys.readouterr().out
    assert f"prepared corpora in {corpora}" in out and "wrote it in" in out
    assert "pairs.tsv: 530 + 410 tokens in 60 rows, ids uint16 (vocabulary 21)" in out and " kB in " in out
    run = tmp_path / "run"
    assert main(["train", "task=translate", "tokenizer=char", "--data", str(pairs), *QUICK, "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert "ids uint16 (vocabulary 21); reused" in err and not said_prepared(err)
    assert "note: " in err and "skipped 2 of 62 pairs with an empty side" in err and "skipped the header row" in err
    corpora_json = json.loads((run / "config.json").read_text())["corpora"]
    assert corpora_json[0]["reused"] and corpora_json[0]["tokens"] == {"source": 530, "target": 410}


def test_a_run_says_how_many_sequences_are_empty(tmp_path, corpora, capsys):
    rows = tmp_path / "rows.tsv"
    rows.write_text("".join(f"text {i}\t{'pos' if i % 2 else 'neg'}\n" for i in range(40)) + "\tpos\n \tneg\n")
    run = tmp_path / "run"
    assert main(["train", "task=classify", "tokenizer=char", "--data", str(rows), "--val",
                 str(rows), *QUICK, "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert "warning: 2 of 42 train sequences are empty (no tokens)" in err, err
    assert "warning: 2 of 42 val sequences are empty (no tokens)" in err, err


def test_a_tokenizer_can_learn_from_an_even_sample_of_the_stream(tmp_path):
    path = tmp_path / "halves.txt"
    first, second = "abc def ghi jkl\n" * 131_072, "nop qrs tuv wxyz\n" * 123_362  # 2 MB each
    path.write_text(first + second)
    sample = "".join(training_texts(Source("text", (str(path),)), sample_chars=400_000))
    assert 350_000 < len(sample) < 500_000
    assert "abc" in sample and "wxyz" in sample  # from the whole file, not its beginning only
    assert len(list(training_texts(Source("text", (str(path),))))) == 131_072 + 123_362


# ------------------------------------------------------------------------------------ documents


def test_a_folder_is_one_corpus_that_keeps_its_document_boundaries(tmp_path, corpora):
    folder = tmp_path / "books"
    (folder / "sub").mkdir(parents=True)
    texts = {f"{i:02d}.txt": f"Chapter {i}\n" + "it was a dark night and \n" * 20 for i in range(9)}
    texts["sub/last.txt.gz"] = "The end, without a final newline" + " indeed" * 64
    for name, text in texts.items():
        if name.endswith(".gz"):
            with gzip.open(folder / name, "wt") as f:
                f.write(text)
        else:
            (folder / name).write_text(text)
    (folder / "notes.md").write_text("not a document")
    task = task_of(dict(task="lm", tokenizer="bpe", bpe_vocab_size=300, max_len=16), [str(folder)])
    corpus = task.data.prepared[0].corpus
    assert corpus.manifest["documents"] == sorted(texts)
    lengths = [len(task.tokenizer.encode(t if t.endswith("\n") else t + "\n")) for _, t in sorted(texts.items())]
    offsets = corpus.fields["text"].offsets.read(0, len(texts) + 1)
    assert offsets.tolist() == np.concatenate([[0], np.cumsum(lengths)]).tolist()  # each document encoded alone
    # the last document holds 6 % of the tokens, the last two 17 %: those two are held out, whole
    assert task.streams["val"].start == offsets[-3] and task.streams["train"].stop == offsets[-3]
    assert "its last documents" in task.data.origin["val"]


# ------------------------------------------------------------------------------------ faults


KILLER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, even in a background job
from scratchformer.data.corpus import writer
from scratchformer.app.cli import main
calls, real = [0], writer._write_bytes
def write(f, data):
    calls[0] += 1
    if calls[0] == int(sys.argv[1]):
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))
    real(f, data)
writer._write_bytes = write
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_a_preparation_killed_midway_leaves_nothing_a_later_run_reads(tmp_path, corpora, inputs, sig):
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    args = ["prepare", "task=translate", "tokenizer=char", "--data", str(inputs["pairs"])]
    # a process of its own: it is killed, or its exit code after SIGINT is the point
    proc = subprocess.run([sys.executable, str(script), "5", sig, *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if sig == "SIGKILL":
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert len(entries(corpora)) == 1 and ".tmp-" in entries(corpora)[0]  # only the temporary folder
        assert not (corpora / entries(corpora)[0] / "manifest.json").exists()
    else:
        assert proc.returncode == 130 and "interrupted" in proc.stderr, proc.stderr
        assert entries(corpora) == []  # cleaned up on the way out
    assert main(args) == 0  # a new run: prepares it again, and removes what the killed one left
    (done,) = entries(corpora)
    assert ".tmp-" not in done
    fresh = case_task("translate-char", inputs)  # the rebuilt corpus gives the recorded batches
    assert {k: v.tolist() for k, v in fresh.global_batch(7).items()} == REFERENCE["translate-char"]["batches"]["7"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest"])
def test_a_damaged_corpus_is_rebuilt_with_one_line_saying_so(tmp_path, corpora, inputs, capsys, damage):
    args = ["prepare", "task=translate", "tokenizer=char", "--data", str(inputs["pairs"])]
    assert main(args) == 0
    (key,) = entries(corpora)
    folder = corpora / key
    if damage == "flip":
        data = bytearray((folder / "source.bin").read_bytes())
        data[len(data) // 2] ^= 0x40
        (folder / "source.bin").write_bytes(bytes(data))
    elif damage == "truncate":
        (folder / "target.idx").write_bytes((folder / "target.idx").read_bytes()[:-8])
    else:
        (folder / "manifest.json").unlink()
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if line.startswith("warning:")]
    reason = {"flip": "source.bin does not match its checksum", "truncate": "target.idx has 1,920 bytes, expected "
              "1,928", "manifest": "has no manifest.json (its preparation never finished)"}[damage]
    assert len(said) == 1 and said[0].startswith("warning: the prepared corpus of") and reason in said[0], err
    PreparedCorpus.open(folder)  # whole again, checksums and all
    task = case_task("translate-char", inputs)
    assert {k: v.tolist() for k, v in task.global_batch(2).items()} == REFERENCE["translate-char"]["batches"]["2"]


def test_a_full_disk_ends_in_one_line_and_leaves_the_users_files_untouched(tmp_path, corpora, capsys, monkeypatch):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"zebra {i}\tjazz {i}\n" for i in range(200)))
    before = (hashlib.sha256(pairs.read_bytes()).hexdigest(), pairs.stat().st_mtime_ns)

    def full(f, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer_module, "_write_bytes", full)
    run = tmp_path / "run"
    code = main(["train", "task=translate", "tokenizer=char", "--data", str(pairs), *QUICK, "--out", str(run)])
    assert code == 2
    one_line_error(capsys, code, "no space left on the disk of", "your data files are untouched",
                   "SCRATCHFORMER_CORPORA")
    assert (hashlib.sha256(pairs.read_bytes()).hexdigest(), pairs.stat().st_mtime_ns) == before
    assert entries(corpora) == []  # no corpus, no half-written temporary folder
    assert not run.exists() or not any(run.iterdir())


# ------------------------------------------------------------------------------------ distributed runs


def test_under_ddp_rank_zero_prepares_and_the_other_ranks_wait_for_its_outcome(tmp_path, corpora, inputs,
                                                                              monkeypatch):
    cfg = TrainConfig(task="translate", tokenizer="bpe", bpe_vocab_size=300)
    files = DataFiles.of([str(inputs["pairs"])], [str(inputs["pairs_val"])])
    the_plan = plan(spec("translate"), files, dataset=None, data_dir=None, val_fraction=0.1, seed=0)

    def prepare_sources(cfg, plan, info):
        request = DataRequest(plan.task, cfg, files, None, None, info, lambda line: None, True)
        data = corpora_module.prepared_data(request)
        return data.tokenizer, data.prepared
    sent = []
    monkeypatch.setattr(corpora_module, "broadcast_object", lambda value, info: sent.append(value) or value)
    tok0, prepared0 = prepare_sources(cfg, the_plan, info=DistInfo(rank=0, world_size=2))
    assert [s[0] for s in sent] == ["ok"]  # rank 0 prepared, then told the others
    assert [p.corpus.manifest["prepared_by"]["rank"] for p in prepared0] == [0, 0]

    def never(*args, **kwargs):
        pytest.fail("a rank other than 0 hashed, trained or wrote")

    with monkeypatch.context() as m:  # rank 1 waits for rank 0's outcome and only opens the files
        m.setattr(corpora_module, "broadcast_object", lambda value, info: sent[0])
        for name in ("_cached", "write_corpus", "_trained_tokenizer"):
            m.setattr(corpora_module, name, never)
        m.setattr(corpora_module.cache, "fingerprint", never)
        tok1, prepared1 = prepare_sources(cfg, the_plan, info=DistInfo(rank=1, world_size=2))
    assert [p.corpus.path for p in prepared1] == [p.corpus.path for p in prepared0]
    assert tok1.state() == tok0.state()
    monkeypatch.setattr(corpora_module, "broadcast_object",
                        lambda value, info: ("error", "pairs.tsv, line 3: expected source<TAB>target"))
    with pytest.raises(DataError, match="line 3: expected"):  # rank 0's one-line error, on rank 1 too
        prepare_sources(cfg, the_plan, info=DistInfo(rank=1, world_size=2))


@pytest.mark.slow
@pytest.mark.processes
def test_two_torchrun_processes_share_one_corpus_prepared_by_rank_zero(tmp_path, inputs):
    root = tmp_path / "corpora"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SCRATCHFORMER_CORPORA": str(root)}
    # two processes (torchrun)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
                        "scratchformer", "train", "task=translate", "tokenizer=bpe", "bpe_vocab_size=300",
                        "--data", str(inputs["pairs"]), *QUICK, "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 processes on cpu" in r.stderr and said_prepared(r.stderr) == 1  # said once, by rank 0
    (key,) = entries(root)
    assert json.loads((root / key / "manifest.json").read_text())["prepared_by"]["rank"] == 0


# ------------------------------------------------------------------------------------ resume


RESUME_KILLER = """
import os, signal, sys
from scratchformer.app.cli import main
from scratchformer.train import trainer as loop
real = loop.Trainer.train_step
def train_step(self, step):
    if step == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, step)
loop.Trainer.train_step = train_step
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_resume_after_preparation_draws_the_batches_of_an_uninterrupted_run(tmp_path, corpora, inputs, capsys):
    from safetensors.torch import load_file

    args = ["train", "task=translate", "tokenizer=bpe", "bpe_vocab_size=300", "--data", str(inputs["pairs"]),
            *shared_runs.TINY, "max_steps=30", "save_every=10", "eval_every=15", "eval_decode=0", "batch_size=16",
            "max_tokens=0", "dropout=0.1", "num_threads=1", "log_every=5"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # one thread (num_threads=1), as in the killed run's process
    assert main([*args, "--out", str(tmp_path / "full")]) == 0, capsys.readouterr().err
    script = tmp_path / "killer.py"
    script.write_text(RESUME_KILLER)
    # a process of its own: it is SIGKILLed
    killed = subprocess.run([sys.executable, str(script), "23", *args, "--out", str(tmp_path / "killed")],
                            capture_output=True, text=True, env=env, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    cached = entries(corpora)
    capsys.readouterr()
    assert main(["train", "--out", str(tmp_path / "killed"), "--resume"]) == 0
    resumed = capsys.readouterr().err
    assert "resuming" in resumed and not said_prepared(resumed) and entries(corpora) == cached
    a, b = load_file(str(tmp_path / "full" / "last" / "model.safetensors")), \
        load_file(str(tmp_path / "killed" / "last" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ------------------------------------------------------------------------------------ progress


def test_preparing_shows_megabytes_per_second_and_the_time_left(capsys):
    lines: list[str] = []
    bar = ByteBar("preparing big.txt", 10_000_000, lines.append, every=0.0)
    bar(2_500_000)
    bar(2_500_000)
    assert bar.close() >= 0 and len(lines) == 2
    assert lines[-1].startswith("preparing big.txt: 5 of 10 MB, ") and " MB/s, " in lines[-1]
    assert lines[-1].endswith(" left")


def test_images_are_read_into_memory_and_never_prepared(tmp_path, corpora, capsys):
    image = pytest.importorskip("PIL.Image", reason="images need Pillow (pip install -e \".[images]\")")
    for name, shade in (("dark", 20), ("light", 230)):
        (tmp_path / "photos" / name).mkdir(parents=True)
        for i in range(6):
            image.fromarray(np.full((8, 8), shade + i, dtype=np.uint8)).save(tmp_path / "photos" / name / f"{i}.png")
    (tmp_path / "photos" / "dark" / "notes.txt").write_text("not an image")
    run = tmp_path / "run"
    assert main(["train", "task=image", "--data", str(tmp_path / "photos"), "image_size=8", "patch_size=4",
                 "channels=1", *QUICK, "--out", str(run)]) == 0
    err = capsys.readouterr().err
    assert "data:\n  train " in err and "prepared corpora" not in err, err
    assert "10 images" in err and "2 images" in err and "skipped 1 file(s) that are not PNG or JPEG" in err, err
    assert entries(corpora) == [] and json.loads((run / "config.json").read_text())["corpora"] == []
    one_line_error(capsys, main(["prepare", "task=image", "--data", str(tmp_path / "photos")]),
                   "task=image reads its images into memory", "nothing is prepared")
