"""The one-file model (``scratchformer/paper.py``) is the library's model: the weights of ``Seq2SeqTransformer``,
``GPT`` and ``EncoderClassifier`` built with the paper's settings load into it and give the same outputs, with
padding in the batch, in eval mode and in training mode (dropout in the same places). ``paper_train.py``, beside
it, trains it on the copy task from an empty folder with torch alone (run here with a smaller budget)."""

from __future__ import annotations

import ast
import copy
import math
import re
import shutil
from pathlib import Path

import pytest
import torch

from scratchformer import GPT, EncoderClassifier, ModelConfig, Seq2SeqTransformer, paper
from scratchformer.interop.paper import PAPER_SETTINGS, from_paper, paper_state_dict, to_paper

PAPER_FILE = Path(paper.__file__)
# the paper's settings, spelled out for every family (the GPT family's defaults are GPT-2's, not the paper's)
PAPER = dict(norm="post", activation="relu", positional="sinusoidal", scale_embeddings=True)
SIZES = dict(vocab_size=41, d_model=48, n_heads=4, n_layers=3, d_ff=96, max_len=40)


def _perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Every weight moved off its initial value (LayerNorm gains 1 and biases 0 included), so that two
    parameters swapped by the mapping cannot go unnoticed."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model


def _library(arch: str, dropout: float = 0.0) -> torch.nn.Module:
    extra = {"seq2seq": dict(tie_embeddings=True), "gpt": dict(tie_embeddings=True), "encoder": dict(n_classes=3)}
    config = ModelConfig(arch=arch, dropout=dropout, **SIZES, **PAPER, **extra[arch])
    return _perturbed({"seq2seq": Seq2SeqTransformer, "gpt": GPT, "encoder": EncoderClassifier}[arch](config))


def _batch(rows: int = 4, length: int = 11, lengths: tuple[int, ...] = (11, 7, 3, 9)) -> torch.Tensor:
    """Token ids with right padding: row i has ``lengths[i]`` real tokens, then <pad> (id 0)."""
    ids = torch.randint(4, SIZES["vocab_size"], (rows, length))
    for i, n in enumerate(lengths):
        ids[i, n:] = 0
    ids[:, 0] = 1  # <bos>, as a decoder input starts
    return ids


def _outputs(arch: str, library: torch.nn.Module, one_file: torch.nn.Module, seed: int = 0):
    """(library output, one-file output, the positions to compare) for one padded batch; both runs start from
    the same random state, so that in training mode they draw the same dropout masks."""
    src, tgt = _batch(), _batch(length=9, lengths=(9, 4, 6, 2))
    runs = {"seq2seq": (lambda m: m(src, tgt), lambda m: m(src, tgt), tgt != 0),
            "gpt": (lambda m: m(tgt, tgt != 0), lambda m: m(tgt), tgt != 0),
            "encoder": (lambda m: m(src), lambda m: m(src), None)}[arch]
    torch.manual_seed(seed)
    ours = runs[0](library)
    torch.manual_seed(seed)
    theirs = runs[1](one_file)
    real = runs[2]  # the outputs at padded target positions are read by nothing: compare the real ones
    return (ours, theirs) if real is None else (ours[real], theirs[real])


@pytest.mark.parametrize("arch", ["seq2seq", "gpt", "encoder"])
def test_the_one_file_model_gives_the_library_models_outputs_with_padding(arch):
    library = _library(arch).eval()
    one_file = to_paper(library)
    assert type(one_file).__module__ == "scratchformer.paper" and not one_file.training
    with torch.no_grad():
        ours, theirs = _outputs(arch, library, one_file)
    assert ours.abs().max() > 0.5  # outputs worth comparing, not all near zero
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ["seq2seq", "gpt", "encoder"])
def test_dropout_is_in_the_same_places_in_training_mode(arch):
    """Training mode, dropout 0.3, the same random state: the same outputs, so the one-file model drops the
    same activations as the library (after the embeddings, and each sub-layer's output before Add & Norm)."""
    library = _library(arch, dropout=0.3).train()
    one_file = to_paper(library)
    assert one_file.training
    ours, theirs = _outputs(arch, library, one_file, seed=5)
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=0)
    again, _ = _outputs(arch, library, one_file, seed=6)
    assert (again - ours).abs().max() > 1e-3  # dropout did drop: another seed, other outputs


def test_gradients_agree_so_one_training_step_is_the_same():
    library = _library("seq2seq")
    one_file = to_paper(library)
    src, tgt = _batch(), _batch(length=9, lengths=(9, 4, 6, 2))
    for model in (library, one_file):
        logits = model(src, tgt)
        torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0).backward()
    as_weights = copy.deepcopy(library)  # the library's gradients in place of its weights, then renamed
    with torch.no_grad():
        for weight, grad in zip(as_weights.parameters(), library.parameters()):
            weight.copy_(grad.grad)
    grads = paper_state_dict(as_weights)
    for name, p in one_file.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize("arch", ["seq2seq", "gpt", "encoder"])
def test_weights_go_back_unchanged(arch):
    library = _library(arch)
    back = from_paper(to_paper(library), library.config)
    assert type(back) is type(library)
    for name, value in library.state_dict().items():
        assert torch.equal(back.state_dict()[name], value), name


def test_a_model_with_other_settings_is_refused_naming_them():
    with pytest.raises(ValueError, match=r"norm='pre'.*activation='gelu'.*positional='learned'"):
        to_paper(GPT(ModelConfig(arch="gpt", **SIZES)))  # GPT-2's settings, the gpt family's defaults
    with pytest.raises(ValueError, match="qk_norm=True"):
        to_paper(Seq2SeqTransformer(ModelConfig(arch="seq2seq", qk_norm=True, **SIZES)))
    assert set(PAPER) <= set(PAPER_SETTINGS)


def test_make_model_is_the_base_model_of_table_3():
    """With a shared vocabulary of 37,000 tokens the base model has 63,082,496 parameters, the count the
    library's ``paper-base`` preset gives too, and the number ``make_model``'s docstring and pages 1 and 2 give
    (Table 3 lists 65M; page 2 says why the gap is not explained)."""
    with torch.device("meta"):  # shapes only, no memory
        model = paper.make_model(37000)
        library = Seq2SeqTransformer(ModelConfig.preset("paper-base"))
    n = sum(p.numel() for p in model.parameters())
    assert n == sum(p.numel() for p in library.parameters()) == 63_082_496
    assert f"{n:,}" in paper.make_model.__doc__
    for page in ("01-big-picture.md", "02-tokens-and-embeddings.md"):
        assert f"{n:,}" in (PAPER_FILE.parents[2] / "docs" / page).read_text(encoding="utf-8"), page


def test_init_weights_zeroes_every_bias_and_torch_only_the_attention_ones():
    """``init_weights``'s docstring: ``torch.nn.Transformer`` draws its matrices Xavier-uniform but zeroes only
    the attention biases; the feed-forward biases keep ``nn.Linear``'s default. The one-file model zeroes all."""
    torch.manual_seed(0)
    reference = torch.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                     dim_feedforward=32, batch_first=True)
    layer = reference.encoder.layers[0]
    assert not layer.self_attn.in_proj_bias.any() and not layer.self_attn.out_proj.bias.any()
    assert layer.linear1.bias.abs().min() > 0 and layer.linear2.bias.abs().min() > 0
    model = paper.make_model(20, n_layers=1, d_model=16, d_ff=32, n_heads=2)
    biases = [m.bias for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(biases) == 16 and not any(b.any() for b in biases)  # 4 + 8 attention, 2 + 2 feed-forward: all 0


def test_padding_at_the_end_changes_nothing_and_in_front_breaks_gpt_and_the_classifier():
    """What the GPT and classifier docstrings warn of: right padding gives the same outputs at the real tokens;
    left padding gives the GPT's first query no key at all (NaN everywhere) and moves the classifier's tokens to
    other positions (other logits)."""
    torch.manual_seed(0)
    sizes = dict(n_layers=2, d_model=16, d_ff=32, n_heads=2, dropout=0.0)
    gpt, classifier = paper.GPT(20, **sizes).eval(), paper.Classifier(20, 3, **sizes).eval()
    ids, pad = torch.tensor([[5, 6, 7, 8]]), torch.zeros(1, 2, dtype=torch.long)
    right, left = torch.cat([ids, pad], 1), torch.cat([pad, ids], 1)
    with torch.no_grad():
        torch.testing.assert_close(gpt(right)[:, :4], gpt(ids), atol=1e-6, rtol=0)
        torch.testing.assert_close(classifier(right), classifier(ids), atol=1e-6, rtol=0)
        assert gpt(left).isnan().all()
        assert (classifier(left) - classifier(ids)).abs().max() > 1e-2
    assert "itself and the" in paper.GPT.__doc__ and "Pad at the end" in paper.Classifier.__doc__


def test_the_one_file_model_imports_only_torch_and_fits_in_400_lines():
    tree = ast.parse(PAPER_FILE.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "math", "torch"}, imported
    assert len(PAPER_FILE.read_text(encoding="utf-8").splitlines()) <= 400
    assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))  # no relative imports


def test_padding_changes_nothing_and_the_future_is_hidden():
    """The two masks of the one-file model: a sentence gives the same logits alone and padded in a batch,
    and changing a later target token changes no earlier logit."""
    model = paper.make_model(30, n_layers=2, d_model=32, d_ff=64, n_heads=4, dropout=0.0).eval()
    src, tgt = torch.randint(4, 30, (1, 5)), torch.randint(4, 30, (1, 6))
    pad = torch.zeros(1, 3, dtype=torch.long)
    with torch.no_grad():
        alone = model(src, tgt)
        padded = model(torch.cat([src, pad], 1), torch.cat([tgt, pad], 1))[:, :6]
        later = tgt.clone()
        later[0, 5] = 4 if tgt[0, 5] != 4 else 5
        changed = model(src, later)
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=0)
    torch.testing.assert_close(changed[:, :5], alone[:, :5], atol=1e-6, rtol=0)
    assert (changed[:, 5] - alone[:, 5]).abs().max() > 1e-3


# ------------------------------------------------- the one file runs: paper_train.py trains paper.py, torch only

TRAIN_FILE = PAPER_FILE.with_name("paper_train.py")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path.name}: a relative import does not run from an empty folder"
            found.add((node.module or "").split(".")[0])
    return found


def test_the_trainer_imports_torch_the_standard_library_and_paper_only():
    assert _imports(TRAIN_FILE) <= {"__future__", "argparse", "random", "time", "warnings", "torch", "paper"}
    assert len(TRAIN_FILE.read_text(encoding="utf-8").splitlines()) <= 300
    assert PAPER_FILE.name in TRAIN_FILE.read_text(encoding="utf-8")  # it says which file it needs


def _run_the_two_files(folder: Path, steps: int | None = None) -> list[str]:
    """``python paper_train.py [--steps N]`` with the two files alone in ``folder``, every ``scratchformer`` import
    made to fail (in a Python with torch alone: ``torch_alone.py``, one thread: the same numbers; where other work
    shares 2 cores, two threads wait on each other); the lines it prints."""
    from torch_alone import TorchAlone

    for source in (PAPER_FILE, TRAIN_FILE):
        shutil.copy(source, folder / source.name)
    argv = ["paper_train.py"] + ([] if steps is None else ["--steps", str(steps)])
    (folder / "home").mkdir()
    interpreter = TorchAlone(folder / "home")
    try:
        done = interpreter.run(folder, ["paper_train.py"], argv)
    finally:
        interpreter.close()
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


# The lowest loss label smoothing allows (page 10): the entropy of the smoothed target, V = 13 tokens, eps = 0.1
RIGHT, OTHER = 1 - 0.1 + 0.1 / 13, 0.1 / 13
FLOOR = -(RIGHT * math.log(RIGHT) + 12 * OTHER * math.log(OTHER))


def test_the_two_files_train_the_copy_task_from_an_empty_folder(tmp_path):
    """The learner's run with a smaller budget: it prints the loss as it goes, never below label smoothing's floor
    (0.537), and ends with the exact match of greedy decoding on held-out strings, as a percentage at the end of
    its last line."""
    lines = _run_the_two_files(tmp_path, steps=300)
    losses = [float(m.group(1)) for line in lines if (m := re.match(r"step +\d+/300 +loss ([\d.]+)", line))]
    assert round(FLOOR, 3) == 0.537
    assert len(losses) == 3 and FLOOR - 1e-3 < losses[-1] < 0.7 < losses[0], losses
    match = re.search(r"exact match ([\d.]+) %$", lines[-1])
    assert match and float(match.group(1)) >= 90, lines[-1]


@pytest.mark.slow
def test_the_first_read_ends_with_a_trained_model_on_the_loss_floor(tmp_path):
    """The run as the index and page 10 describe it, ``python paper_train.py``: at least 99 % of the 1,000
    held-out strings copied exactly, and a last loss on label smoothing's floor of 0.537."""
    lines = _run_the_two_files(tmp_path)
    last = re.search(r"^last loss ([\d.]+)", "\n".join(lines), re.M)
    assert last and abs(float(last.group(1)) - FLOOR) < 0.01, lines[-3:]
    match = re.search(r"exact match ([\d.]+) %$", lines[-1])
    assert match and float(match.group(1)) >= 99, lines[-1]
