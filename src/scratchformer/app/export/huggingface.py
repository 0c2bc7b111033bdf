"""``scratchformer export --format hf``: a checkpoint (or run directory, or Hugging Face folder) as a ``transformers``
model directory. This gathers what the writer (``interop/hf_export.py``) is given: the model, its config, its
tokenizer and chat template, and its model card's rows: the run's name, where it came from (steps, task, data) and
its metrics (the run's ``metrics.jsonl``: for each split, the record at the exported step where there is one, else
the latest)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from scratchformer.checkpoints import load_checkpoint, read_meta, resolve, run_of
from scratchformer.interop.hf_export import CardRows, HFExport, write_hf

__all__ = ["card_rows", "export_hf"]


def export_hf(ckpt: str | os.PathLike, out: str | os.PathLike, *, hf_class: str | None = None,
              force: bool = False) -> HFExport:
    """Export the checkpoint (or run directory, or Hugging Face folder) ``ckpt`` to the directory ``out``
    (``interop.hf_export.write_hf``). ``hf_class``: one of ``HF_CLASSES`` (default: by family)."""
    loaded = load_checkpoint(ckpt)
    loaded.check_tokenizer("export --format hf")  # the export carries the tokenizer: refused before any work
    ckpt_dir = resolve(ckpt)
    meta = {"model": loaded.model_config.to_dict(), **loaded.extra} if "folder" in loaded.extra else None
    return write_hf(loaded.model, loaded.model_config, loaded.tokenizer, out, card_rows(ckpt_dir, meta or
                                                                                       read_meta(ckpt_dir)),
                    hf_class=hf_class, task=loaded.task, labels=loaded.extra.get("labels"),
                    chat_template=loaded.chat_template, force=force)  # a tuned run's template, else its tokenizer's


def card_rows(ckpt_dir: Path, meta: dict[str, Any]) -> CardRows:
    """The model card's rows for the checkpoint ``ckpt_dir`` whose ``config.json`` is ``meta`` (a folder's: its
    model config and ``hf_architecture``)."""
    model_cfg, train_cfg, step = meta["model"], meta.get("train", {}), int(meta.get("step", 0))
    run = _run_dir(ckpt_dir)
    if "folder" in meta:
        origin = (f"from the Hugging Face folder `{ckpt_dir.name}` (a `{meta['hf_architecture']}`), read into "
                  "scratchformer's blocks and written back.")
    else:
        data = meta.get("data") or (json.loads((run / "config.json").read_text()).get("data") if run and
                                    (run / "config.json").is_file() else None)
        from scratchformer.data.roles import DataFiles

        files = DataFiles.from_dict(data)
        names = [f"{Path(p).name} ({role})" for role, paths in (("train", files.train), ("val", files.val),
                                                                ("test", files.test)) for p in paths]
        source = train_cfg.get("dataset") or ", ".join(names) or "not recorded"
        origin = (f"from a checkpoint trained for {step} steps (task `{train_cfg.get('task', '?')}`, data: "
                  f"{source}).")
    return CardRows(run_of(ckpt_dir.resolve()).name, origin, _metrics_table(run, step), model_cfg, train_cfg)


def _run_dir(ckpt_dir: Path) -> Path | None:
    """The training run a checkpoint belongs to: the directory with its ``metrics.jsonl``."""
    for candidate in (ckpt_dir, ckpt_dir.parent):
        if (candidate / "metrics.jsonl").is_file():
            return candidate
    return None


def _metrics_table(run: Path | None, step: int) -> list[str]:
    from scratchformer.train.logger import read_metrics

    if run is None:
        return ["No `metrics.jsonl` was found beside the checkpoint, so no metrics are recorded here."]
    records = read_metrics(run)
    rows = []
    for split in ("train", "val", "test"):
        of_split = [r for r in records if r.get("split") == split]
        if not of_split:
            continue
        at_step = [r for r in of_split if r.get("step") == step]
        record = (at_step or of_split)[-1]
        values = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in record.items()
                           if k not in ("step", "split", "lr", "grad_norm", "tokens_per_s", "time_s"))
        rows.append(f"| {split} | {record['step']} | {values} |")
    if not rows:
        return ["The run's `metrics.jsonl` holds no metrics yet."]
    return ["| split | step | metrics |", "|---|---|---|", *rows, "",
            f"From the run's `metrics.jsonl`: for each split, the record at the exported checkpoint's step ({step}) "
            "where there is one, else the latest."]
