"""Training: a run's session, its loop, and everything the loop uses; it receives ready data.

    start.py       train (the Python entry); trainer_for: the task and the model for ready data, and the loop
    session.py     open_run: the run directory (new, or resumed), the device, the processes of a torchrun
    trainer.py     Trainer: the loop, readable top to bottom as steps
    steps.py       one step's micro-batches and backward; an evaluation
    optim.py       AdamW and its parameter groups, the learning-rate schedules (muon.py: Muon)
    precision.py   mixed precision (bf16, fp16 with loss scaling); device.py: the device, DDP, compile
    budget.py      a time budget (max_time) as a number of steps
    averaging.py   the mean of the last checkpoints, a moving average of the weights
    resume.py      which checkpoint a resumed run continues from; interrupt.py: stopping on a signal
    logger.py      metrics.jsonl and TensorBoard; progress.py: the progress bar or log lines
    run_info.py    what a run says about itself at its start and in config.json
    fine_tune.py   a classifier started from a pretrained encoder (init_from)

The settings a run trains with are resolved before it starts (``settings/``), its data read by the data
pipeline (``data.load_data``), the task object that batches it named by the task registry (``tasks/``).
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["train", "trainer_for"], "scratchformer.train.start"),
    **dict.fromkeys(["Session", "open_run"], "scratchformer.train.session"),
    **dict.fromkeys(["Trainer"], "scratchformer.train.trainer"),
    "TrainResult": "scratchformer.train.result",
    "TrainingError": "scratchformer.errors",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
