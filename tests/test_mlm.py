"""Masked-token pretraining (task=mlm) and fine-tuning a classifier from it (init_from=RUN_DIR)."""

from __future__ import annotations

import json
import math

import pytest
import torch

import shared_runs
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.models import EncoderClassifier
from scratchformer.nn.config import ModelConfig
from scratchformer.tasks import mask_tokens
from scratchformer.tokenizers import BOS_ID, MASK_ID, PAD_ID, SPECIAL_TOKENS, CharTokenizer, load_tokenizer

# The shared tiny model, each step's samples printed (the test reads them) and no dropout (its loss must fall within
# 150 steps); the fine-tuning below names the model's width, read from it.
TINY = [*shared_runs.TINY, "log_every=1", "dropout=0.0"]
D_MODEL = int(next(w for w in TINY if w.startswith("d_model="))[len("d_model="):])
WORDS = ["good", "bad", "film", "plot", "great", "dull", "actors", "story", "fun", "boring", "the", "a"]


def test_mask_tokens_follows_bert_proportions_and_never_touches_padding():
    ids = torch.randint(len(SPECIAL_TOKENS) + 1, 1000, (200, 100))
    real = torch.ones_like(ids, dtype=torch.bool)
    real[:, 80:] = False  # padding
    inputs, chosen = mask_tokens(ids, real, 0.15, 1000, torch.Generator().manual_seed(0))
    assert not chosen[:, 80:].any() and torch.equal(inputs[:, 80:], ids[:, 80:])
    assert chosen[:, :80].float().mean().item() == pytest.approx(0.15, abs=0.01)
    masked = (inputs == MASK_ID) & chosen
    kept = (inputs == ids) & chosen
    assert masked.sum() / chosen.sum() == pytest.approx(0.8, abs=0.02)
    assert kept.sum() / chosen.sum() == pytest.approx(0.1 + 0.1 / 995, abs=0.02)  # a random swap can hit itself
    assert not (inputs[chosen & (inputs != MASK_ID)] <= MASK_ID).any()  # swaps draw ordinary tokens only
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else changes
    again = mask_tokens(ids, real, 0.15, 1000, torch.Generator().manual_seed(0))
    assert torch.equal(again[0], inputs) and torch.equal(again[1], chosen)  # a pure function of the generator


def test_mask_tokens_always_chooses_something():
    ids = torch.tensor([[7, 8, PAD_ID]])
    _, chosen = mask_tokens(ids, ids != PAD_ID, 1e-9, 20, torch.Generator().manual_seed(0))
    assert chosen.sum() == 1


def test_predict_tokens_scores_the_vocabulary_through_the_tied_embeddings():
    model = EncoderClassifier(ModelConfig(arch="encoder", vocab_size=50, d_model=16, n_heads=2, n_layers=1,
                                          d_ff=32, n_classes=3, dropout=0.0)).eval()
    ids = torch.randint(4, 50, (2, 7))
    chosen = torch.zeros(2, 7, dtype=torch.bool)
    chosen[0, 1] = chosen[1, 5] = True
    logits = model.predict_tokens(ids, None, chosen)
    hidden = model.encode(ids)
    assert logits.shape == (2, 50)
    assert torch.allclose(logits, hidden[chosen] @ model.embed.token.weight.T)
    assert model(ids).shape == (2, 3)  # forward: class logits


def test_pretrain_then_fine_tune_a_classifier_from_the_run(tmp_path, capsys):
    g = torch.Generator().manual_seed(0)
    # each line repeats two random words four times: a masked token is predictable from its context only
    pairs = torch.randint(len(WORDS), (300, 2), generator=g).tolist()
    lines = [" ".join([WORDS[a]] * 4 + [WORDS[b]] * 4) for a, b in pairs]
    text = tmp_path / "reviews.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    mlm = tmp_path / "mlm"
    assert main(["train", "--data", str(text), "task=mlm", *TINY, "tokenizer=bpe", "bpe_vocab_size=300", "max_len=32",
                 "max_steps=150", "batch_size=32",
                 "lr=3e-3", "warmup_steps=10", "eval_every=50", "--out", str(mlm)]) == 0
    out = capsys.readouterr()
    assert "->" in out.out  # samples: [true -> predicted] for the masked tokens
    val = [json.loads(r) for r in (mlm / "metrics.jsonl").read_text().splitlines() if '"val"' in r]
    # the words are equally frequent: guessing without context costs log 12 = 2.48 nats; context does better
    assert val[-1]["loss"] < math.log(len(WORDS)) - 0.5 and val[-1]["loss"] < val[0]["loss"]
    assert main(["info", str(mlm)]) == 0
    assert "the classification head is untrained" in capsys.readouterr().out
    assert main(["evaluate", "--ckpt", str(mlm), "--split", "val"]) == 0
    assert json.loads(capsys.readouterr().out)["loss"] == pytest.approx(val[-1]["loss"], rel=1e-4)
    # a pretrained encoder has no trained classifier: one line, not a traceback
    assert main(["classify", "--ckpt", str(mlm), "good film"]) != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and "fine-tune it first" in err.splitlines()[-1]

    labelled = tmp_path / "labelled.tsv"
    labelled.write_text("sentence\tlabel\n" + "".join(f"{t}\t{int('good' in t or 'great' in t)}\n" for t in lines))
    clf = tmp_path / "clf"
    assert main(["train", "--data", str(labelled), "task=classify", f"init_from={mlm}", f"d_model={D_MODEL}",
                 "dropout=0.1", "pooling=max", "max_len=32", "max_steps=1", "batch_size=8", "lr=1e-9", "eval_every=1",
                 "--out", str(clf)]) == 0
    assert "initialised from" in capsys.readouterr().err
    base, tuned = load_checkpoint(mlm), load_checkpoint(clf)
    assert tuned.model_config.dropout == 0.1 and tuned.model_config.pooling == "max"
    assert tuned.tokenizer.encode("good film") == base.tokenizer.encode("good film")  # the run's own tokenizer
    before, after = base.model.state_dict(), tuned.model.state_dict()
    for name, value in before.items():  # one step at lr 1e-9: the encoder is the pretrained one
        if not name.startswith("head."):
            assert torch.allclose(after[name], value, atol=1e-6), name

    # settings that contradict the checkpoint's architecture are refused before any work
    assert main(["train", "--data", str(labelled), "task=classify", f"init_from={mlm}", f"d_model={2 * D_MODEL}",
                 "--out", str(tmp_path / "clash")]) != 0
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"d_model={2 * D_MODEL}" in err and f"(it has {D_MODEL})" in err
    assert main(["train", "--data", str(labelled), "task=classify", f"init_from={mlm}", "max_len=64",
                 "--out", str(tmp_path / "long")]) != 0
    assert "set max_len=32 or less" in capsys.readouterr().err


def test_mask_is_its_own_special_token(tmp_path):
    """A tokenizer made for masked-token pretraining has <mask> at id 4, distinct from <bos> (1); the others
    keep their four special tokens."""
    from scratchformer.settings.config import TrainConfig
    from scratchformer.tasks import build_task
    from scratchformer.tokenizers import BPETokenizer

    texts = [f"{a} {b}" for a in WORDS for b in WORDS]
    for tokenizer in (CharTokenizer.train(texts, with_mask=True), BPETokenizer.train(texts, 300, with_mask=True)):
        assert tokenizer.mask_id == MASK_ID == 4 != BOS_ID
        assert tokenizer.decode([MASK_ID], skip_special=False) == "<mask>" and tokenizer.decode([MASK_ID]) == ""
        assert MASK_ID not in tokenizer.encode("<mask> " + " ".join(WORDS))  # text never becomes a special token
        tokenizer.save(tmp_path / type(tokenizer).__name__)
        assert load_tokenizer(tmp_path / type(tokenizer).__name__).mask_id == MASK_ID
    plain = CharTokenizer.train(texts)
    assert plain.mask_id is None and plain.vocab_size == len(set("".join(texts))) + 4
    data = tmp_path / "lines.txt"
    data.write_text("\n".join(texts) + "\n")
    fresh = build_task(TrainConfig(task="mlm", batch_size=8), ModelConfig(arch="encoder", max_len=16), [str(data)],
                       log=lambda s: None)
    assert fresh.mask_id == MASK_ID and MASK_ID in fresh.global_batch(0)["ids"]
