"""What a run's checkpoint holds besides its weights, and where it is written: the trainer's state (optimizer, step,
early stopping, schedule, time spent, the loss scale, the weight average) saved with ``last/`` and ``best/``, and read
back by ``--resume``.

A run's checkpoints are whole (``checkpoints.save_checkpoint``: rank 0 writes ``model.safetensors``) or, for a
``shard=fsdp`` run, sharded (``fsdp_checkpoint.save_sharded``: every process writes its shard of the weights and of the
optimizer's moments) on however many processes it runs.
"""

from __future__ import annotations

from typing import Any

from scratchformer.checkpoints import save_checkpoint, write_beside_weights

__all__ = ["load_run_state", "save_run"]


def save_run(trainer: Any, name: str, step: int, extra: dict[str, Any]) -> None:
    """Save the checkpoint ``name`` of ``trainer`` (the run's ``trainer.Trainer``); ``extra``: an averaged/
    checkpoint's record, saved without the trainer's state. Rank 0 alone, or every process for a sharded run."""
    sharded = trainer.cfg.sharded  # the run's layout, whatever the number of processes now
    if not (trainer.info.is_main or trainer.sharded):
        return
    state = None if extra else {
        **({} if sharded else {"optimizer": trainer.optimizer.state_dict()}),  # sharded: in the shards
        "step": step, "best_score": trainer.best_score, "bad_evals": trainer.bad_evals,
        "schedule": trainer.schedule.to_dict(), "elapsed_s": trainer.elapsed(), **trainer.amp.state_dict()}
    extra = {**trainer.task.extra_meta, "data": trainer.run_settings.data.to_dict(), **extra}
    settings = {**trainer.resolved_cfg.__dict__, "max_steps": trainer.schedule.total}
    model, tokenizer, config = trainer.model, trainer.task.tokenizer, trainer.model_cfg
    with trainer.averaged() as trained:
        if trainer.average is not None and state is not None:
            state.update(trained_weights=trained, weight_average=trainer.average.state())
        if not sharded:
            save_checkpoint(trainer.out / name, model, tokenizer, config, settings, step, state, extra)
            return
        from scratchformer.train.fsdp_checkpoint import save_sharded

        save_sharded(trainer.out / name, model, trainer.optimizer, state or {},
                     lambda tmp, full: write_beside_weights(tmp, model, tokenizer, config, settings, step,
                                                            full if state is not None else None, extra), trainer.info)


def load_run_state(trainer: Any, state: dict[str, Any]) -> None:
    """Put a resumed run's ``trainer`` where its checkpoint's ``state`` left it (its weights are loaded already)."""
    if "optimizer" in state:  # a sharded checkpoint's was restored with the weights (fsdp_checkpoint.py)
        trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.amp.load_state_dict(state)  # fp16: the loss scale where the run left it
    trainer.step, trainer.bad_evals = state["step"], state["bad_evals"]
    trainer.best_score, trainer.spent_before = state["best_score"], state["elapsed_s"]
    if "trained_weights" in state:  # model.safetensors holds their average (ema_decay)
        trainer.model.load_state_dict(state["trained_weights"])
    if trainer.average is not None and "weight_average" in state:
        trainer.average.load_state(state["weight_average"])
