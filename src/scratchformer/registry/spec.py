"""What a task is (``TaskSpec``), the form of its data (``DataForm``), and what its metrics are: each a fraction (shown
as a percentage), a loss (lower is better) or a score (higher is better), and how each is printed. The entries
themselves are in ``registry/tasks.py``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scratchformer.errors import ConfigError
from scratchformer.families import FAMILIES, family

__all__ = ["ALPHABET", "COMMON_METRICS", "DataForm", "METRICS", "Metric", "TaskSpec", "format_metric", "is_fraction",
           "lower_is_better", "metric"]


@dataclass(frozen=True)
class Metric:
    """What a metric's number is: a ``fraction`` of the examples (in [0, 1]: printed, reported and plotted as a
    percentage), a ``percent`` already (BLEU, chrF: 0 to 100), and whether a smaller value of it is better (a loss, a
    length). Fractions and percents are the held-out quality a run's curves draw on their own panel."""

    fraction: bool = False
    percent: bool = False
    lower_is_better: bool = False

    @property
    def quality(self) -> bool:
        """Drawn as a percentage, 0 to 100, on the curves' quality panel."""
        return self.fraction or self.percent


_FRACTION, _PERCENT, _LOWER = Metric(fraction=True), Metric(percent=True), Metric(lower_is_better=True)
# Every metric a task reports or a benchmark scores that is not a plain number of which more is better (the
# rewards, a GRPO run's format and reward, a count): the one place that says how each reads
METRICS: dict[str, Metric] = {
    "loss": _LOWER, "perplexity": _LOWER, "length": _LOWER,
    **dict.fromkeys(("accuracy", "f1", "exact_match", "reward_accuracy", "closer_to_chosen", "acc", "acc_norm"),
                    _FRACTION),
    "bleu": _PERCENT, "chrf": _PERCENT,
}
COMMON_METRICS = ("loss", "perplexity")  # the validation metrics of every task (its own follow)


def metric(name: str) -> Metric:
    """What ``name`` is (``METRICS``); any other: a number of which more is better."""
    return METRICS.get(name, Metric())


def lower_is_better(name: str) -> bool:
    return metric(name).lower_is_better


def is_fraction(name: str) -> bool:
    return metric(name).fraction


def format_metric(name: str, value: Any) -> str:
    """A metric's value as every command and report prints it: a fraction as a percentage (``85.00 %``), a count as
    it is, any other number to four significant digits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if metric(name).fraction:
        return f"{100 * value:.2f} %"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


# The symbols of the built-in tasks' random strings (a task uses the first n_symbols), in the order ``sort`` sorts
# them: letters before digits, unlike code points.
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


@dataclass(frozen=True)
class DataForm:
    """The form of a task's data. ``kind``: how a source is read (``text``: one running text; ``pairs``;
    ``labelled``: text and label; ``lines``: one text a line; ``images``; ``records``: instruction records;
    ``synthetic``: none, the task makes its own strings; ``data.pipeline.READERS`` has a reader for each).
    ``paths``: how many paths make one source (two line-aligned files of pairs); otherwise a second ``--data`` path
    is the validation source.
    ``folders``: ``allowed`` (a folder of documents), ``required`` (a folder of classes) or ``refused``.
    ``stratified``: a carved validation set keeps the label balance. ``unit``: what a split's size counts."""

    kind: str
    describe: str
    paths: int = 1  # 0: the task takes no files (it makes its own data)
    folders: str = "refused"
    stratified: bool = False
    unit: str = "examples"
    held: str = ""  # what the task does with its data instead of preparing corpora on disk ("": it prepares them)
    target: Callable[[str], str] | None = None  # kind "synthetic": a random source string -> its target

    @property
    def prepared(self) -> bool:
        """Whether the data is tokenized into prepared corpora on disk (text), or held in memory (images, strings)."""
        return not self.held


@dataclass(frozen=True)
class TaskSpec:
    """One task: see the module docstring."""

    name: str
    families: tuple[str, ...]  # the families (ModelConfig.arch, families.py) that can learn it; first: default
    summary: str
    runner: str  # the class in tasks/ that reads its data, makes its batches and evaluates (tasks.build.RUNNERS)
    data: DataForm
    defaults: dict[str, Any]
    metrics: tuple[str, ...] = ()  # what evaluation reports besides the loss (and perplexity, for tokens)
    decoded: tuple[str, ...] = ()  # those of its metrics measured on decoded outputs (eval_decode per evaluation)
    datasets: tuple[str, ...] = ()  # named datasets it reads; the first is the one suggested
    dataset_splits: tuple[str, ...] = ("train", "val", "test")  # the splits it takes from a named dataset
    labels: bool = False  # its examples carry labels (a classifier's classes)
    mask_token: bool = False  # its tokenizer reserves <mask> (masked-token pretraining)
    pretrains: bool = False  # it trains an encoder for fine-tuning; its classification head stays untrained
    own_settings: tuple[str, ...] = ()  # settings that mean something for this task only
    output_name: str = "Output"  # what a person calls the model's output (the explorer's heading)
    fine_tune_defaults: dict[str, Any] = field(default_factory=dict)  # with init_from (a pretrained model)
    bases: tuple[str, ...] = ()  # the families of the runs (or folders) init_from can start it from
    needs_base: bool = False  # it only tunes a model (init_from), never trains one from scratch
    prompted: bool = False  # its records go through a prompt template (a base must hold it: train/prompt_room.py)
    loss_unit: str = "nats per token"  # what its loss is an average over, for a person (a report's axis)
    zero_beta: bool = False  # beta=0 is allowed (GRPO: no KL term); otherwise beta > 0 (DPO's)

    @property
    def makes_own_data(self) -> bool:
        return self.data.kind == "synthetic"

    def family_for(self, arch: str | None) -> str:
        """The family a run builds: ``arch`` if one of this task's families learns it (the default when None), or
        the family that classifies with its body (``arch=gpt`` on a task of classes: ``gpt-classifier``); another
        is refused in one line. The one place that decides whether a model fits a task."""
        if arch is None:
            return self.families[0]
        if family(arch).classifier in self.families:
            return family(arch).classifier
        if arch not in self.families:
            names = [*self.families, *(f.name for f in FAMILIES.values() if f.classifier in self.families)]
            raise ConfigError(f"arch={arch!r} does not fit task={self.name!r} (needs "
                              f"{' or '.join(f'arch={f!r}' for f in names)})")
        return arch

    @property
    def select_by(self) -> str:
        """The validation metric that picks ``best/`` unless a run sets another: its defaults' ``select_by``, else
        the loss."""
        return str(self.defaults.get("select_by", "loss"))

    @property
    def validation_metrics(self) -> tuple[str, ...]:
        return COMMON_METRICS + self.metrics

    def task_defaults(self, init_from: str | None = None) -> dict[str, Any]:
        """The settings the task starts from (with ``init_from``: a fine-tuning run's, where it has them)."""
        return dict(self.fine_tune_defaults if init_from and self.fine_tune_defaults else self.defaults)

    def default_max_len(self, max_seq_len: int) -> int | None:
        """The model's ``max_len`` when no setting gives one: a built-in task's longest string and its ``<bos>``
        or ``<eos>``; else the task's default (None: the model derives it, as a ViT from its patches)."""
        return max_seq_len + 2 if self.makes_own_data else self.defaults.get("max_len")


