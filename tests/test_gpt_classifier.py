"""A GPT that classifies from its last real token: padding on either side changes nothing, it equals Hugging Face's
``GPT2ForSequenceClassification`` given the same weights, and a classifier starts from a GPT run as a user asks
(``train task=classify init_from=GPT_RUN``), with LoRA too; the pairs that do not exist are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.batching import pad_batch
from scratchformer.models import GPTClassifier, build_model
from scratchformer.models.gpt_classifier import last_real
from scratchformer.models.params import count_parameters_formula
from scratchformer.nn.config import ModelConfig
from scratchformer.tasks.classify import class_probabilities
from shared_runs import QUICK, TINY, TINY_MODEL

# The shared tiny model as a GPT classifier of 3 classes, over 40 ids (the tests draw ids from 1 to 39).
CLASSIFIER = dict(TINY_MODEL, arch="gpt", vocab_size=40, pooling="last", n_classes=3)


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


@pytest.mark.parametrize("positional", ["learned", "rotary"])
def test_padding_on_the_left_or_the_right_changes_nothing(positional):
    torch.manual_seed(0)
    model = build_model(ModelConfig(**CLASSIFIER, positional=positional)).eval()
    assert isinstance(model, GPTClassifier)
    rows = [torch.randint(1, 40, (n,)).tolist() for n in (3, 9, 5, 1)]
    alone = torch.cat([model(torch.tensor([r])) for r in rows])  # (4, 3): each text without any padding
    right, mask = pad_batch(rows, 0)  # (4, 9) padded on the right
    left = torch.stack([torch.cat([torch.zeros(9 - len(r), dtype=torch.long), torch.tensor(r)]) for r in rows])
    with torch.no_grad():
        torch.testing.assert_close(model(right, mask), alone, atol=1e-5, rtol=0)
        torch.testing.assert_close(model(left, left != 0), alone, atol=1e-5, rtol=0)
        # more padding still: 7 extra pads on the right
        more = torch.cat([right, torch.zeros(4, 7, dtype=torch.long)], 1)
        torch.testing.assert_close(model(more, more != 0), alone, atol=1e-5, rtol=0)
    probs = class_probabilities(model, rows, 3)  # the batched path the classify command takes
    torch.testing.assert_close(probs, alone.softmax(-1), atol=1e-5, rtol=0)


def test_the_last_real_token_is_found_from_the_mask():
    mask = torch.tensor([[1, 1, 1, 0, 0], [0, 0, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.bool)
    assert last_real(mask).tolist() == [2, 4, 0]


def test_a_gpt_read_at_its_last_token_alone_differs_from_reading_the_pad():
    """The bug the model avoids: a right-padded row read at its last position (a pad) gives other logits."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(**CLASSIFIER)).eval()
    ids, mask = pad_batch([[5, 6, 7], [5, 6, 7, 8, 9, 10]], 0)
    with torch.no_grad():
        hidden = model.hidden_states(ids, mask)
        at_pad = model.head(hidden[:, -1])
        assert not torch.allclose(at_pad[0], model(ids, mask)[0], atol=1e-3)


def test_the_parameter_formula_counts_a_gpt_classifier():
    model = build_model(ModelConfig(**CLASSIFIER))
    assert sum(p.numel() for p in model.parameters()) == count_parameters_formula(model.config)


def test_equal_to_hugging_face_gpt2_for_sequence_classification(tmp_path):
    transformers = pytest.importorskip("transformers", reason="a dev dependency (pip install -e .[dev])")
    from scratchformer.interop import gpt2_from_pretrained

    hf_cfg = transformers.GPT2Config(vocab_size=97, n_positions=40, n_embd=48, n_layer=3, n_head=4, num_labels=3,
                                     pad_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    hf = transformers.GPT2ForSequenceClassification(hf_cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    transformers.GPT2LMHeadModel(hf_cfg).save_pretrained(tmp_path / "lm")  # a folder our GPT-2 loader reads ...
    lm = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "lm")
    lm.transformer.load_state_dict(hf.transformer.state_dict())  # ... holding the classifier's body
    lm.save_pretrained(tmp_path / "lm")
    gpt = gpt2_from_pretrained(tmp_path / "lm")
    ours = GPTClassifier(ModelConfig(**{**gpt.config.to_dict(), "pooling": "last", "n_classes": 3})).eval()
    missing, unexpected = ours.load_state_dict(gpt.state_dict(), strict=False)
    assert missing == ["head.weight"] and not unexpected
    with torch.no_grad():
        ours.head.weight.copy_(hf.score.weight)
    ids, mask = pad_batch([torch.randint(1, 97, (n,)).tolist() for n in (12, 5, 17, 1)], 0)  # right padding
    with torch.no_grad():
        expected = hf(ids, attention_mask=mask.long()).logits
        torch.testing.assert_close(ours(ids, mask), expected, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def gpt_run(shared_run, shared_file) -> tuple[Path, Path]:
    """The shared ``gpt_base`` run (a character GPT, max_len 32) and the reviews its classifiers learn: read only."""
    return shared_run("gpt_base"), shared_file("reviews.tsv")


def test_a_classifier_starts_from_a_gpt_run(gpt_run, shared_run, tmp_path, capsys):
    """The shared ``gpt_classifier`` is ``train task=classify init_from=gpt_base`` on the reviews (its maker checks
    that the command succeeds)."""
    base, _ = gpt_run
    out = shared_run("gpt_classifier")
    ckpt = load_checkpoint(out)
    # the base's length (32), not the 256 a classifier has by default
    assert isinstance(ckpt.model, GPTClassifier) and ckpt.model_config.max_len == 32 == \
        load_checkpoint(base).model_config.max_len
    before = load_checkpoint(base).model.state_dict()
    assert not torch.equal(ckpt.model.state_dict()["decoder.layers.0.ffn.linear1.weight"],
                           before["decoder.layers.0.ffn.linear1.weight"])  # fine-tuned: the body trained too
    capsys.readouterr()
    assert main(["classify", "--ckpt", str(out), "a fine film", "a dull film"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.split("\t")[0] in ("0", "1") for line in lines)
    assert main(["generate", "--ckpt", str(out), "--prompt", "a"]) == 2
    assert "classifier (a GPT" in error_line(capsys)
    assert main(["explain", "--ckpt", str(out), "--prompt", "a fine film"]) == 0
    text = capsys.readouterr().out
    assert "Class probabilities, layer by layer" in text and "its pooling (its last real token)" in text
    assert "layer 1" in text and f"the model's own answer (the last row): {lines[0].split(chr(9))[0]}" in text
    assert main(["explore", "--ckpt", str(out), "--export", str(tmp_path / "x.html"), "--text", "a fine film"]) == 0
    assert "masked self-attention" in (tmp_path / "x.html").read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["export", "--ckpt", str(out), "--format", "hf", "--out", str(tmp_path / "hf")]) == 2
    assert "has no --format hf export (its formats: onnx-single, torchscript)" in error_line(capsys)
    assert not (tmp_path / "hf").exists()


def test_lora_on_a_gpt_classifier_trains_the_adapters_and_the_head(gpt_run, tmp_path):
    base, labelled = gpt_run
    out = tmp_path / "lora"
    assert main(["train", "task=classify", f"init_from={base}", "--data", str(labelled), "lora_rank=2", *QUICK,
                 "--out", str(out)]) == 0
    model = load_checkpoint(out).model
    assert isinstance(model, GPTClassifier)
    from safetensors.torch import load_file

    saved = set(load_file(out / "best" / "model.safetensors"))
    assert "head.weight" in saved and all(".lora_" in n or n == "head.weight" for n in saved)


def test_a_gpt_classifier_from_scratch(gpt_run, tmp_path):
    _, labelled = gpt_run
    out = tmp_path / "scratch"
    assert main(["train", "task=classify", "arch=gpt", "--data", str(labelled), *TINY, "tokenizer=char", *QUICK,
                 "--out", str(out)]) == 0
    assert isinstance(load_checkpoint(out).model, GPTClassifier)


def test_pairs_that_do_not_exist_are_refused_in_one_line(gpt_run, shared_run, shared_file, tmp_path, capsys):
    base, labelled = gpt_run
    cls = shared_run("gpt_classifier")  # train task=classify init_from=gpt_base
    assert main(["train", "task=translate", f"init_from={base}", "--data", str(labelled), *QUICK, "--out",
                 str(tmp_path / "t")]) == 2
    line = error_line(capsys)
    assert "holds a gpt model; task=translate starts from seq2seq" in line
    assert "task=classify from encoder or gpt or gpt-classifier" in line and "task=lm from gpt" in line
    assert not (tmp_path / "t" / "best").exists()
    text = shared_file("verse.txt")
    assert main(["train", "task=lm", f"init_from={cls}", "--data", str(text), *QUICK, "--out",
                 str(tmp_path / "l")]) == 2
    assert "holds a gpt-classifier model; task=lm starts from gpt" in error_line(capsys)
    assert main(["train", "task=lm", "pooling=last", "--data", str(text), *QUICK, "--out", str(tmp_path / "p")]) == 2
    assert "task=lm builds a language model (GPT) and has no classes to learn" in error_line(capsys)


def test_a_classifier_starts_from_a_hugging_face_gpt_folder_with_lora_too(gpt_run, tmp_path, capsys):
    transformers = pytest.importorskip("transformers", reason="a dev dependency: it writes the folder")
    from test_open_models import write_tokenizer

    _, labelled = gpt_run
    folder = tmp_path / "gpt2"
    config = transformers.GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2, n_positions=64, bos_token_id=0,
                                     eos_token_id=0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    write_tokenizer(folder)
    for extra, name in (([], "full"), (["lora_rank=2"], "lora")):
        out = tmp_path / name
        assert main(["train", "task=classify", f"init_from={folder}", "--data", str(labelled), *extra, *QUICK,
                     "--out", str(out)]) == 0
        ckpt = load_checkpoint(out)
        assert isinstance(ckpt.model, GPTClassifier) and ckpt.model_config.max_len == 64  # the folder's positions
        capsys.readouterr()
        assert main(["classify", "--ckpt", str(out), "a fine film"]) == 0
        assert capsys.readouterr().out.split("\t")[0] in ("0", "1")
