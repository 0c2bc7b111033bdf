"""The task registry: everything the code asks about a task, one entry per task, in one place.

A task is what a run learns to do. Its entry says which model families can learn it (the first is the one a
run builds unless ``arch`` names another), the settings it starts from (before any preset), what its evaluation
reports and which metric picks the kept checkpoint, the form of the data it reads and the roles its files take,
the named datasets it can read, and the runner: the class in ``tasks/`` that makes its batches and evaluates it
(``tasks.build.RUNNERS``, where the classes are imported; it imports nothing above it).

    task        family   data it reads (--data)                            named datasets    runner
    copy        seq2seq  none: fresh random strings at every step          -                 Seq2SeqTask
    reverse     seq2seq  none                                              -                 Seq2SeqTask
    sort        seq2seq  none                                              -                 Seq2SeqTask
    lm          gpt      a text file, or a folder of .txt/.txt.gz files    tinyshakespeare   LMTask
    translate   seq2seq  sentence pairs (a TSV, or two line-aligned files) multi30k          TranslationTask
    classify    encoder  labelled texts (.tsv/.csv)                        sst2              ClassifyTask
                (or gpt-classifier: arch=gpt)
    mlm         encoder  texts, one a line (or a TSV/CSV's text column)    sst2              MaskedLMTask
    image       vit      a folder of class sub-folders of images           digits            ImageTask
    instruct    gpt      instruction records (JSON list or JSON Lines)     instructions      InstructTask
    dpo         gpt      preference records: a prompt, two answers         preferences       DPOTask
                (from a model that answers: init_from)

Adding a task is adding one entry to ``registry/tasks.py`` (and, for a new kind of work, its runner). No other
module compares a task's name: they ask its entry (``spec(name)``) instead. ``registry/spec.py`` says what an entry
holds, and what each metric is (a fraction, a loss) and how it prints.
"""

from scratchformer.registry.spec import (
    ALPHABET,
    COMMON_METRICS,
    METRICS,
    DataForm,
    Metric,
    TaskSpec,
    format_metric,
    is_fraction,
    lower_is_better,
    metric,
)
from scratchformer.registry.tasks import (
    DEFAULT_TASK,
    TASKS,
    check_base,
    data_formats,
    data_tasks,
    fine_tune_pairs,
    output_name,
    pretrains,
    spec,
    synthetic_targets,
    task_names,
    task_only_settings,
)

__all__ = ["ALPHABET", "COMMON_METRICS", "DEFAULT_TASK", "DataForm", "METRICS", "Metric", "TASKS", "TaskSpec",
           "check_base", "data_formats", "data_tasks", "fine_tune_pairs", "format_metric", "is_fraction",
           "lower_is_better", "metric", "output_name", "pretrains", "spec", "synthetic_targets", "task_names",
           "task_only_settings"]
