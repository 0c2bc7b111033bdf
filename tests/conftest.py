"""Shared helpers: tiny configurations that run in milliseconds on 2 CPU cores, the shared data folder, and
the ``slow`` marker (tests of many seconds; CI runs them all, ``-m "not slow"`` skips them while editing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from scratchformer import ModelConfig
from scratchformer.data.roles import DataFiles
from scratchformer.settings.resolve import Resolved

torch.set_num_threads(min(2, torch.get_num_threads()))

REPO = Path(__file__).resolve().parents[1]
# The real datasets (Tiny Shakespeare, Multi30k, SST-2): $SCRATCHFORMER_DATA, else ../shared/data.
SHARED_DATA = Path(os.environ.get("SCRATCHFORMER_DATA") or REPO.parent / "shared" / "data").resolve()


def needs_data(*files: str) -> pytest.MarkDecorator:
    """Skip, saying why, unless the shared data folder holds every one of ``files``."""
    missing = [f for f in files if not (SHARED_DATA / f).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not found in {SHARED_DATA} "
                                                    "(set SCRATCHFORMER_DATA)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes many seconds (CI runs it; -m 'not slow' skips it)")


def exactly(settings: dict, data=None) -> Resolved:
    """A run's settings exactly as given, none from the task's defaults (``resolve`` adds those): for tests that
    choose every setting that matters. ``data``: the files by role, or ``--data`` paths."""
    return Resolved(dict(settings), dict.fromkeys(settings, "given"), DataFiles.of(data))


def task_of(settings: dict, data=None):
    """The task of ``exactly(settings, data)``, built as a run builds it (``tasks.build_task``), quietly."""
    from scratchformer.tasks import build_task

    run = exactly(settings, data)
    return build_task(run.train, run.model, run.data, log=lambda line: None)


def tiny(arch: str, **overrides) -> ModelConfig:
    """A tiny config of the family ``arch`` (any the registry lists: one that reads pixels gets 8 x 8 images in
    patches of 2 instead of a vocabulary)."""
    from scratchformer.families import family

    if family(arch).reads == "pixels":
        base = dict(arch=arch, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, image_size=8, patch_size=2,
                    channels=3)
    else:
        base = dict(arch=arch, vocab_size=37, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=48, dropout=0.0)
    return ModelConfig(**{**base, **overrides})


def tiny_model(arch: str, **overrides) -> torch.nn.Module:
    """A tiny model of the family ``arch`` (3 classes for a classifier) whose output depends on every weight: a head
    that starts at zero (a ViT's) is drawn at random, or no gradient would flow back from it."""
    from scratchformer.families import family, parts
    from scratchformer.models import build_model

    entry = family(arch)
    model = build_model(tiny(arch, **{**({"n_classes": 3} if entry.classifies else {}), **overrides}))
    if entry.zero_head:
        torch.nn.init.normal_(parts(model).head.weight)
    return model


def inputs_for(config: ModelConfig, batch: int = 2, length: int = 9) -> dict[str, torch.Tensor]:
    """A batch for the forward of a model of ``config``'s family, by what the registry says it reads: token ids
    with a padded second row (an encoder-decoder's source, and a target of its own), or images."""
    from scratchformer.families import family

    entry, gen = family(config.arch), torch.Generator().manual_seed(1)
    if entry.reads == "pixels":
        return {"images": torch.rand(batch, config.channels, config.image_size, config.image_size, generator=gen)}
    ids = torch.randint(4, config.vocab_size, (batch, length), generator=gen)
    ids[1:, -3:] = config.pad_id
    if entry.two_stacks:
        return {"src": ids, "tgt": torch.randint(4, config.target_vocab_size, (batch, length - 3), generator=gen)}
    return {"input_ids": ids}


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def serve_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The models the server's tests serve (``test_serve.make_runs``), trained once for both of their modules."""
    from test_serve import make_runs

    return make_runs(tmp_path_factory.mktemp("serve-runs"))


@pytest.fixture(autouse=True, scope="session")
def _prepared_corpora_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory):
    """Prepared corpora go to a folder of this test session, never the user's cache (tests that count
    preparations point SCRATCHFORMER_CORPORA at a folder of their own)."""
    before = os.environ.get("SCRATCHFORMER_CORPORA")
    os.environ["SCRATCHFORMER_CORPORA"] = str(tmp_path_factory.mktemp("corpora"))
    yield
    if before is None:
        os.environ.pop("SCRATCHFORMER_CORPORA", None)
    else:
        os.environ["SCRATCHFORMER_CORPORA"] = before
