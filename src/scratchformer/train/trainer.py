"""The training loop: one explicit function, no framework.

    for step in range(start, max_steps):
        seed the RNGs with (seed, step, rank)          -> dropout is reproducible, resume is exact
        lr = lr_at(step)                               -> a pure function of the step
        batch = task.global_batch(step)                -> a pure function of (seed, step)
        for each micro-batch of this rank's share:     -> gradient accumulation, DDP
            loss = summed loss / tokens in the *global* batch   (so any split computes the same)
            loss.backward()
        clip, AdamW step; stop cleanly on a NaN/inf loss
        ema_decay > 0: update the weights' moving average      -> evaluated and saved instead (averaging.py)
        every eval_every steps: evaluate, keep best/ and last/, early stopping

A run directory holds ``config.json`` (the resolved configuration), ``metrics.jsonl``, TensorBoard
files under ``tensorboard/``, and the checkpoints ``last/`` and ``best/`` (see ``checkpoint.py``).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..config import LOWER_IS_BETTER, ModelConfig, TrainConfig
from ..models import build_model
from .averaging import WeightAverage
from .checkpoint import Checkpoint, find_checkpoint, load_checkpoint, load_trainer_state, read_meta, save_checkpoint
from .distributed import DistInfo, barrier, broadcast_flag, cleanup, init_distributed
from .logger import MetricsLogger
from .optim import lr_at, make_optimizer, set_lr
from .tasks import Batch, Task, build_task, resolve_model_config, split_rows


class TrainingError(RuntimeError):
    """Training cannot go on (a NaN/inf loss, say); the last good checkpoint is kept."""


class RunDirError(ValueError):
    """The output directory cannot be used as asked (it exists, or there is nothing to resume)."""


@dataclass
class TrainResult:
    out_dir: Path
    model: nn.Module
    task: Task
    model_config: ModelConfig
    step: int
    val: dict[str, float] = field(default_factory=dict)  # validation metrics of the checkpoint kept in best/
    test: dict[str, float] = field(default_factory=dict)  # test metrics of that same checkpoint
    last_val: dict[str, float] = field(default_factory=dict)  # the last evaluation's validation metrics
    samples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    stopped_early: bool = False
    is_main: bool = True  # False on the other ranks of a distributed run (they print nothing)


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda was asked for, but no CUDA GPU is available")
    return torch.device(name)


def check_out_dir(out: Path, resume: bool) -> None:
    """Refuse to overwrite a run; refuse to resume from nothing. Called before any work is done."""
    if resume:
        if not (out / "last" / "config.json").is_file():
            raise RunDirError(f"nothing to resume: {out / 'last'} is not a checkpoint")
    elif out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirError(f"{out} already exists and is not empty; choose another --out, or add --resume")


def _seed_step(seed: int, step: int, rank: int) -> None:
    torch.manual_seed((seed * 1_000_003 + step) * 131 + rank)


def train(model_kw: dict[str, Any], cfg: TrainConfig, out_dir: str | Path, data_paths: list[str] | None = None,
          *, resume: bool = False, echo: Callable[[str], None] | None = None) -> TrainResult:
    """Train a model; returns it with its final validation and test metrics.

    ``model_kw``: ``ModelConfig`` fields chosen by the user (the rest follow from the task and data).
    """
    out = Path(out_dir)
    from ..config import ConfigError

    model_kw = {**model_kw, "arch": model_kw.get("arch", cfg.arch)}  # the task decides the family
    if model_kw["arch"] != cfg.arch:
        raise ConfigError(f"arch={model_kw['arch']!r} does not fit task={cfg.task!r} (needs arch={cfg.arch!r})")
    device = pick_device(cfg.device)
    info = init_distributed(device)
    if info.enabled and device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    say = echo or (lambda s: print(s, file=sys.stderr))
    log = say if info.is_main else (lambda s: None)
    try:
        return _train(model_kw, cfg, out, data_paths or [], resume, device, info, log)
    finally:
        cleanup(info)


def _train(model_kw: dict[str, Any], cfg: TrainConfig, out: Path, data_paths: list[str], resume: bool,
           device: torch.device, info: DistInfo, log: Callable[[str], None]) -> TrainResult:
    check_out_dir(out, resume)
    if cfg.num_threads:
        torch.set_num_threads(cfg.num_threads)
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    run = find_checkpoint(cfg.init_from) if cfg.init_from else None  # a scratchformer run to start from?
    base = load_checkpoint(run) if run is not None else None
    if base is not None:  # its tokenizer, and by default inputs as long as its model takes
        model_kw = {"max_len": base.model_config.max_len, **model_kw}
    task = build_task(cfg, model_kw, data_paths, log, tokenizer=base.tokenizer if base else None)
    if base is not None:
        model = _classifier_from_run(base, str(run), model_kw, task, log)
        model_cfg = model.config
    elif cfg.init_from:
        model = _pretrained_classifier(cfg, model_kw, task, log)
        model_cfg = model.config
    else:
        model_cfg = resolve_model_config(task, model_kw)
        model = build_model(model_cfg)
    model = model.to(device)
    optimizer = make_optimizer(model, cfg)
    start_step, best_score, bad_evals = 0, math.inf, 0  # best_score: lower is better (see _score)
    average = WeightAverage(model, cfg.ema_decay) if cfg.ema_decay else None
    if resume:
        from safetensors.torch import load_model

        load_model(model, str(out / "last" / "model.safetensors"), device=str(device))
        state = load_trainer_state(out / "last")
        optimizer.load_state_dict(state["optimizer"])
        start_step, bad_evals = state["step"], state["bad_evals"]
        best_score = state.get("best_score", state.get("best_loss", math.inf))  # "best_loss": older runs
        if "trained_weights" in state:  # model.safetensors holds their average (ema_decay)
            model.load_state_dict(state["trained_weights"])
        if average is not None and "weight_average" in state:
            average.load_state(state["weight_average"])
        log(f"resuming {out} at step {start_step}")
    n_params = sum(p.numel() for p in model.parameters())
    if info.is_main:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"model": model_cfg.to_dict(), "train": cfg.__dict__,
                                                     "data": data_paths, "parameters": n_params}, indent=2))
    log(f"{cfg.task}: {model_cfg.arch} with {n_params:,} parameters (d_model {model_cfg.d_model}, "
        f"{model_cfg.n_layers} layers, {model_cfg.n_heads} heads), vocab {model_cfg.vocab_size}, "
        f"{info.world_size} process(es) on {device}")

    train_model: nn.Module = model
    if info.enabled:
        train_model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                          else None)
    if cfg.compile:
        train_model = torch.compile(train_model)  # type: ignore[assignment]
    metrics = MetricsLogger(out, enabled=info.is_main)
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if cfg.bf16 else contextlib.nullcontext

    def averaged() -> contextlib.AbstractContextManager[dict[str, torch.Tensor] | None]:
        """The model holds the averaged weights inside (when ema_decay is on); yields the trained ones."""
        return average.swapped_in(model) if average is not None else contextlib.nullcontext(None)

    def save(step: int, name: str) -> None:
        if info.is_main:
            state = {"optimizer": optimizer.state_dict(), "step": step, "best_score": best_score,
                     "bad_evals": bad_evals}
            extra = {**task.extra_meta, "data": [str(Path(p).resolve()) for p in data_paths]}
            with averaged() as trained:
                if average is not None:
                    state.update(trained_weights=trained, weight_average=average.state())
                save_checkpoint(out / name, model, task.tokenizer, model_cfg, cfg, step, state, extra)

    from tqdm.auto import tqdm

    bar = tqdm(total=cfg.max_steps, initial=start_step, disable=not info.is_main or None, dynamic_ncols=True,
               desc=cfg.task, file=sys.stderr)
    parts = info.world_size * cfg.grad_accum
    val: dict[str, float] = {}
    best_val: dict[str, float] = {}  # stays empty after a resume until validation improves again
    stopped_early = False
    window_tokens, window_start, window_loss, window_steps = 0, time.perf_counter(), 0.0, 0
    step = start_step
    model.train()
    try:
        for step in range(start_step, cfg.max_steps):
            _seed_step(cfg.seed, step, info.rank)
            lr = lr_at(step, cfg)
            set_lr(optimizer, lr)
            batch = task.global_batch(step)
            count = task.count(batch)
            shards = split_rows(batch, parts)[info.rank * cfg.grad_accum:(info.rank + 1) * cfg.grad_accum]
            step_loss = accumulate_gradients(task, train_model, shards, count, cfg.label_smoothing, device,
                                             info.world_size, autocast)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or math.inf)
            if info.enabled:
                t = torch.tensor([step_loss], device=device)
                dist.all_reduce(t)
                step_loss = t.item()
            step_loss /= count
            if not (math.isfinite(step_loss) and math.isfinite(float(grad_norm))):
                raise TrainingError(f"the loss became {step_loss} at step {step + 1}; stopped. The last good "
                                    f"checkpoint is in {out / 'last'} (try a lower lr or more warmup_steps)")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if average is not None:
                average.update()
            done = step + 1
            window_tokens += task.n_tokens(batch)
            window_loss += step_loss
            window_steps += 1
            bar.update(1)
            if done % cfg.log_every == 0 or done == cfg.max_steps:
                elapsed = time.perf_counter() - window_start
                tps = window_tokens / max(elapsed, 1e-9)
                mean = window_loss / window_steps
                bar.set_postfix(loss=f"{mean:.4f}", lr=f"{lr:.2e}", tok_s=f"{tps:,.0f}")
                metrics.log(done, "train", loss=mean, lr=lr, grad_norm=float(grad_norm), tokens_per_s=tps,
                            time_s=time.perf_counter() - started)
                window_tokens, window_start, window_loss, window_steps = 0, time.perf_counter(), 0.0, 0
            is_eval = done % cfg.eval_every == 0 or done == cfg.max_steps
            stop = False
            if is_eval and info.is_main:
                with averaged():
                    val = _evaluate(task, model, "val")
                metrics.log(done, "val", **val, time_s=time.perf_counter() - started)
                bar.write(f"step {done}: " + ", ".join(f"{k} {v:.4g}" for k, v in val.items()))
                score = _score(val, cfg.select_by)
                if score < best_score:
                    best_score, bad_evals, best_val = score, 0, val
                    save(done, "best")
                else:
                    bad_evals += 1
                    stop = bool(cfg.patience) and bad_evals >= cfg.patience
            if info.is_main and ((is_eval and not cfg.save_every) or (cfg.save_every and done % cfg.save_every == 0)
                                 or done == cfg.max_steps or stop):
                save(done, "last")
            if is_eval:
                stop = broadcast_flag(stop, info)
                barrier(info)
                if stop:
                    log(f"early stopping at step {done}: no better validation {cfg.select_by} in {cfg.patience} "
                        "evaluations")
                    stopped_early = True
                    break
    finally:
        bar.close()
        metrics.close()

    result = TrainResult(out, model, task, model_cfg, step + 1 if cfg.max_steps > start_step else start_step,
                         val=best_val or val, last_val=val, stopped_early=stopped_early, is_main=info.is_main)
    if average is not None and average.updates:  # the model returned is the average (best/'s, if any)
        model.load_state_dict({**model.state_dict(), **average.average})
    if info.is_main:
        kept_step = result.step  # the step of the checkpoint the test metrics are measured on
        if (out / "best" / "model.safetensors").is_file():
            from safetensors.torch import load_model

            load_model(model, str(out / "best" / "model.safetensors"), device=str(device))
            kept_step = read_meta(out / "best")["step"]
        if cfg.test_at_end and task.has_split("test"):
            result.test = _evaluate(task, model, "test")
            MetricsLogger(out, tensorboard=False).log(kept_step, "test", **result.test)
        model.eval()
        result.samples = task.samples(model)
    result.seconds = time.perf_counter() - started
    return result


def _pretrained_classifier(cfg: TrainConfig, model_kw: dict[str, Any], task: Task,
                           log: Callable[[str], None]) -> nn.Module:
    """A classifier whose encoder is the pretrained BERT ``cfg.init_from`` (its head freshly initialised)."""
    from ..config import ConfigError
    from ..interop import bert_from_pretrained
    from ..pretrained import find_pretrained

    own = {"arch", "pooling", "max_len"}  # max_len here only limits the inputs (see ClassifyTask)
    clash = sorted(set(model_kw) - own)
    if clash:
        raise ConfigError(f"init_from={cfg.init_from} fixes the architecture; remove {', '.join(clash)}")
    folder = find_pretrained(cfg.init_from, cfg.data_dir)  # type: ignore[arg-type]
    n_classes = task.model_fields().get("n_classes", 2)
    model = bert_from_pretrained(folder, n_classes=n_classes, pooling=model_kw.get("pooling", "mean"))
    log(f"initialised from {folder} (the classification head is new)")
    return model.train()


def _classifier_from_run(base: Checkpoint, run: str, model_kw: dict[str, Any], task: Task,
                         log: Callable[[str], None]) -> nn.Module:
    """A classifier that starts from the encoder of a scratchformer checkpoint (a ``task=mlm`` run, say):
    the same architecture and weights, a new head for this task's classes. ``pooling`` and ``dropout``
    may be chosen anew; other model settings, if given, must agree with the checkpoint's."""
    from ..config import ConfigError
    from ..models import EncoderClassifier

    have = base.model_config
    if have.arch != "encoder":
        raise ConfigError(f"init_from={run} holds a {have.arch} model; a classifier starts only from an encoder "
                          "(a task=mlm or task=classify run)")
    clash = [f"{k}={v!r} (it has {getattr(have, k)!r})" for k, v in sorted(model_kw.items())
             if k not in ("arch", "pooling", "dropout", "max_len") and getattr(have, k) != v]
    if clash:
        raise ConfigError(f"init_from={run} fixes the architecture; remove or match {', '.join(clash)}")
    max_len = getattr(task, "max_len", have.max_len)
    if max_len > have.max_len:
        raise ConfigError(f"max_len={max_len} is longer than the max_len={have.max_len} of init_from={run}; "
                          f"set max_len={have.max_len} or less")
    fields = {**have.to_dict(), "n_classes": task.model_fields().get("n_classes", 2),
              "pooling": model_kw.get("pooling", have.pooling), "dropout": model_kw.get("dropout", have.dropout)}
    model = EncoderClassifier(ModelConfig(**fields))
    encoder = {k: v for k, v in base.model.state_dict().items() if not k.startswith(("head.", "pooler."))}
    missing, unexpected = model.load_state_dict(encoder, strict=False)
    assert not unexpected and all(k.startswith(("head.", "pooler.")) for k in missing), (missing, unexpected)
    log(f"initialised from {run} (step {base.step} of a task={base.train_config.task} run; the classification "
        "head" + (" and the pooler are" if model.pooler is not None else " is") + " new)")
    return model.train()


def accumulate_gradients(task: Task, model: nn.Module, shards: list[Batch], count: int, label_smoothing: float,
                         device: torch.device, world_size: int = 1,
                         autocast: Callable[[], Any] = contextlib.nullcontext) -> float:
    """Backward through this rank's micro-batches; returns their summed (not averaged) loss.

    Each micro-batch's summed loss is divided by ``count``, the number of loss terms in the *global*
    batch, so micro-batches of different sizes (or token counts) add up to exactly the full-batch
    gradient. With DDP, gradients are only all-reduced on the last micro-batch (``no_sync``).
    """
    total = 0.0
    for i, shard in enumerate(shards):
        if world_size == 1 and len(next(iter(shard.values()))) == 0:
            continue  # fewer rows than micro-batches: nothing to add
        shard = {k: v.to(device, non_blocking=True) for k, v in shard.items()}
        last = i == len(shards) - 1
        ctx = model.no_sync() if world_size > 1 and not last else contextlib.nullcontext()  # type: ignore[operator]
        with ctx:
            with autocast():
                loss_sum = task.loss_sum(model, shard, label_smoothing)
            # DDP averages gradients over ranks, hence the factor world_size
            (loss_sum * (world_size / count)).backward()
        total += loss_sum.item()
    return total


def _score(metrics: dict[str, float], select_by: str) -> float:
    """The validation metric ``select_by`` as a number where lower is better (accuracy 0.8 -> -0.8)."""
    return metrics[select_by] if select_by in LOWER_IS_BETTER else -metrics[select_by]


def _evaluate(task: Task, model: nn.Module, split: str) -> dict[str, float]:
    was_training = model.training
    model.eval()
    try:
        return task.evaluate(model, split)
    finally:
        model.train(was_training)
