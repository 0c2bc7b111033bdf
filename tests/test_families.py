"""The family registry (``families.py``): every entry builds its model, names its parts where the model has them, is
counted by the parameter formula, and is what the commands ask: a format a family has no export to is refused in one
line before anything is written, naming the ones it has. A family added later is tested by these as it is listed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from conftest import REPO, inputs_for, tiny, tiny_model
from scratchformer import ConfigError, ModelConfig, count_parameters_formula
from scratchformer.app.cli import main
from scratchformer.families import FAMILIES, Family, family, parts, saved_family
from scratchformer.models import MODEL_CLASSES, build_model
from scratchformer.registry import TASKS

SAVED = Path(__file__).parent / "data" / "saved-runs"
FORMATS = ("onnx", "onnx-single", "torchscript", "hf", "gguf")


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_builds_its_model_with_its_parts_where_the_registry_says(name):
    entry = family(name)
    config = tiny(name, norm="pre", **({"n_classes": 3} if entry.classifies else {}))
    model = build_model(config)
    assert type(model) is MODEL_CLASSES[name] and type(model).__name__ == entry.model
    assert sum(p.numel() for p in model.parameters()) == count_parameters_formula(config)
    where = parts(model)
    assert len(where.blocks) == config.n_layers and where.final_norm is not None  # pre-LN: a final norm
    assert where.head_parameters() and all(p.requires_grad for p in where.head_parameters())
    out = model(**inputs_for(config))
    assert out.shape[-1] == (config.n_classes if entry.classifies else config.target_vocab_size)
    # another family's config is refused by the class, in one line naming both
    other = next(f for f in FAMILIES if family(f).model != entry.model)
    with pytest.raises(ConfigError, match=f"{entry.model} needs a config with arch='{name}', got arch='{other}'"):
        MODEL_CLASSES[name](tiny(other))


@pytest.mark.parametrize("name", FAMILIES)
def test_each_entry_is_complete_and_its_defaults_make_a_valid_config(name):
    entry = family(name)
    assert entry.reads in ("tokens", "pixels") and entry.output in ("next-token", "translation", "classes")
    assert set(entry.stacks) <= {"encoder", "decoder"} and entry.stacks
    assert set(entry.exports) <= set(FORMATS) and entry.init in ("xavier", "normal")
    assert entry.classifies == bool(entry.poolings)  # a classifier says how it pools; nothing else pools
    assert entry.classifier in ("", *FAMILIES) and (not entry.classifier or family(entry.classifier).classifies)
    config = tiny(name)
    assert all(getattr(config, k) == v for k, v in entry.defaults.items())
    assert config.pooling == (entry.poolings[0] if entry.poolings else "mean")


def test_the_families_are_the_config_s_choices_and_every_task_s_families_and_bases_are_listed():
    from scratchformer.nn.config import CHOICES

    assert CHOICES["arch"] == tuple(FAMILIES) == tuple(MODEL_CLASSES)
    for task in TASKS.values():
        assert set(task.families) | set(task.bases) <= set(FAMILIES), task.name
    with pytest.raises(ConfigError, match="arch='bert' is not one of"):
        family("bert")


def test_an_older_form_names_the_family_it_was_saved_as():
    assert saved_family({"arch": "gpt", "pooling": "last"}) == "gpt-classifier"
    assert saved_family({"arch": "gpt", "pooling": "mean"}) is None
    assert ModelConfig(**{**dataclasses.asdict(tiny("gpt")), "pooling": "last"}).arch == "gpt-classifier"


@pytest.fixture(scope="module")
def saved(shared_run) -> Path:
    """The saved runs of every family (``tests/data/saved-runs``), their stored paths pointed at their copy: the
    shared ``saved_runs``, read only."""
    return shared_run("saved_runs")


@pytest.mark.parametrize("name", [f for f in FAMILIES if (SAVED / f / "last").is_dir()])
def test_a_format_a_family_has_no_export_to_is_refused_in_one_line_naming_its_formats(saved, name, tmp_path, capsys):
    entry = family(name)
    for fmt in sorted(set(FORMATS) - set(entry.exports)):
        out = tmp_path / f"out-{fmt}"
        assert main(["export", "--ckpt", str(saved / name), "--format", fmt, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"holds {entry.title}, which has no --format {fmt} export" in err
        assert f"(its formats: {', '.join(entry.exports) or 'none yet'})" in err and not out.exists()


def test_the_commands_reference_says_what_adding_a_family_takes_and_lists_every_family_and_field():
    """The page a person adding a family reads: the model file and one entry, and every field an entry holds."""
    text = (REPO / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    section = text[text.index("## Model families"):]
    section = section[:section.index("\n## ", 4)]
    assert "one entry" in section and "families.py" in section and "models/" in section
    assert all(f"`{name}`" in section for name in FAMILIES)
    assert all(f"`{field.name}`" in section for field in dataclasses.fields(Family)), [
        f.name for f in dataclasses.fields(Family) if f"`{f.name}`" not in section]
    assert "(`task=classify arch=gpt`) builds the GPT that classifies, `gpt-classifier`" in section


def test_the_model_of_every_family_reads_its_parts_gradients_flow_through_them():
    """The parts the registry names are the model's own (a wrong path would find a module the forward skips)."""
    for name in FAMILIES:
        model = tiny_model(name, norm="pre")
        out = model(**inputs_for(model.config)).float()
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
        where = parts(model)
        for module in (where.embeddings, where.blocks[0], where.blocks[-1], where.final_norm, where.head):
            assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in module.parameters()), (name, module)
