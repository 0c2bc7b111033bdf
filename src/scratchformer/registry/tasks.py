"""The task registry's entries (the table of ``registry/__init__.py``), and the questions asked of them."""

from __future__ import annotations

from collections.abc import Callable

from scratchformer.errors import ConfigError
from scratchformer.registry.spec import ALPHABET, DataForm, TaskSpec

__all__ = ["DEFAULT_TASK", "TASKS", "check_base", "data_formats", "data_tasks", "fine_tune_pairs", "output_name",
           "pretrains", "spec", "synthetic_targets", "task_names", "task_only_settings"]


_SYNTHETIC = dict(n_symbols=10, min_seq_len=4, max_seq_len=16, d_model=128, n_heads=4, n_layers=2, d_ff=256,
                  dropout=0.0, max_steps=800, batch_size=64, lr=1e-3, warmup_fraction=0.125, schedule="cosine",
                  label_smoothing=0.0, eval_every=100, eval_decode=200, log_every=50)
_ENCODER = dict(tokenizer="bpe", bpe_vocab_size=8000, lowercase=True, d_model=256, n_heads=4, n_layers=4, d_ff=1024,
                norm="pre", pooling="mean", batch_size=64, schedule="cosine", weight_decay=0.01, log_every=50)
_LABELLED = "a .tsv/.csv of text<TAB>label rows (.tsv) or text,label rows (.csv)"


def _synthetic(name: str, what: str, target: Callable[[str], str]) -> TaskSpec:
    form = DataForm("synthetic", "none: fresh random strings at every step", paths=0,
                    held="makes fresh random strings at every step", target=target)
    return TaskSpec(name, ("seq2seq",), f"a small encoder-decoder learns to {what} random strings", "Seq2SeqTask",
                    form, _SYNTHETIC, metrics=("exact_match",), decoded=("exact_match",))


TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in (
    _synthetic("copy", "copy", lambda source: source),
    _synthetic("reverse", "reverse", lambda source: source[::-1]),
    _synthetic("sort", "sort", lambda source: "".join(sorted(source, key=ALPHABET.index))),
    # a character-level GPT: nanoGPT's small CPU model with twice its context and some dropout
    TaskSpec("lm", ("gpt",), "a GPT language model on a text", "LMTask",
             DataForm("text", "a UTF-8 text file, or a folder of .txt/.txt.gz files (one corpus); a second file is "
                      "the validation text", folders="allowed", unit="tokens"),
             dict(tokenizer="char", max_len=128, d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=0.1,
                  bias=False, max_steps=2000, batch_size=16, lr=2e-3, min_lr=1e-4, schedule="cosine",
                  warmup_fraction=0.1, beta2=0.99, adam_eps=1e-8, weight_decay=0.1, eval_every=250, eval_batches=20,
                  log_every=25),
             datasets=("tinyshakespeare",), own_settings=("init_from",),
             # training further a Llama, Qwen3 or GPT-2 folder (or a GPT run): its architecture and tokenizer come
             # with it; windows of max_len tokens, a low rate
             fine_tune_defaults=dict(max_len=128, max_steps=500, batch_size=8, lr=3e-5, min_lr=3e-6,
                                     schedule="cosine", warmup_fraction=0.1, weight_decay=0.0, eval_every=100,
                                     eval_batches=10, log_every=10),
             bases=("gpt",)),
    # the multi30k preset's recipe: shared BPE, post-LN encoder-decoder, token batches, label smoothing
    TaskSpec("translate", ("seq2seq",), "an encoder-decoder translates sentence pairs", "TranslationTask",
             DataForm("pairs", "a TSV of source<TAB>target lines, or two line-aligned files (source, target)",
                      paths=2),
             dict(tokenizer="bpe", bpe_vocab_size=8000, max_len=128, d_model=256, n_heads=4, n_layers=3, d_ff=1024,
                  dropout=0.2, max_steps=1800, max_tokens=4000, batch_size=128, lr=1e-3, min_lr=1e-5,
                  schedule="cosine", warmup_fraction=0.2, weight_decay=0.0, label_smoothing=0.1, eval_every=500,
                  eval_decode=200, log_every=50),
             metrics=("bleu",), decoded=("bleu",), datasets=("multi30k",), output_name="Translation",
             own_settings=("init_from",),
             # training further an encoder-decoder run (on new pairs, say): its architecture and tokenizer
             fine_tune_defaults=dict(max_steps=1000, max_tokens=4000, batch_size=128, lr=1e-4, min_lr=1e-6,
                                     schedule="cosine", warmup_fraction=0.1, weight_decay=0.0, label_smoothing=0.1,
                                     eval_every=250, eval_decode=200, log_every=50),
             bases=("seq2seq",)),
    # the sst2 preset's recipe, with room for longer texts (reviews)
    TaskSpec("classify", ("encoder", "gpt-classifier"), "a classifier of labelled texts: an encoder, or a GPT "
             "that reads the last real token", "ClassifyTask",
             DataForm("labelled", f"{_LABELLED}; a second file is the validation set", stratified=True),
             dict(_ENCODER, max_len=256, dropout=0.3, max_steps=2000, lr=5e-4, warmup_fraction=0.15,
                  label_smoothing=0.1, eval_every=250),
             metrics=("accuracy", "f1"), datasets=("sst2",), labels=True, loss_unit="nats per example",
             own_settings=("word_dropout", "init_from"),
             # fine-tuning a pretrained encoder (or a GPT run): its architecture and tokenizer come with it; a lower
             # rate. A GPT base classifies from its last real token whatever ``pooling`` says
             fine_tune_defaults=dict(max_len=128, pooling="mean", max_steps=2000, batch_size=32, lr=1e-4,
                                     schedule="cosine", warmup_fraction=0.1, weight_decay=0.01, eval_every=500,
                                     log_every=50),
             bases=("encoder", "gpt", "gpt-classifier")),
    TaskSpec("mlm", ("encoder",), "an encoder pretrained by masked-token prediction (BERT's objective)",
             "MaskedLMTask",
             DataForm("lines", "a text file of one example a line, or the text column of a .tsv/.csv; a second file "
                      "is the validation set"),
             dict(_ENCODER, max_len=128, dropout=0.1, max_steps=3000, lr=1e-3, warmup_fraction=0.1, eval_every=500),
             metrics=("accuracy",), datasets=("sst2",), dataset_splits=("train", "val"), mask_token=True,
             pretrains=True),
    # instruction tuning: the loss on the answers alone (tasks/instruct.py); from scratch, a character-level GPT of
    # the lm task's size with room for a prompt and its answer, or (init_from) a GPT trained further at a low rate
    TaskSpec("instruct", ("gpt",), "a GPT learns to answer instructions (the loss on the answers alone)",
             "InstructTask",
             DataForm("records", "a JSON list (or JSON Lines) of {\"instruction\", \"input\", \"output\"} records or "
                      "{\"messages\": [{\"role\", \"content\"}, ...]} chats; a second file is the validation set",
                      held="reads its records into memory"),
             dict(tokenizer="char", max_len=432, d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=0.1,
                  bias=False, max_steps=1000, batch_size=16, lr=2e-3, min_lr=1e-4, schedule="cosine",
                  warmup_fraction=0.1, beta2=0.99, adam_eps=1e-8, weight_decay=0.1, eval_every=100, eval_decode=0,
                  log_every=25),
             metrics=("exact_match", "chrf"), decoded=("exact_match", "chrf"), datasets=("instructions", "arithmetic"),
             own_settings=("init_from", "template", "digits", "operations"), output_name="Answer",
             fine_tune_defaults=dict(max_len=432, max_steps=500, batch_size=8, lr=1e-4, min_lr=1e-5,
                                     schedule="cosine", warmup_fraction=0.1, weight_decay=0.0, eval_every=100,
                                     eval_decode=0, log_every=25),
             bases=("gpt",), prompted=True),
    # preference tuning (DPO, tasks/dpo.py): a model that answers (an instruct run, or a GPT folder with a chat
    # template) learns to make the chosen answer more likely, the rejected one less, than its frozen start does; the
    # book's beta 0.1 and batches of 8 for about one pass over the shared records, at the rate that did best on their
    # validation split from the small GPT of RESULTS.md (2e-4; a large pretrained model wants far less: trl's default
    # is 1e-6); a row a step logged, so the first row is the loss before any step (ln 2)
    TaskSpec("dpo", ("gpt",), "a GPT that answers learns which of two answers is preferred (DPO)", "DPOTask",
             DataForm("preferences", "a JSON list (or JSON Lines) of {\"instruction\", \"input\", \"chosen\", "
                      "\"rejected\"} records, {\"prompt\", \"chosen\", \"rejected\"} (trl's form) or chats; a "
                      "second file is the validation set", held="reads its records into memory"),
             dict(beta=0.1, max_steps=120, batch_size=8, lr=2e-4, min_lr=0.0, schedule="cosine", warmup_fraction=0.1,
                  weight_decay=0.0, eval_every=40, eval_decode=0, log_every=1),
             metrics=("reward_accuracy", "reward_margin", "closer_to_chosen"), decoded=("closer_to_chosen",),
             datasets=("preferences",), own_settings=("init_from", "template", "beta", "reference"),
             output_name="Answer", bases=("gpt",), needs_base=True, prompted=True,
             loss_unit="nats per pair"),
    # learning from rewards (GRPO, tasks/grpo.py): a model that answers (an instruct run, or a GPT folder with a chat
    # template) samples group_size answers to each problem, scored by a program; those above their group's mean are
    # made more likely. trl's defaults where they suit a small model (DAPO's token-level loss, no KL term, one
    # update per batch of answers, epsilon 0.2); 4 problems x 8 answers a step, answers of at most 64 tokens, at a
    # rate for the small GPTs trained here (trl's 1e-6 is for billions of weights)
    TaskSpec("grpo", ("gpt",), "a GPT that answers learns from rewards a program gives its answers (GRPO)", "GRPOTask",
             DataForm("problems", "JSON Lines of {\"question\", \"answer\"} records (GSM8K's form: an answer ending "
                      "\"#### N\"); a second file is the validation set", held="reads its problems into memory"),
             dict(group_size=8, completion_tokens=64, temperature=1.0, reward="answer", beta=0.0, epsilon=0.2,
                  loss_type="dapo", scale_rewards="group", updates=1, max_steps=200, batch_size=4, lr=1e-4,
                  min_lr=1e-5, schedule="cosine", warmup_fraction=0.05, weight_decay=0.0, eval_every=50,
                  eval_decode=100, log_every=1, select_by="accuracy"),
             metrics=("accuracy", "format", "reward", "length"), decoded=("accuracy", "format", "reward", "length"),
             datasets=("arithmetic", "gsm8k"),
             own_settings=("init_from", "template", "beta", "group_size", "completion_tokens", "temperature",
                           "reward", "reward_weights", "scale_rewards", "epsilon", "epsilon_high", "loss_type",
                           "updates", "digits", "operations"),
             output_name="Answer", bases=("gpt",), needs_base=True, prompted=True, zero_beta=True,
             loss_unit="GRPO's clipped surrogate, per answer token"),
    # a small ViT for a folder of images: 32 x 32 RGB in 64 patches of 4 x 4, shifted by up to 2 pixels
    TaskSpec("image", ("vit",), "a Vision Transformer classifies labelled images", "ImageTask",
             DataForm("images", "a folder with one sub-folder of PNG/JPEG images per class (the sub-folder's name is "
                      "the label); a second folder is the validation set", folders="required", stratified=True,
                      unit="images", held="reads its images into memory at the start of a run"),
             dict(image_size=32, patch_size=4, channels=3, d_model=128, n_heads=4, n_layers=4, d_ff=256, dropout=0.1,
                  max_steps=2000, batch_size=64, lr=1e-3, min_lr=1e-5, schedule="cosine", warmup_fraction=0.1,
                  weight_decay=0.05, label_smoothing=0.1, augment_shift=2, eval_every=200, log_every=50),
             metrics=("accuracy", "f1"), datasets=("digits",), labels=True, own_settings=("augment_shift",),
             loss_unit="nats per image"),
)}
DEFAULT_TASK = "copy"


def task_names() -> list[str]:
    return list(TASKS)


def spec(name: str) -> TaskSpec:
    """The entry of task ``name``; an unknown name is refused in one line."""
    if name not in TASKS:
        raise ConfigError(f"task={name!r} is not one of {', '.join(TASKS)}")
    return TASKS[name]


def pretrains(name: str | None) -> bool:
    """Whether a task ``name`` (None: none) pretrains an encoder whose classification head stays untrained."""
    return bool(name) and name in TASKS and TASKS[name].pretrains  # type: ignore[operator]


def output_name(name: str | None) -> str:
    """What a person calls the output of a model trained on task ``name`` (a checkpoint's; "Output" if unknown)."""
    return TASKS[name].output_name if name and name in TASKS else "Output"


def data_formats() -> str:
    """What ``--data`` takes, task by task (for the command line's help and error messages)."""
    return "; ".join(f"task={t.name}: {t.data.describe}" for t in TASKS.values() if t.data.paths)


def data_tasks() -> str:
    """The tasks that read a user's files, in words: ``task=lm, translate, ... or image``."""
    names = [t.name for t in TASKS.values() if t.data.paths]
    return f"task={', '.join(names[:-1])} or {names[-1]}"


def synthetic_targets() -> dict[str, Callable[[str], str]]:
    """Task name -> the rule that makes a target from a random source, for each built-in task."""
    return {t.name: t.data.target for t in TASKS.values() if t.data.target is not None}


def check_base(task: TaskSpec, family: str, init_from: str) -> None:
    """Refuse, in one line that lists every pair there is, a base of a family ``task`` cannot start from."""
    if family not in task.bases:
        article = "an" if family[0] in "aeiou" else "a"
        raise ConfigError(f"init_from={init_from} holds {article} {family} model; task={task.name} starts from "
                          f"{' or '.join(task.bases) or 'no model'} (init_from pairs: {fine_tune_pairs()})")


def fine_tune_pairs() -> str:
    """Which task starts from which family of base (``init_from``), in words: ``lm from gpt; classify from ...``."""
    return "; ".join(f"task={t.name} from {' or '.join(t.bases)}" for t in TASKS.values() if t.bases)


def task_only_settings() -> dict[str, tuple[str, ...]]:
    """Setting -> the tasks it means something for (a setting that only one kind of task reads)."""
    out: dict[str, tuple[str, ...]] = {}
    for t in TASKS.values():
        for name in t.own_settings:
            out[name] = (*out.get(name, ()), t.name)
    return out
