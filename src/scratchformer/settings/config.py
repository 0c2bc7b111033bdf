"""Training configuration: everything about a run that is not the network (task, data, optimisation,
bookkeeping). Each choice field's allowed values are written once, as its ``Literal`` type (the task's, in the
task registry).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from scratchformer.registry import DEFAULT_TASK
from scratchformer.settings.checks import check_settings, parse_duration
from scratchformer.settings.choices import (
    DecayShape,
    Device,
    LossType,
    OptimizerKind,
    Precision,
    ReferenceKind,
    ScaleRewards,
    ScheduleKind,
    Shard,
    TokenizerKind,
    Truncate,
)


@dataclass
class TrainConfig:
    """Everything about a training run that is not the network: task, data, optimisation, bookkeeping.

    ``batch_size`` is the *global* batch (sequences per optimizer step), whatever ``grad_accum`` and the
    number of processes: each micro-batch / rank takes its share, so the run computes the same thing.
    """

    task: str = DEFAULT_TASK  # a task of the registry (registry/)
    dataset: str | None = None  # named (data/named.py): tinyshakespeare | multi30k | sst2 | instructions; digits
    data_dir: str | None = None
    # tokenization
    tokenizer: TokenizerKind = "char"
    bpe_vocab_size: int = 8000
    lowercase: bool = False
    # train the tokenizer on about this many characters of the training data, taken evenly across it
    # (sentencepiece's input_sentence_size; bounds the tokenizer trainer's memory on a huge corpus); 0 = all
    tokenizer_sample: int = 0
    # fine-tuning: task=classify starts from a pretrained BERT encoder, e.g. "all-MiniLM-L6-v2", or a folder with
    # config.json + model.safetensors + tokenizer.json, or a scratchformer run or checkpoint directory (a task=mlm
    # run, or a GPT run: the classifier reads its last real token); task=lm and task=instruct train further a Llama,
    # Qwen3 or GPT-2 folder, or a GPT run; task=translate an encoder-decoder run. Its architecture and tokenizer
    # are used
    init_from: str | None = None
    # which weights train (train/trainable.py): all; head (the output layer or the classifier's head); last:N (the
    # last N blocks, the final norm and the head). The others stay frozen, bit for bit
    trainable: str = "all"
    # LoRA (nn/lora.py): lora_rank > 0 freezes the init_from model and trains a rank-r update of each targeted
    # projection (a comma list of query, key, value, output, ff, or all; the LoRA paper's W^Q and W^V by default),
    # scaled by lora_alpha / lora_rank, on inputs dropped out with lora_dropout; a classifier's head trains too. The
    # run saves the adapters alone, with its base's hash. LoRA wants a higher lr than full fine-tuning (1e-3, say)
    lora_rank: int = 0
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    lora_targets: str = "query,value"
    # instruction tuning (task=instruct): the prompt template (data/templates.py): auto (unset: the base folder's chat
    # template where it has one, else Alpaca's), alpaca, chat (the base folder's, required), or a .jinja file
    template: str | None = None
    # preference tuning (task=dpo): beta, how far the tuned model may move from its start (the reference) for a given
    # preference (the DPO paper's beta; 0.1 when unset); reference: where the reference's log-probabilities come
    # from: precomputed (once, for every record, before the first step; saved with the run) or adapters (with LoRA:
    # the model with its adapters off, at every step). Unset: adapters with LoRA, else precomputed
    beta: float | None = None
    reference: ReferenceKind | None = None
    # learning from rewards (task=grpo, tasks/grpo.py): group_size answers sampled to each problem at temperature,
    # each at most completion_tokens long, scored by reward (answer, format, or path/to/file.py:function; several
    # with commas, weighted by reward_weights); advantages relative to the group (scale_rewards: group, batch or
    # none); trl's clipped loss (epsilon, epsilon_high: DAPO's separate upper bound; loss_type grpo, dr_grpo or
    # dapo), a KL term to the frozen start with beta > 0 (0: none, the default), updates optimizer steps per batch
    # of samples. batch_size counts problems: each step trains on batch_size x group_size answers
    group_size: int = 0
    completion_tokens: int = 0
    temperature: float | None = None
    reward: str | None = None
    reward_weights: str | None = None
    scale_rewards: ScaleRewards | None = None
    epsilon: float | None = None
    epsilon_high: float | None = None
    loss_type: LossType | None = None
    updates: int = 0
    # the built-in problems (dataset=arithmetic: task=grpo, and task=instruct to learn their form): numbers of up to
    # digits digits, joined by one of the operations (+, -, *)
    digits: int = 0
    operations: str | None = None
    # masked-token pretraining (task=mlm): the fraction of tokens chosen for prediction (BERT: 0.15)
    mask_prob: float = 0.15
    # built-in synthetic tasks (copy, reverse, sort); their bounds are checked where the strings are made
    # (data/synthetic.py)
    n_symbols: int = 10
    min_seq_len: int = 4
    max_seq_len: int = 16
    n_test: int = 1000
    train_limit: int = 0  # use only the first N training examples (tokens of text for lm); 0 = all
    eval_limit: int = 0  # evaluate on only the first N examples of each held-out split; 0 = all
    # sequences longer than the model's max_len: "warn" = truncate and say how many, "error" = refuse
    truncate: Truncate = "warn"
    # the share of the training rows (or, for lm, of the text) held out for validation when no
    # validation file is given: a seeded random sample of rows (stratified by label for classify), or for
    # language modelling the last part of the text
    val_fraction: float = 0.1
    # optimisation. The run ends at max_steps, or when max_time (e.g. "90s", "10m", "1.5h") has passed;
    # max_steps = 0 with max_time: the number of steps is estimated from the first steps' speed
    max_steps: int = 1000
    max_time: str | None = None
    batch_size: int = 64
    max_tokens: int = 0  # > 0: seq2seq/classify batches hold at most this many padded tokens instead
    grad_accum: int = 1
    lr: float = 1e-3
    min_lr: float = 0.0
    schedule: ScheduleKind = "cosine"
    warmup_steps: int = 100
    warmup_fraction: float | None = None  # warm-up as a share of max_steps (replaces warmup_steps when set)
    # cosine: the learning rate stays at lr after the warm-up until the last decay_fraction of the run, then
    # decays to min_lr along a half cosine (1.0: decay right after the warm-up)
    decay_fraction: float = 1.0
    # the decay's shape, from lr to min_lr (schedule=cosine): half a cosine, a straight line, or 1 - sqrt of the
    # share of the decay done (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed
    # Training Durations": for a constant rate followed by a cool-down)
    decay_shape: DecayShape = "cosine"
    weight_decay: float = 0.01
    # adamw (the paper's Adam, with decoupled weight decay) or muon: Muon for the weight matrices inside the
    # layers at muon_lr (scaled by the same schedule), AdamW at lr for the rest (train/muon.py)
    optimizer: OptimizerKind = "adamw"
    muon_lr: float = 0.02
    beta1: float = 0.9
    beta2: float = 0.98
    adam_eps: float = 1e-9
    label_smoothing: float = 0.0
    word_dropout: float = 0.0  # classify: drop each input token of a training example with this probability
    augment_shift: int = 0  # image: move each training image by up to this many pixels each way, anew every step
    grad_clip: float = 1.0  # max global gradient norm; 0 = off
    # > 0: evaluate and save a moving average of the weights over about 1 / (1 - ema_decay) steps (0.999,
    # say) instead of the last weights (Polyak averaging; see train/averaging.py); 0 = off
    ema_decay: float = 0.0
    # > 0: the paper's checkpoint averaging (§6.1: the last 5 checkpoints): keep the weights of the last N
    # saves of last/ (every eval_every, or save_every, steps) and at the end write their mean as averaged/,
    # the checkpoint measured on the test split and loaded from the run directory; 0 = off
    average_last: int = 0
    # bookkeeping
    seed: int = 0
    eval_every: int = 200
    eval_batches: int = 20  # language modelling: batches per evaluation
    eval_decode: int = 200  # seq2seq: sentences decoded per evaluation (exact match / BLEU); instruct: records
    # answered greedily per evaluation (exact match, chrF; the test split: all of them); 0 = none
    save_every: int = 0  # 0 = at every evaluation
    log_every: int = 50
    patience: int = 0  # early stopping: evaluations without a better validation metric; 0 = off
    # the validation metric that picks best/ and drives early stopping: loss or perplexity (lower is
    # better), or one the task reports (higher is better): accuracy, f1, exact_match, bleu
    select_by: str = "loss"
    # at the end, measure the kept checkpoint on the task's test split, if it has one; false keeps the test
    # split unseen while tuning (`scratchformer evaluate --ckpt RUN` measures it once you have chosen)
    test_at_end: bool = True
    # where and how the arithmetic runs (train/device.py, train/precision.py): device auto = cuda, else mps,
    # else cpu; precision fp32, or mixed precision with bf16 or fp16 matmuls (fp16 with a gradient scaler);
    # compile: torch.compile the training forward and backward
    precision: Precision = "fp32"
    compile: bool = False
    device: Device = "auto"
    num_threads: int = 0  # 0 = torch's default
    # under torchrun: none (DDP: every process holds the whole model) or fsdp (PyTorch's FSDP2: each block's
    # weights, gradients and optimizer state split across the processes, gathered as the block runs; checkpoints
    # saved by every process, its own shard: train/fsdp.py)
    shard: Shard = "none"

    def __post_init__(self) -> None:
        check_settings(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """The settings a checkpoint was saved with; keys of settings this version no longer has are dropped."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def max_time_s(self) -> float | None:
        """``max_time`` in seconds (None: no time budget)."""
        return None if self.max_time is None else parse_duration("max_time", self.max_time)

    @property
    def sharded(self) -> bool:
        """Whether the run's layout is sharded (``shard=fsdp``), whatever the number of processes it runs on now."""
        return self.shard == "fsdp"

    @property
    def epsilon_upper(self) -> float:
        """GRPO's upper clip bound: ``epsilon_high``, else ``epsilon`` (a symmetric clip, as trl's default)."""
        return float(self.epsilon_high if self.epsilon_high is not None else self.epsilon or 0.2)
