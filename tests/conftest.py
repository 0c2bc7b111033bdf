"""Shared helpers: tiny configurations that run in milliseconds on 2 CPU cores, the shared data folder, the runs
every module reads (``shared_run``, made once: ``shared_runs.py``), how the suite splits over two workers, and the
markers: ``slow`` (tests of many seconds; CI runs them all, ``-m "not slow"`` skips them while editing) and
``processes`` (tests that start several processes that must not run beside each other: one worker runs them all)."""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import pytest
import torch

from scratchformer import ModelConfig
from scratchformer.data.roles import DataFiles
from scratchformer.settings.resolve import Resolved

# Two workers on two cores: one torch thread each (and for the Pythons they start); alone, two threads.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
else:
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
    config.addinivalue_line("markers", "processes: starts several processes (DDP, FSDP, torchrun) that must not run "
                                       "beside another such test; one worker runs them all")


# ------------------------------------------------------------------------------------ two workers

# The modules whose tests take longest, longest first (pytest --durations=0): they start first, so that the two
# workers end together. Every other module follows in its usual order; each goes whole to one worker (pyproject's
# `--dist loadfile`: its module fixtures are made once).
LONGEST_FIRST = ["test_paper.py", "test_first_read.py", "test_train.py", "test_fsdp.py", "test_your_data.py",
                 "test_commands.py", "test_benchmarks_parity.py", "test_explore_export.py", "test_open_models_out.py",
                 "test_gsm8k_parity.py", "test_export.py", "test_serve.py", "test_faults.py", "test_modern.py",
                 "test_linear_attention.py", "test_lens.py", "test_own_text.py", "test_corpora.py",
                 "test_whole_exports.py"]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first (a stable sort: each module's tests keep their order)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _one_at_a_time_if_it_starts_processes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A test marked ``processes`` (two DDP or FSDP processes, torchrun) holds a lock that both workers share, so
    that no two run side by side: two of them at once would be four processes on two cores, each waiting on its
    peers' collective calls. (xdist's ``loadgroup``, which would send them all to one worker, does not group under
    pytest 9.2, which no longer reads the node id xdist 3.8 rewrites.)"""
    if request.node.get_closest_marker("processes") is None:
        yield
        return
    import shared_runs

    with shared_runs.processes_lock(tmp_path_factory):
        yield


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


SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGHUP, signal.SIGUSR1]


@pytest.fixture(autouse=True)
def _leaves_the_process_as_it_found_it():
    """A command run in this process (``main([...])``) may set torch's thread count, seed the generators, install
    signal handlers, change the working directory or the environment, as it would in a process of its own: each test
    gets them back as it found them, so that no test depends on the one before it."""
    threads, cwd, env = torch.get_num_threads(), os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in SIGNALS}
    states = torch.get_rng_state(), random.getstate()
    yield
    torch.set_num_threads(threads)
    os.chdir(cwd)
    for key in set(os.environ) - set(env):
        del os.environ[key]
    os.environ.update(env)
    for s, handler in handlers.items():
        if signal.getsignal(s) is not handler and handler is not None:
            signal.signal(s, handler)
    torch.set_rng_state(states[0])
    random.setstate(states[1])


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory: pytest.TempPathFactory):
    """``shared_run(name) -> Path``: a tiny run of ``shared_runs.MAKERS`` made once for the whole test run (both
    workers), read-only: a test that writes into it copies it first (``shared_runs.copy_of``)."""
    import shared_runs

    return lambda name: shared_runs.get(tmp_path_factory, name)


@pytest.fixture(scope="session")
def shared_file(tmp_path_factory: pytest.TempPathFactory):
    """``shared_file(name) -> Path``: one of ``shared_runs.FILES`` (the text, labelled rows, pairs, records the
    shared runs read), read-only."""
    import shared_runs

    return lambda name: shared_runs.data_file(shared_runs.files_folder(tmp_path_factory), name)


@pytest.fixture(scope="session")
def serve_runs(shared_run) -> dict[str, Path]:
    """The models the server's tests serve, made once per test run for both workers (``shared_runs``): an
    instruction-tuned run (Alpaca's template), a Llama folder with a chat template, a plain GPT run (trained enough to
    write words, not its end-of-text token), each in a folder of its name (the server names a model by its folder).
    Read-only."""
    return {"instruct": shared_run("instruct"), "llama": shared_run("hf-llama-chatml") / "llama",
            "lm": shared_run("lm-records") / "lm"}


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
