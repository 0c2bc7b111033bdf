"""Everything that reads or writes a model on disk, in one place.

- ``source``: where a model comes from (a run's checkpoint, a Hugging Face folder, a pretrained model's name),
  found once (``find_source``); the checkpoints a run keeps (``KEPT``: averaged/, best/, last/); ``CheckpointError``.
- ``checkpoint``: a checkpoint directory written atomically (``save_checkpoint``) and read back without executing
  code (``load_checkpoint``, ``load_model``), its trainer state for resuming.
- ``adapters``: a LoRA run's checkpoint: its adapters alone, its base named and fingerprinted.
- ``sharded``: a ``shard=fsdp`` run's checkpoint: each process's shard, read back whole or by rows.

Outside formats (Hugging Face, GGUF, ONNX, ``torch.nn``) are read and written in ``interop/``, below this package:
a checkpoint loads a Hugging Face folder through it.
"""

from scratchformer.lazy import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    **dict.fromkeys(["AVERAGED", "BEST", "KEPT", "LAST", "CheckpointError", "ModelSource", "find_checkpoint",
                     "find_source", "load_weights", "read_meta", "resolve", "run_of"],
                    "scratchformer.checkpoints.source"),
    **dict.fromkeys(["Checkpoint", "checkpoint_tokenizer", "load_checkpoint", "load_model", "load_trainer_state",
                     "save_checkpoint", "write_beside_weights"], "scratchformer.checkpoints.checkpoint"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
