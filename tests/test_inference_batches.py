"""Inference over many inputs (``classify --input``, ``translate --input``, ``evaluate``): the inputs are
sorted by length and cut into batches by a token budget (``data.batching.sorted_batches``); the answers come
back in input order and equal those of one input at a time, without padding."""

from __future__ import annotations

import random

import pytest
import torch

from scratchformer import EncoderClassifier, ModelConfig, Seq2SeqTransformer
from scratchformer.checkpoints import Checkpoint
from scratchformer.data.batching import sorted_batches
from scratchformer.generation import batched as inference
from scratchformer.generation import translate_ids
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks import build_task, seq2seq
from scratchformer.tasks.classify import class_probabilities
from scratchformer.tasks.inference import classify_texts
from scratchformer.tokenizers import CharTokenizer

ALPHABET = "abcdefghij ."
LENGTHS = [5, 1, 9, 3, 3, 12, 7, 1, 20, 4, 9, 2, 6, 15, 8, 3]


def tiny(arch: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(arch=arch, vocab_size=len(ALPHABET) + 4, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                      max_len=32, dropout=0.0, **kw)
    return (EncoderClassifier if arch == "encoder" else Seq2SeqTransformer)(cfg).eval()


def random_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 28))) for _ in range(n)]


def record_batches(model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (rows, padded length) of every batch the model's forward is called with."""
    shapes: list[tuple[int, int]] = []
    real = type(model).forward

    def spy(self, ids, *args, **kw):
        shapes.append(tuple(ids.shape))
        return real(self, ids, *args, **kw)

    monkeypatch.setattr(type(model), "forward", spy)
    return shapes


# ------------------------------------------------------------------------------------ sorted_batches


def test_sorted_batches_take_each_index_once_sorted_and_within_the_budget():
    lengths = LENGTHS + [40]  # 40 > the budget: a batch of its own
    batches = sorted_batches(lengths, max_tokens=24)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)
    assert flat.index(3) < flat.index(4) and flat.index(1) < flat.index(7)  # equal lengths keep input order
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= 24 or b == [len(lengths) - 1]
    assert [len(lengths) - 1] in batches
    assert len(batches[0]) > len(batches[-2])  # many short rows a batch, few long ones
    assert max(len(b) for b in sorted_batches(lengths, 10_000, max_rows=5)) == 5
    assert sorted_batches([], 10) == []


@pytest.mark.parametrize("kw", [{"max_tokens": 0}, {"max_tokens": 10, "max_rows": 0}])
def test_sorted_batches_refuse_a_budget_below_one(kw):
    with pytest.raises(ValueError, match="must be positive"):
        sorted_batches(LENGTHS, **kw)


# ------------------------------------------------------------------------------------ classify


def classifier_ckpt() -> Checkpoint:
    tok = CharTokenizer(list(ALPHABET))
    model = tiny("encoder", n_classes=3)
    return Checkpoint(model, tok, model.config, {"task": "classify"}, 0, {"labels": ["neg", "neutral", "pos"]})


def test_classify_sorted_batches_equal_one_text_at_a_time_in_input_order(monkeypatch):
    ckpt = classifier_ckpt()
    texts = random_texts(40)
    one_by_one = [classify_texts(ckpt, [t])[0] for t in texts]  # no padding, no sorting
    shapes = record_batches(ckpt.model, monkeypatch)
    batched = classify_texts(ckpt, texts, max_tokens=64)
    assert len(shapes) > 3 and len(set(shapes)) > 1  # several batches of different shapes
    assert all(rows * length <= 64 for rows, length in shapes)
    lengths = [b for _, b in shapes]
    assert lengths == sorted(lengths)  # run shortest first
    assert [label for label, _ in batched] == [label for label, _ in one_by_one]
    for (_, p), (_, q) in zip(batched, one_by_one):
        assert p == pytest.approx(q, abs=1e-5)
    # shuffled inputs give the same answers, shuffled the same way: each answer is its own text's
    perm = list(range(len(texts)))
    random.Random(1).shuffle(perm)
    shuffled = classify_texts(ckpt, [texts[i] for i in perm], max_tokens=64)
    for k, i in enumerate(perm):
        assert shuffled[k][0] == batched[i][0] and shuffled[k][1] == pytest.approx(batched[i][1], abs=1e-5)


def test_class_probabilities_of_rows_keep_their_places():
    model = tiny("encoder", n_classes=3)
    rows = [[5] * n for n in LENGTHS]
    probs = class_probabilities(model, rows, 3, max_tokens=16)
    assert probs.shape == (len(rows), 3)
    with torch.no_grad():
        for i, r in enumerate(rows):
            alone = model(torch.tensor([r]), torch.ones(1, len(r), dtype=torch.bool)).softmax(-1)[0]
            torch.testing.assert_close(probs[i], alone, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------------ translate


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_sorted_batches_equal_one_source_at_a_time_in_input_order(monkeypatch, beam):
    model = tiny("seq2seq")
    rng = random.Random(2)
    sources = [[rng.randint(4, 15) for _ in range(n)] + [2] for n in LENGTHS[:8]]  # EOS-terminated
    one_by_one = [translate_ids(model, [s], beam=beam)[0] for s in sources]
    shapes: list[tuple[int, int]] = []
    real = inference.pad_batch

    def spy(rows, *args, **kw):
        ids, mask = real(rows, *args, **kw)
        shapes.append(tuple(ids.shape))
        return ids, mask

    monkeypatch.setattr(inference, "pad_batch", spy)
    batched = translate_ids(model, sources, beam=beam, max_tokens=24)
    assert len(shapes) > 2 and len(set(shapes)) > 1
    assert all(rows * length <= 24 for rows, length in shapes)
    assert batched == one_by_one


def test_seq2seq_loss_does_not_depend_on_the_batches(monkeypatch):
    cfg = TrainConfig(task="copy", batch_size=8, n_test=30, eval_limit=30)
    task = build_task(cfg, ModelConfig(arch="seq2seq", max_len=32))
    torch.manual_seed(0)
    model = Seq2SeqTransformer(ModelConfig(arch="seq2seq", vocab_size=task.tokenizer.vocab_size, d_model=32,
                                           n_heads=4, n_layers=1, d_ff=64, max_len=32, dropout=0.0)).eval()
    one_batch = task.loss(model, "val")
    monkeypatch.setattr(seq2seq, "EVAL_TOKENS", 20)
    many = task.loss(model, "val")
    assert many["loss"] == pytest.approx(one_batch["loss"], rel=1e-5)
    assert many["loss"] > 0
