"""Tiny runs and folders made once per test run and read by every test that only reads them.

A run here is a few seconds of training; made by each module that wants one, the same runs were trained a dozen
times per suite. So each kind is built once, by the first test that asks (``conftest.shared_run("copy")``), under
a file lock in a folder that both pytest-xdist workers see (the parent of their own temporary folders), and read by
every later test of either worker. A test that changes a run (resumes it, fine-tunes into it, writes a report into
it) works on ``copy_of(run, tmp_path)``; ``get`` checks that nobody changed a shared run in place, and fails the test
that finds one changed.

The settings of every tiny run live here too (``TINY`` and friends): one place for "a model that trains in a
second", instead of one list per module.

Add a kind: a function ``make(out: Path) -> None`` that trains (or writes) into ``out``, registered in ``MAKERS``;
read it with ``shared_run(name)``. A maker may read another kind with ``get`` (no cycles).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

# ------------------------------------------------------------------------------------ settings of tiny runs

# The model of every tiny run: trains a few steps a second on one core.
TINY = ["d_model=32", "n_heads=2", "n_layers=1", "d_ff=64"]
TWO_LAYERS = ["d_model=32", "n_heads=2", "n_layers=2", "d_ff=64"]
# A few steps, one evaluation at the end, nothing printed but warnings and results.
QUICK = ["max_steps=6", "batch_size=4", "eval_every=6", "eval_batches=1", "num_threads=1", "--quiet"]
# The same tiny model as a ModelConfig's keywords (for tests that build a model without a run).
TINY_MODEL = dict(vocab_size=37, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, dropout=0.0)

# ------------------------------------------------------------------------------------ the data the runs read

TEXT = "to be or not to be, that is the question.\n" * 50
LABELLED = "text\tlabel\n" + "".join(f"good fun {i}\tpos\nbad dull {i}\tneg\n" for i in range(40))
PAIRS = "".join(f"ein haus {i}\ta house {i}\n" for i in range(80))
# Instruction records a tiny GPT learns in a minute: sums and words spelt backwards
RECORDS = [{"instruction": f"Add {a} and {b}.", "input": "", "output": f"{a + b}"} for a in range(6) for b in range(5)]
RECORDS += [{"instruction": "Spell the word backwards.", "input": w, "output": w[::-1]} for w in ("cat", "dog", "sun")]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
FILES: dict[str, str] = {
    "text.txt": TEXT,
    "labelled.tsv": LABELLED,
    "pairs.tsv": PAIRS,
    "records.json": json.dumps(RECORDS),
}


def data_file(root: Path, name: str) -> Path:
    """One of ``FILES`` written into ``root`` (once)."""
    path = root / name
    if not path.exists():  # written whole under another name, then renamed: a worker never reads half a file
        part = root / f".{name}.{os.getpid()}"
        part.write_text(FILES[name], encoding="utf-8")
        os.replace(part, path)
    return path


# ------------------------------------------------------------------------------------ making them once


def run_here(*argv: str) -> None:
    """``scratchformer ARGV`` in this process, leaving its thread count as it was (a run sets its own)."""
    from scratchformer.app.cli import main

    threads = torch.get_num_threads()
    try:
        assert main(list(argv)) == 0, f"{' '.join(argv)} failed"
    finally:
        torch.set_num_threads(threads)


def _train(*argv: str) -> None:
    run_here("train", *argv)


# One torch thread for every maker: a run on a busy 2-core machine with two threads spinning took 50 s instead of 6.


def _make_copy(out: Path, files: Path) -> None:
    """A copy model (encoder-decoder: the copy preset's post-LN, 2 layers, 4 heads) that copies: 300 steps on
    strings of 4-8 of the symbols a..j, 50 test strings, exact match 100% on them."""
    _train("--preset", "copy", "max_steps=300", "d_model=64", "d_ff=128", "n_test=50", "eval_every=300",
           "eval_decode=20", "max_seq_len=8", "log_every=50", "num_threads=1", "--quiet", "--out", str(out))


def _make_lm(out: Path, files: Path) -> None:
    """A character-level GPT on ``TEXT``: 30 steps."""
    _train("task=lm", "--data", str(data_file(files, "text.txt")), *TINY, "max_len=32", "max_steps=30",
           "batch_size=8", "eval_every=30", "eval_batches=1", "log_every=50", "num_threads=1", "--quiet", "--out",
           str(out))


def _make_classifier(out: Path, files: Path) -> None:
    """A character-level encoder classifier of ``LABELLED`` (pos / neg): 30 steps."""
    _train("task=classify", "--data", str(data_file(files, "labelled.tsv")), *TINY, "max_steps=30", "batch_size=16",
           "eval_every=30", "log_every=50", "num_threads=1", "--quiet", "--out", str(out))


def _make_translator(out: Path, files: Path) -> None:
    """A character-level encoder-decoder of ``PAIRS`` (German -> English): 20 steps."""
    _train("task=translate", "--data", str(data_file(files, "pairs.tsv")), *TINY, "max_steps=20", "batch_size=16",
           "eval_every=20", "eval_decode=5", "log_every=50", "num_threads=1", "--quiet", "--out", str(out))


MAKERS: dict[str, Callable[[Path, Path], None]] = {
    "copy": _make_copy,
    "lm": _make_lm,
    "classifier": _make_classifier,
    "translator": _make_translator,
}


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this test run shares (xdist's workers each have a subfolder of one parent)."""
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    root.mkdir(exist_ok=True)
    return root


def _fingerprint(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def get(factory: pytest.TempPathFactory, name: str) -> Path:
    """The run ``name``, made by its maker the first time any worker asks (the others wait for it)."""
    return made_in(shared_root(factory), name)


def made_in(root: Path, name: str) -> Path:
    """The run ``name`` in the shared folder ``root`` (``get``; a maker that reads another kind calls it with the
    folder its ``files`` lie in: ``made_in(files.parent, kind)``)."""
    from filelock import FileLock

    out, stamp, files = root / name, root / f"{name}.made.json", root / "files"
    files.mkdir(exist_ok=True)
    with FileLock(str(root / f"{name}.lock")):
        if not stamp.exists():
            if out.exists():  # a maker that failed half-way
                shutil.rmtree(out)
            MAKERS[name](out, files)
            stamp.write_text(json.dumps(_fingerprint(out)))
    if json.loads(stamp.read_text()) != [list(f) for f in _fingerprint(out)]:
        pytest.fail(f"the shared run {name!r} was changed by a test: a test that writes into a run must work on "
                    "shared_runs.copy_of(run, tmp_path)")
    return out


def files_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder of ``FILES`` (written on demand, by ``data_file``)."""
    folder = shared_root(factory) / "files"
    folder.mkdir(exist_ok=True)
    return folder


def processes_lock(factory: pytest.TempPathFactory):
    """The lock a test (or module fixture) holds while it runs several processes (conftest's ``processes`` mark)."""
    from filelock import FileLock

    return FileLock(str(shared_root(factory) / "processes.lock"))


def copy_of(run: Path, folder: Path) -> Path:
    """A copy of ``run`` in ``folder``, for a test that writes into it."""
    target = folder / run.name
    shutil.copytree(run, target)
    return target


# ---- section C: instruction tuning, DPO, the server's models and tiny Hugging Face folders

# The records' own words as a text (the plain GPT the server continues, and a base that instruction tuning starts from)
RECORDS_TEXT = " ".join(f"{r['instruction']} {r['input']} {r['output']}." for r in RECORDS) * 20
THINGS = ("fox", "dog", "brown fox", "quick dog", "lazy fox", "words", "fox and dog", "quick fox")
# Preference records a tiny GPT learns to prefer in 10 steps of DPO
PREFERENCES = [{"instruction": f"Say something about the {w}.", "input": "" if i % 3 else "the quick brown fox",
                "chosen": f"The {w} jumps over the lazy dog.", "rejected": f"The {w} is lazy, and then some words."}
               for i, w in enumerate(THINGS)]
# The model of the instruction runs the server and the instruction tests use: two layers, a window of 256 tokens
# (the server's tests ask for prompts beyond it, and init_from keeps it)
INSTRUCT_MODEL = [*TWO_LAYERS, "max_len=256", "batch_size=4", "num_threads=1"]
# The DPO chain's model: a BPE of 400 tokens (the preferences' words), dropout 0.1 (the reference turns it off),
# a window of 384 (the test of cut records asks for 256)
DPO_MODEL = [*TWO_LAYERS, "max_len=384", "tokenizer=bpe", "bpe_vocab_size=400", "dropout=0.1", "num_threads=1"]
FILES.update({
    "records-text.txt": RECORDS_TEXT,
    "preferences.json": json.dumps(PREFERENCES),
})


def _make_instruct(out: Path, files: Path) -> None:
    """A GPT instruction-tuned from scratch on ``RECORDS`` (Alpaca's template, characters): 60 steps at lr 3e-3,
    enough to answer in words and end with its end-of-text token."""
    _train("task=instruct", "--data", str(data_file(files, "records.json")), *INSTRUCT_MODEL, "max_steps=60",
           "lr=3e-3", "eval_every=60", "--quiet", "--out", str(out))


def _make_lm_records(out: Path, files: Path) -> None:
    """``lm``: a character-level GPT on ``RECORDS_TEXT``, the instruction runs' model: 120 steps at lr 3e-3, enough
    to write words but not its end-of-text token. (In a folder named ``lm``: the server names a model by its folder.)"""
    _train("task=lm", "--data", str(data_file(files, "records-text.txt")), *INSTRUCT_MODEL, "max_steps=120",
           "lr=3e-3", "eval_every=120", "--quiet", "--out", str(out / "lm"))


def _make_dpo(out: Path, files: Path) -> None:
    """The DPO chain, each a folder of ``out``: ``base`` (a GPT of ``DPO_MODEL`` trained 4 steps on the preferences'
    words), ``instruct`` (instruction-tuned from it on the chosen answers, 10 steps), ``dpo`` (tuned from that by DPO on
    ``PREFERENCES``, 10 steps at lr 1e-3, as the DPO issue's bar runs it); the records beside them."""
    out.mkdir()
    text = out / "text.txt"
    text.write_text(" ".join(f"{r['instruction']} {r['input']} {r['chosen']} {r['rejected']}" for r in PREFERENCES)
                    * 30, encoding="utf-8")
    records = out / "instructions.json"
    records.write_text(json.dumps([{**r, "output": r["chosen"]} for r in PREFERENCES]), encoding="utf-8")
    prefs = out / "preferences.json"
    prefs.write_text(json.dumps(PREFERENCES), encoding="utf-8")
    _train("task=lm", "--data", str(text), *DPO_MODEL, "max_steps=4", "eval_every=4", "--quiet",
           "--out", str(out / "base"))
    _train("task=instruct", f"init_from={out / 'base'}", "--data", str(records), "max_steps=10", "lr=3e-3",
           "eval_every=10", "num_threads=1", "--quiet", "--out", str(out / "instruct"))
    _train("task=dpo", f"init_from={out / 'instruct'}", "--data", str(prefs), "--val", str(prefs), "max_steps=10",
           "eval_every=10", "lr=1e-3", "num_threads=1", "--quiet", "--out", str(out / "dpo"))


def _transformers():
    return pytest.importorskip("transformers", reason="the hf extra (transformers) writes the folders")


def _make_hf_open(out: Path, files: Path) -> None:
    """Random folders saved by ``transformers`` (``chat_folders.SMALL``: 300 tokens, 64 wide, 2 layers), drawn in this
    order after seed 0: ``llama_gqa_untied`` (grouped-query, untied, llama3 rotary scaling), ``llama_tied`` (one K/V
    head, tied), ``qwen3`` (head_dim 32 != 64 / 4), ``gpt2``; ``llama_sharded`` (the first in shards of 40 KB). The
    plain byte-level BPE (``chat_folders.write_tokenizer``) in ``llama_gqa_untied`` and ``qwen3``; none in the
    others (a folder without one is a refusal's case)."""
    from chat_folders import LLAMA3, SMALL, V, write_tokenizer

    transformers = _transformers()
    torch.manual_seed(0)
    made = {
        "llama_gqa_untied": transformers.LlamaForCausalLM(transformers.LlamaConfig(
            **SMALL, num_key_value_heads=2, tie_word_embeddings=False, rope_theta=500000.0, rope_scaling=LLAMA3)),
        "llama_tied": transformers.LlamaForCausalLM(transformers.LlamaConfig(
            **SMALL, num_key_value_heads=1, tie_word_embeddings=True)),
        "qwen3": transformers.Qwen3ForCausalLM(transformers.Qwen3Config(
            **SMALL, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True)),
        "gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=128)),
    }
    for name, model in made.items():
        model.eval().save_pretrained(out / name)
    made["llama_gqa_untied"].save_pretrained(out / "llama_sharded", max_shard_size="40KB")
    for name in ("llama_gqa_untied", "qwen3"):
        write_tokenizer(out / name)


def _make_hf_llama_chatml(out: Path, files: Path) -> None:
    """``llama``: a random Llama folder (``chat_folders.SMALL``, grouped-query, end-of-text id 0) with the plain
    byte-level BPE and ``CHATML`` as its ``chat_template.jinja``: the server's chat model."""
    from chat_folders import SMALL, write_tokenizer

    transformers = _transformers()
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, num_key_value_heads=2, bos_token_id=0,
                                                                   eos_token_id=0))
    llama.save_pretrained(out / "llama")
    write_tokenizer(out / "llama")
    (out / "llama" / "chat_template.jinja").write_text(CHATML, encoding="utf-8")


def _make_hf_chat(out: Path, files: Path) -> None:
    """Folders whose tokenizer is whole (``chat_folders.make_chat_folder``): ``llama3`` and ``qwen3``; ``nopad``
    (``llama3`` without a pad token anywhere); ``run``, trained 3 steps further from ``llama3`` on ``text.txt``."""
    from chat_folders import make_chat_folder

    _transformers()
    for style in ("llama3", "qwen3"):
        make_chat_folder(out / style, style)
    nopad = shutil.copytree(out / "llama3", out / "nopad")
    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        data = json.loads((nopad / name).read_text())
        data.pop("pad_token_id", None), data.pop("pad_token", None)
        (nopad / name).write_text(json.dumps(data))
    text = out / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog, and then some more words\n" * 40, encoding="utf-8")
    _train("task=lm", f"init_from={out / 'llama3'}", "--data", str(text), "max_steps=3", "eval_every=3", "max_len=32",
           "num_threads=1", "--quiet", "--out", str(out / "run"))


def _make_hf_trl(out: Path, files: Path) -> None:
    """The GPT-2 and Llama folders of the DPO parity tests (``test_dpo_trl.made``: 300 tokens, end-of-text id 0,
    each drawn after seed 0) with their byte-level BPE and its ``tokenizer_config.json``: ``gpt2``, ``llama``."""
    _transformers()
    from test_dpo_trl import made, write_folder

    for name in ("gpt2", "llama"):
        write_folder(made(name), out / name)


MAKERS.update({
    "instruct": _make_instruct,
    "lm-records": _make_lm_records,
    "dpo": _make_dpo,
    "hf-open": _make_hf_open,
    "hf-llama-chatml": _make_hf_llama_chatml,
    "hf-chat": _make_hf_chat,
    "hf-trl": _make_hf_trl,
})


# ---- section B: the ONNX export of the copy model, a BERT-shaped classifier, Shakespeare, GPT bases, a ViT

# The verse the GPT bases read (test_lora.py, test_trainable.py, test_gpt_classifier.py): its capitals, colon and
# apostrophe make a vocabulary of its own. And the reviews a GPT classifier learns.
VERSE = "to be, or not to be: that is the question.\nWhether 'tis nobler in the mind to suffer\n" * 40
REVIEWS = "".join(f"{w} film\t{y}\n" for w, y in [("a fine", 1), ("a dull", 0), ("a great", 1), ("a bad", 0)] * 30)
FILES.update({"verse.txt": VERSE, "reviews.tsv": REVIEWS})
# TINY with three blocks: what trains under trainable=last:1 (the last) differs from what does not (the others).
THREE_LAYERS = [w if not w.startswith("n_layers=") else "n_layers=3" for w in TINY]


def _kind(files: Path, name: str) -> Path:
    """The shared run ``name``, for a maker that reads it (made first if no worker has made it yet)."""
    return made_in(files.parent, name)


def _make_copy_onnx(out: Path, files: Path) -> None:
    """The copy model exported as ``export --format onnx`` writes it: encoder and decoder graphs with the KV cache,
    the manifest and ``onnx_decode.py`` (an export takes seconds; test_commands.py and test_onnx_cache.py read it)."""
    run_here("export", "--ckpt", str(_kind(files, "copy")), "--format", "onnx", "--out", str(out))


def _make_bert_classifier(out: Path, files: Path) -> None:
    """A BPE classifier of ``LABELLED`` in BERT's shape (post-LN, an embedding LayerNorm, GELU, learned positions,
    unscaled embeddings, BERT's pooler): it exports as BertForSequenceClassification. 20 steps, evaluated every 10."""
    _train("task=classify", "--data", str(data_file(files, "labelled.tsv")), *TWO_LAYERS, "dropout=0.1",
           "tokenizer=bpe", "bpe_vocab_size=300", "norm=post", "embedding_norm=true", "activation=gelu",
           "positional=learned", "scale_embeddings=false", "pooling=pooler", "max_steps=20", "batch_size=16",
           "eval_every=10", "log_every=10", "num_threads=1", "--quiet", "--out", str(out))


def _make_shakespeare(out: Path, files: Path) -> None:
    """The shakespeare-char preset (4 layers, a 64-character window) for 200 of its 2,000 steps: enough to write
    words ("ROMEO:\\nThe the the ..."). Needs tinyshakespeare.txt in the shared data folder."""
    from conftest import SHARED_DATA

    before = os.environ.get("SCRATCHFORMER_DATA")
    os.environ["SCRATCHFORMER_DATA"] = str(SHARED_DATA)
    try:
        _train("--preset", "shakespeare-char", "max_steps=200", "eval_every=200", "eval_batches=2", "num_threads=1",
               "--quiet", "--out", str(out))
    finally:
        if before is None:
            os.environ.pop("SCRATCHFORMER_DATA")
        else:
            os.environ["SCRATCHFORMER_DATA"] = before


def _make_gpt_base(out: Path, files: Path) -> None:
    """A character GPT of ``VERSE`` with three blocks and tied embeddings (its output matrix is its token
    embedding), ``max_len`` 32: the base of frozen-layer and GPT-classifier runs. 6 steps."""
    _train("task=lm", "--data", str(data_file(files, "verse.txt")), *THREE_LAYERS, "max_len=32", *QUICK,
           "--out", str(out))


def _make_gpt_untied(out: Path, files: Path) -> None:
    """A character GPT of ``VERSE`` with two blocks and an output layer of its own (``lm_head``, untied from the
    embedding), ``max_len`` 32: the base of the LoRA runs. 6 steps, evaluated every 3."""
    _train("task=lm", "--data", str(data_file(files, "verse.txt")), *TWO_LAYERS, "tie_embeddings=false",
           "max_len=32", *[w if not w.startswith("eval_every=") else "eval_every=3" for w in QUICK], "--out", str(out))


def _make_gpt_classifier(out: Path, files: Path) -> None:
    """A GPT classifier (it reads its last real token) fine-tuned whole from ``gpt_base`` on ``REVIEWS``
    (labels 0 and 1): ``train task=classify init_from=gpt_base``, 6 steps."""
    _train("task=classify", f"init_from={_kind(files, 'gpt_base').resolve()}", "--data",
           str(data_file(files, "reviews.tsv")), *QUICK, "--out", str(out))


def sides(root: Path, n: int, seed: int = 0) -> Path:
    """Two classes any model tells apart, ``n`` images each: ``left`` images are bright on the left, ``right`` on
    the right (12 x 16 pixels, PNG and JPEG, resized to the model's 8 x 8). Needs Pillow."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for name in ("left", "right"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            pixels = rng.integers(0, 60, (12, 16, 3))
            pixels[:, :8] += 180 if name == "left" else 0
            pixels[:, 8:] += 180 if name == "right" else 0
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"{i}.{'png' if i % 2 else 'jpg'}")
    return root


def _make_vit(out: Path, files: Path) -> None:
    """A ViT that tells ``sides``'s ``left`` from ``right`` images: ``out/train`` (24 a class), ``out/test``
    (6 a class, another seed) and the run ``out/run``, 60 steps."""
    train, test = sides(out / "train", 24), sides(out / "test", 6, seed=1)
    _train("task=image", "--data", str(train), "--test", str(test), *VIT, "max_steps=60", "num_threads=1",
           "--quiet", "--out", str(out / "run"))


# A ViT that trains in a second: 8 x 8 images in 4 patches of 4 x 4, TINY's sizes.
VIT = ["image_size=8", "patch_size=4", *TINY, "batch_size=16", "lr=3e-3", "augment_shift=0", "eval_every=20",
       "log_every=20"]

def _make_saved_runs(out: Path, files: Path) -> None:
    """The saved runs of every family (``tests/data/saved-runs``, made before the family registry), copied, the
    paths they stored (``RUNS/``: a LoRA run's base) pointed at the copy."""
    saved = Path(__file__).parent / "data" / "saved-runs"
    for run in sorted(saved.iterdir()):
        if run.is_dir() and (run / "last").is_dir():
            shutil.copytree(run, out / run.name)
    for config in out.rglob("config.json"):
        config.write_text(config.read_text().replace("RUNS/", f"{out}/"))


MAKERS.update({
    "saved_runs": _make_saved_runs,
    "copy_onnx": _make_copy_onnx,
    "bert_classifier": _make_bert_classifier,
    "shakespeare": _make_shakespeare,
    "gpt_base": _make_gpt_base,
    "gpt_untied": _make_gpt_untied,
    "gpt_classifier": _make_gpt_classifier,
    "vit": _make_vit,
})
