"""``scratchformer train`` and ``prepare``: the settings resolved once, then the run (``train.start.train``: its
session, its data, the task, the model and the loop), or the data prepared (``data.load_data``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from scratchformer.data.roles import DataFiles
from scratchformer.errors import DataError
from scratchformer.registry import format_metric
from scratchformer.settings.resolve import Resolved, resolve, resume_settings
from scratchformer.settings.values import parse_overrides


def settings_of(args: argparse.Namespace) -> Resolved:
    """The settings of ``train`` or ``prepare``: resolved from the command line (``settings/resolve.py``), or
    for ``--resume`` the run's own, changed only where a resumed run may change."""
    files = DataFiles.of(args.data, args.val or (), args.test or ())
    overrides = parse_overrides(args.overrides)
    if args.data_dir:
        overrides["data_dir"] = args.data_dir
    if not getattr(args, "resume", False):
        return resolve(preset=args.preset, config=args.config, data=files, overrides=overrides)
    from scratchformer.train.resume import saved_run

    given = resolve(preset=args.preset, config=args.config, data=files) if (args.preset or args.config or files) \
        else None
    return resume_settings(saved_run(Path(args.out)), given, overrides)


def cmd_train(args: argparse.Namespace) -> int:
    """The settings of the command line, then the run (``train.start``), then what it found."""
    from scratchformer.train.start import train

    result = train(settings_of(args), Path(args.out), resume=args.resume, quiet=args.quiet)
    if result.is_main:
        _report(result, Path(args.out), args.quiet)
    return 0


def _report(result: Any, out: Path, quiet: bool) -> None:
    from scratchformer.checkpoints import BEST, KEPT

    kept = _kept(out)  # the model the last lines measure (the evaluations during the run measured others)
    before = "validation before averaging (best/)" if (out / BEST).is_dir() else "validation before averaging"
    for split, metrics in ((before, result.before_averaging), (f"validation of {kept}", result.val),
                           (f"test of {kept}", result.test)):
        if metrics:
            print(f"{split}: " + ", ".join(f"{k} {format_metric(k, v)}" for k, v in metrics.items()))
    if result.samples and not quiet:
        print("samples:")
        for line in result.samples:
            print("  " + line)
    why = f" (stopped: {result.stop_reason})" if result.stop_reason else ""
    kept = [str(out / name) for name in KEPT if (out / name).is_dir()]
    where = f"{', '.join(kept[:-1])} and {kept[-1]}" if len(kept) > 1 else "".join(kept)
    print(f"trained {result.step:,} steps in {result.seconds:.0f} s{why}; checkpoints in {where}")


def _kept(out: Path) -> str:
    """The checkpoint a run's final lines measure, as a person reads it: ``best/ (step 400)``."""
    from scratchformer.checkpoints import KEPT, read_meta

    name = next((n for n in KEPT if (out / n / "config.json").is_file()), None)
    if name is None:
        return "the final model"
    return f"{name}/ (step {read_meta(out / name).get('step', 0):,})"


def cmd_prepare(args: argparse.Namespace) -> int:
    """Prepare the corpora a ``train`` with the same settings and files would read (and say where, how big)."""
    from scratchformer.atomic import size_text
    from scratchformer.data.corpus.cache import ENV_VAR, corpora_dir
    from scratchformer.data.pipeline import load_data
    from scratchformer.data.prepared import describe
    from scratchformer.train.fine_tune import starting_point

    run = settings_of(args)
    if not run.task.data.prepared:
        raise DataError(f"task={run.task.name} {run.task.data.held}; nothing is prepared")
    base = starting_point(run) if run.train.init_from else None
    data = load_data(run.task, run.train, run.data, tokenizer=base.tokenizer() if base is not None else None,
                     training=False, quiet=args.quiet)
    prepared, tokenizer = data.prepared, data.tokenizer
    assert tokenizer is not None
    print(f"prepared corpora in {corpora_dir()} (set by ${ENV_VAR}); tokenizer: {tokenizer.kind}, "
          f"{tokenizer.vocab_size:,} tokens")
    for p in prepared:
        how = "reused (prepared before)" if p.reused else f"wrote it in {p.corpus.manifest['seconds']:.1f} s"
        print(f"  {p.source}: {describe(p.corpus)}; {size_text(p.corpus.n_bytes())} in {p.corpus.path}; {how}")
    total = sum(p.corpus.n_bytes() for p in prepared)
    print(f"{size_text(total)} on disk; `scratchformer train` with the same files and settings reads them")
    return 0
