"""Using trained checkpoints: generate, translate, classify (texts or images) and evaluate. The CLI is a thin layer
over these; benchmarks and notebooks import them.

Every function takes a loaded ``Checkpoint`` (``checkpoints.load_checkpoint``), so the tokenizer and configuration
are always the ones the model was trained with. Evaluation rebuilds the checkpoint's task on its own data (or on
given files) through the data pipeline and asks the task for its report.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

from scratchformer.checkpoints import Checkpoint, CheckpointError
from scratchformer.data.templates import Template, as_messages, folder_template, prompt_ids, special_texts
from scratchformer.errors import DataError
from scratchformer.families import FAMILIES, Family, family
from scratchformer.generation import generate, translate_ids
from scratchformer.generation.common import cut_at_eos
from scratchformer.models import GPT, EncoderClassifier, GPTClassifier, Seq2SeqTransformer
from scratchformer.registry import pretrains
from scratchformer.settings.config import TrainConfig
from scratchformer.tasks.classify import CLASSIFY_TOKENS, class_probabilities
from scratchformer.tokenizers import Tokenizer

if TYPE_CHECKING:
    from scratchformer.generation.requests import Choice


def require(ckpt: Checkpoint, command: str, needs: Callable[[Family], bool]) -> None:
    """Refuse, in one line, a checkpoint whose family ``needs`` refuses (``lambda f: f.generates``) for ``command``."""
    have = family(ckpt.model_config.arch)
    if not needs(have):
        need = next(f for f in FAMILIES.values() if needs(f))
        raise CheckpointError(f"this checkpoint holds {have.title}; '{command}' needs {need.title}")
    ckpt.check_tokenizer(command)
    if have.classifies and pretrains(ckpt.task):
        raise CheckpointError(f"this checkpoint is a pretrained encoder (task=mlm) whose classifier head is untrained; "
                              f"fine-tune it first (task=classify init_from=DIR) for '{command}'")


def read_inputs(texts: Iterable[str], input_file: str | None) -> list[str]:
    """Inputs from the arguments, else ``--input FILE`` (one per line; '-' = stdin), else stdin."""
    from scratchformer.data.files import read_lines

    lines = list(texts)
    if not lines:
        if input_file and input_file != "-":
            lines = read_lines(input_file)
        elif input_file == "-" or not sys.stdin.isatty():
            lines = [line.rstrip("\n") for line in sys.stdin]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise DataError("no input: give texts as arguments, --input FILE, or lines on standard input")
    return lines


def encode_checked(tokenizer: Tokenizer, text: str, **kw: Any) -> list[int]:
    """Encode, refusing characters a character-level model has never seen (they would become <unk>)."""
    return encode_all(tokenizer, [text], **kw)[0]


def encode_all(tokenizer: Tokenizer, texts: list[str], **kw: Any) -> list[list[int]]:
    """``encode_checked`` for many texts, in one call of the tokenizer (one call into Rust for BPE and
    pretrained tokenizers, which encode a batch in parallel there)."""
    rows = tokenizer.encode_batch(texts, **kw)
    for text, ids in zip(texts, rows):
        if tokenizer.unk_id in ids:
            tokenizer.check_known(text)
    return rows


def _bar(n: int, desc: str) -> tqdm:
    return tqdm(total=n, desc=desc, disable=None if n > 64 else True, file=sys.stderr, leave=False)


# ---------------------------------------------------------------------------------- commands


def generate_text(ckpt: Checkpoint, prompt: str, max_new_tokens: int = 200, *, temperature: float = 1.0,
                  top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                  greedy: bool = False) -> str:
    """The prompt and its continuation, which ends at the end-of-text token (as ``serve``'s completions end): from the
    decoding engine (``generation/engine.py``) while the text fits the model's window, else from ``generate``, which
    slides the window along."""
    require(ckpt, "generate", lambda f: f.generates)
    model, tok = ckpt.model, ckpt.tokenizer
    assert isinstance(model, GPT)
    ids = encode_checked(tok, prompt) or [tok.bos_id]  # an empty prompt: the bos token
    ids = ids[-model.config.max_len:]
    if len(ids) + max_new_tokens <= model.config.max_len:  # within the window: the decoding engine
        answer = _answer(ckpt, ids, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                         greedy=greedy)
        return tok.decode(ids + answer.tokens)
    # past the window (a character model of 64 positions asked for 300 characters): the tensor-level generate,
    # whose last max_len tokens slide along as the text grows
    stops = tok.eos_ids
    out = generate(model, torch.tensor([ids]), max_new_tokens, do_sample=not greedy, temperature=temperature,
                   top_k=top_k, top_p=top_p, seed=seed, eos_id=stops)[0].tolist()
    return tok.decode(ids + cut_at_eos(out[len(ids):], stops))


def _answer(ckpt: Checkpoint, ids: list[int], max_new_tokens: int, *, temperature: float, top_k: int | None,
            top_p: float | None, seed: int | None, greedy: bool) -> Choice:
    """One answer to ``ids``, from the decoding engine, until an end-of-text id (every one: Llama 3.1 has three)."""
    from scratchformer.generation.engine import Engine
    from scratchformer.generation.requests import Request, Sampling, Stop

    sampling = Sampling(0.0 if greedy else temperature, top_p, top_k, seed)
    request = Request(ids, max_new_tokens, sampling, Stop(frozenset(ckpt.tokenizer.eos_ids)))
    return Engine(ckpt.model, ckpt.tokenizer, max_rows=1).run([request])[0].choices[0]


def generates_text(ckpt: Checkpoint) -> bool:
    """Whether a checkpoint's model writes text, continuing a prompt token by token: one whose family's output is
    the next token (the family registry: a run of any language model, an instruction-tuned or LoRA run, a Llama,
    Qwen3 or GPT-2 folder), with its tokenizer. What ``serve`` completes and chats with."""
    return family(ckpt.model_config.arch).generates and ckpt.tokenizer is not None


def template_of(ckpt: Checkpoint) -> Template | None:
    """The ``data.templates.Template`` a model reads messages in: an instruction run's own (``task=instruct``:
    Alpaca's, or the chat template of the folder it started from), a Hugging Face folder's chat template; None for
    a model tuned to none (a plain language model, a folder without a template)."""
    if "template" in ckpt.extra:
        return Template.from_dict(ckpt.extra["template"])
    return folder_template(ckpt.extra["folder"]) if "folder" in ckpt.extra else None


def chat_prompt(ckpt: Checkpoint, messages: list[dict[str, str]], template: Template | None = None,
                record: dict[str, Any] | None = None) -> str:
    """THE rendering of a conversation for a model to answer, through which ``generate --instruction``, ``serve`` and
    GSM8K's chat form ask a model: ``messages`` (those before the answer) written in ``template`` (default: the
    model's own), ending where the answer begins. ``record``: an Alpaca record the messages came from (its own text,
    "### Input:" in it). A model with no template is refused in one line (``DataError``)."""
    return _template_or_refuse(ckpt, template).prompt(messages, record, special_texts(ckpt.tokenizer))


def _template_or_refuse(ckpt: Checkpoint, template: Template | None) -> Template:
    if (template := template if template is not None else template_of(ckpt)) is None:
        raise DataError("this model has no chat template (not instruction-tuned, none in its folder): continue a text")
    return template


def chat_prompt_ids(ckpt: Checkpoint, messages: list[dict[str, str]], template: Template | None = None,
                    record: dict[str, Any] | None = None) -> list[int]:
    """The token ids of ``chat_prompt``, a message's special tokens' texts as text (``templates.prompt_ids``). A
    character the model's vocabulary lacks is refused in one line (``DataError``)."""
    tok = ckpt.tokenizer
    # the user's words must be known; the template's were read in training as they encode
    tok.check_known("".join(m["content"] for m in messages))
    return prompt_ids(tok, _template_or_refuse(ckpt, template), messages, record)


def answer_instruction(ckpt: Checkpoint, instruction: str, input_text: str = "", max_new_tokens: int = 200, *,
                       temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                       seed: int | None = None, greedy: bool = False) -> str:
    """A language model's answer to an instruction (and its input), asked in the template the model was tuned with
    (``template_of``; Alpaca's for a GPT tuned to none): the new text, up to the end-of-text token."""
    require(ckpt, "generate", lambda f: f.generates)
    model, tok = ckpt.model, ckpt.tokenizer
    record = {"instruction": instruction, "input": input_text, "output": ""}
    ids = chat_prompt_ids(ckpt, as_messages(record)[:-1], template_of(ckpt) or Template("alpaca"), record)
    if len(ids) >= model.config.max_len:
        raise DataError(f"the instruction in its template is {len(ids)} tokens, and the model reads at most "
                        f"{model.config.max_len}: no room for an answer")
    new = min(max_new_tokens, model.config.max_len - len(ids))
    answer = _answer(ckpt, ids, new, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, greedy=greedy)
    return tok.decode(answer.tokens)


def translate_texts(ckpt: Checkpoint, texts: list[str], *, beam: int = 4, length_penalty: float = 0.6) -> list[str]:
    require(ckpt, "translate", lambda f: f.translates)
    model = ckpt.model
    assert isinstance(model, Seq2SeqTransformer)
    limit = model.config.max_len
    sources = encode_all(ckpt.tokenizer, texts, add_eos=True)
    for text, ids in zip(texts, sources):
        if len(ids) > limit:
            raise DataError(f"input of {len(ids)} tokens is longer than the model's max_len={limit}: {text[:40]!r}...")
    bar = _bar(len(sources), "translating")
    hyps = translate_ids(model, sources, beam=beam, length_penalty=length_penalty, progress=bar.update)
    bar.close()
    return [ckpt.tokenizer.decode(h) for h in hyps]


def classify_texts(ckpt: Checkpoint, texts: list[str], max_tokens: int = CLASSIFY_TOKENS) -> list[tuple[str, float]]:
    """The most likely label of each text and its probability, in input order. The texts are encoded in one
    call and run sorted by length, in batches of at most ``max_tokens`` padded tokens
    (``tasks.classify.class_probabilities``); texts longer than the model's ``max_len`` are cut."""
    require(ckpt, "classify", lambda f: f.classifies_text)
    model = ckpt.model
    assert isinstance(model, (EncoderClassifier, GPTClassifier))
    labels = ckpt.extra.get("labels") or [str(i) for i in range(model.config.n_classes)]
    limit = model.config.max_len
    rows = [ids[:limit] or [model.config.pad_id] for ids in encode_all(ckpt.tokenizer, texts)]
    bar = _bar(len(texts), "classifying")
    probs = class_probabilities(model, rows, model.config.n_classes, max_tokens, progress=bar.update)
    bar.close()
    best, k = probs.max(-1)
    return [(labels[i], p) for i, p in zip(k.tolist(), best.tolist())]


def classify_images(ckpt: Checkpoint, files: list[str], batch_size: int = 64) -> list[tuple[str, float]]:
    """``(label, probability)`` of each image file, in order: read at the model's image size (``data.images``)."""
    from scratchformer.data.images import as_input, to_pixels

    require(ckpt, "classify", lambda f: f.classifies_images)
    cfg = ckpt.model_config
    labels = ckpt.extra.get("labels") or [str(i) for i in range(cfg.n_classes)]
    out: list[tuple[str, float]] = []
    bar = _bar(len(files), "classifying")
    for start in range(0, len(files), batch_size):
        chunk = files[start:start + batch_size]
        pixels = torch.stack([to_pixels(f, cfg.image_size, cfg.channels) for f in chunk])  # (B, ch, S, S) bytes
        with torch.no_grad():
            probs = ckpt.model(as_input(pixels)).softmax(-1)
        p, k = probs.max(-1)
        out += [(labels[int(i)], float(q)) for i, q in zip(k, p)]
        bar.update(len(chunk))
    bar.close()
    return out


def _held_out(ckpt: Checkpoint, split: str, data: list[str] | None, whose: str, quiet: bool = False
              ) -> tuple[Any, str]:
    """The checkpoint's task rebuilt with its own tokenizer (and labels) on its own data, or on ``data``: a
    test set scored whole. Returns the task and the split to evaluate."""
    from scratchformer.data.roles import DataFiles
    from scratchformer.tasks.build import build_task

    cfg = TrainConfig.from_dict(ckpt.train)
    if data:  # all of the user's file, whatever slice of its own data the run looked at
        cfg = dataclasses.replace(cfg, dataset=None, train_limit=0, eval_limit=0)
        files, split = DataFiles(test=tuple(data)), "test"
    else:
        files = DataFiles.from_dict(ckpt.extra.get("data"))
    task = build_task(cfg, ckpt.model_config, files, tokenizer=ckpt.tokenizer, labels=ckpt.extra.get("labels"),
                      log=(lambda s: None) if quiet else (lambda s: print(s, file=sys.stderr)),
                      template=ckpt.extra.get("template"))
    if not task.has_split(split):
        raise DataError(f"{whose} has no {split!r} split; use --split val or --data PATH")
    return task, split


def task_samples(ckpt: Checkpoint) -> list[str]:
    """The few held-out examples a run shows at its end (``Task.samples``: a continuation and the real text,
    answers beside the records', ...), its task rebuilt on its own data."""
    task, _ = _held_out(ckpt, "val", None, "this checkpoint's data", quiet=True)
    return task.samples(ckpt.model)


def evaluate_checkpoint(ckpt: Checkpoint, *, split: str = "test", data: list[str] | None = None, beam: int = 4,
                        length_penalty: float = 0.6) -> dict[str, Any]:
    """The metrics of a checkpoint on a held-out split of its task's data (or on ``data`` files): the task's
    report (``Task.report``). Translation: sacreBLEU BLEU and chrF (with their signatures) of beam search and
    greedy decoding. Classification: accuracy and macro-F1. Language modelling: loss and perplexity. Synthetic
    tasks: exact match. Always also the loss."""
    ckpt.check_tokenizer("evaluate")
    task, split = _held_out(ckpt, split, data, "this checkpoint's data")
    result: dict[str, Any] = {"split": split, "examples": None}
    if data:
        result["data"] = [str(p) for p in data]
    result.update(task.report(ckpt.model, split, beam=beam, length_penalty=length_penalty, progress=_bar))
    return result


def evaluate_ensemble(ckpts: list[tuple[str, Checkpoint]], *, split: str = "test",
                      data: list[str] | None = None) -> dict[str, Any]:
    """Accuracy, macro-F1 and loss of several classifiers voting together: the mean of their class
    probabilities; also each member's own scores. ``ckpts``: (name, checkpoint) pairs, the name its
    directory, say. Each model reads the examples through its own tokenizer, so the members may differ in
    size, vocabulary or initialisation (several seeds of one preset, say); they must share the labels."""
    if not ckpts:
        raise DataError("an ensemble needs at least one checkpoint")
    for _, ckpt in ckpts:
        require(ckpt, "an ensemble evaluation", lambda f: f.classifies_text)
    tasks = [_held_out(ckpt, split, data, f"the data of {path}") for path, ckpt in ckpts]
    first, split = tasks[0]
    truth = first.truth(split)
    members, probs = [], []
    for (path, ckpt), (task, _) in zip(ckpts, tasks):
        if task.labels != first.labels or task.truth(split) != truth:
            raise DataError(f"{path} has other labels or examples than {ckpts[0][0]}; an ensemble "
                            "needs the same data")
        probs.append(task.probabilities(ckpt.model, split))
        members.append({"ckpt": path, **task.score(probs[-1], split)})
    return {"split": split, "examples": len(truth), "members": members,
            **first.score(torch.stack(probs).mean(0), split)}


__all__ = ["answer_instruction", "chat_prompt_ids", "classify_images", "classify_texts", "evaluate_checkpoint",
           "evaluate_ensemble", "generate_text", "generates_text", "read_inputs", "template_of",
           "translate_texts"]
