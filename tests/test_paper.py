"""The one-file model (``scratchformer/paper.py``) is the library's model: the weights of ``Seq2SeqTransformer``,
``GPT`` and ``EncoderClassifier`` built with the paper's settings load into it and give the same outputs, with
padding in the batch, in eval mode and in training mode (dropout in the same places). The copy-task loop of
notebook 5 trains it (``tests/test_notebooks.py`` runs that loop and asks for 80 % exact match)."""

from __future__ import annotations

import ast
import copy
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
    """65M parameters with the paper's 37,000-token shared vocabulary (Table 3 lists 65 x 10^6), the count the
    library's ``paper-base`` preset gives too."""
    with torch.device("meta"):  # shapes only, no memory
        model = paper.make_model(37000)
        library = Seq2SeqTransformer(ModelConfig.preset("paper-base"))
    n = sum(p.numel() for p in model.parameters())
    assert n == sum(p.numel() for p in library.parameters())
    assert round(n / 1e6) == 63  # 63.1M: the 65M of Table 3 counted a slightly different vocabulary


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
