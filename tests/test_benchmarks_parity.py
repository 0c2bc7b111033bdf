"""``evaluate --benchmark`` scores as lm-evaluation-harness 0.4.13 scores: on random ``transformers`` models saved as
folders (a GPT-2 and a Llama, each with a byte-level BPE tokenizer that adds a begin-of-text token), the per-choice
log-likelihoods of ARC-Easy, HellaSwag and MMLU (0- and 5-shot), 200 questions each, equal the harness's ``HFLM``
to 1e-4, ``is_greedy`` agrees, and the metrics (with MMLU's group aggregate) are the same.

The harness runs offline, once per model for the whole module: its own task YAMLs are included as they are, with
only their data pointed at local JSON Lines files (``dataset_path: json``) and ``HF_DATASETS_OFFLINE=1``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from conftest import SHARED_DATA, needs_data

pytestmark = needs_data("benchmarks/arc_easy_validation.jsonl.gz", "benchmarks/hellaswag_validation.jsonl.gz",
                        "benchmarks/mmlu_test.jsonl.gz", "benchmarks/mmlu_dev.jsonl.gz")
lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the dev extra) is the reference here")
transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) makes the folders")

from scratchformer.benchmarks import BENCHMARKS, load_questions  # noqa: E402
from scratchformer.benchmarks.metrics import item_scores, pooled, summary  # noqa: E402
from scratchformer.benchmarks.run import choice_scores  # noqa: E402
from scratchformer.checkpoints import load_checkpoint  # noqa: E402
from scratchformer.data.benchmark_files import read_jsonl  # noqa: E402

N = 200
SUBJECTS = ("abstract_algebra", "business_ethics", "econometrics", "formal_logic")  # one of each group, 50 each
TASKS = Path(lm_eval.__file__).parent / "tasks"
BENCH = SHARED_DATA / "benchmarks"


def _tokenizer(folder: Path, texts: list[str]) -> None:
    """A byte-level BPE of 512 tokens that adds <|bos|> to every text (Llama 3's way), as transformers reads it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|bos|>", "<|eos|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", pair="<|bos|> $A <|bos|> $B",
                                                       special_tokens=[("<|bos|>", 0)])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|bos|>", "eos_token": "<|eos|>"}))


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _harness_tasks(root: Path) -> list[str]:
    """Task YAMLs that include the harness's own, their data the first questions of the local files."""
    def first(name: str, n: int | None = N) -> list[dict]:
        return [r for _, r in read_jsonl(BENCH / name)][:n]

    tasks = {"arc_easy_local": (TASKS / "arc/arc_easy.yaml", {"validation": _write_jsonl(
                root / "arc.jsonl", first("arc_easy_validation.jsonl.gz"))}, "training_split: null\ntest_split: null"),
             "hellaswag_local": (TASKS / "hellaswag/hellaswag.yaml", {"validation": _write_jsonl(
                 root / "hellaswag.jsonl", first("hellaswag_validation.jsonl.gz"))}, "training_split: null")}
    test, dev = first("mmlu_test.jsonl.gz", None), first("mmlu_dev.jsonl.gz", None)
    for s in SUBJECTS:
        files = {"test": _write_jsonl(root / f"{s}_test.jsonl", [r for r in test if r["subject"] == s][:N // 4]),
                 "dev": _write_jsonl(root / f"{s}_dev.jsonl", [r for r in dev if r["subject"] == s])}
        for shots in (0, 5):
            tasks[f"mmlu{shots}_{s}"] = (TASKS / f"mmlu/default/mmlu_{s}.yaml", files, f"num_fewshot: {shots}")
    for name, (base, files, extra) in tasks.items():
        data = "\n".join(f"    {split}: {path}" for split, path in files.items())
        (root / f"{name}.yaml").write_text(f"include: {base}\ntask: {name}\ntag: []\ndataset_path: json\n"
                                           f"dataset_name: null\ndataset_kwargs:\n  data_files:\n{data}\n{extra}\n")
    for shots in (0, 5):
        subtasks = "".join(f"  - mmlu{shots}_{s}\n" for s in SUBJECTS)
        (root / f"mmlu{shots}_group.yaml").write_text(
            f"group: mmlu{shots}_local\ntask:\n{subtasks}"
            "aggregate_metric_list:\n  - metric: acc\n    weight_by_size: true\n")
    return ["arc_easy_local", "hellaswag_local", "mmlu0_local", "mmlu5_local"]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Models of 32 dimensions: one thread does their small products fastest (and a busy machine's cores alike)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """name -> (the folder, the harness's results with its samples), the harness run once per model."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    root = tmp_path_factory.mktemp("benchmark_parity")
    texts = [r["question"] for _, r in read_jsonl(BENCH / "mmlu_dev.jsonl.gz")] + \
            [r["ctx"] for _, r in read_jsonl(BENCH / "hellaswag_validation.jsonl.gz")[:300]]
    torch.manual_seed(0)
    ids = dict(vocab_size=512, bos_token_id=0, eos_token_id=1)
    made = {"gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
                n_embd=32, n_layer=2, n_head=4, n_positions=128, initializer_range=0.05, **ids)),
            "llama": transformers.LlamaForCausalLM(transformers.LlamaConfig(
                hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=256, initializer_range=0.05, **ids))}
    names = _harness_tasks(root)
    before = os.environ.get("HF_DATASETS_OFFLINE")
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    out = {}
    try:
        manager = TaskManager(include_path=str(root), include_defaults=False)
        for name, model in made.items():
            model.save_pretrained(root / name)
            _tokenizer(root / name, texts)
            lm = HFLM(pretrained=str(root / name), batch_size=64, device="cpu")
            out[name] = (root / name, simple_evaluate(model=lm, tasks=names, task_manager=manager, log_samples=True))
    finally:
        if before is None:
            os.environ.pop("HF_DATASETS_OFFLINE", None)
        else:
            os.environ["HF_DATASETS_OFFLINE"] = before
    return out


def _ours(folder: Path, benchmark: str, shots: int = 0):
    ckpt = load_checkpoint(folder)
    items = load_questions(BENCHMARKS[benchmark], shots=shots, limit=N // 4 if benchmark == "mmlu" else N,
                           data_dir=SHARED_DATA)
    if benchmark == "mmlu":
        items = [q for q in items if q.subject in SUBJECTS]
    scored, counts = choice_scores(ckpt, items)
    return items, scored, counts


def _theirs(results: dict, task: str) -> list[list[tuple[float, bool]]]:
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    return [[tuple(r[0]) for r in s["resps"]] for s in samples]


def _compare(items, scored, theirs) -> None:
    assert len(scored) == len(theirs) == len(items) >= 50
    for q, (mine, ref) in enumerate(zip(scored, theirs)):
        assert mine is not None and len(mine) == len(ref) == len(items[q].choices), q
        assert max(abs(a[0] - b[0]) for a, b in zip(mine, ref)) < 1e-4, (q, mine, ref)
        assert [a[1] for a in mine] == [b[1] for b in ref], q


@pytest.mark.parametrize("model", ["gpt2", "llama"])
@pytest.mark.parametrize(("benchmark", "task"), [("arc_easy", "arc_easy_local"), ("hellaswag", "hellaswag_local")])
def test_arc_and_hellaswag_log_likelihoods_and_metrics_equal_the_harness(runs, model, benchmark, task):
    folder, results = runs[model]
    items, scored, counts = _ours(folder, benchmark)
    assert len(items) == N
    _compare(items, scored, _theirs(results, task))
    rows = [item_scores([ll for ll, _ in s], q.choices, q.answer) for q, s in zip(items, scored)]
    mine, ref = summary(rows, ("acc", "acc_norm")), results["results"][task]
    for metric in ("acc", "acc_norm"):
        assert mine[metric] == ref[f"{metric},none"]
        assert mine[f"{metric}_stderr"] == pytest.approx(ref[f"{metric}_stderr,none"], abs=1e-12)
    if model == "gpt2":  # a window of 128 tokens: some ARC prompts are cut, as the harness cuts them
        assert counts["truncated"] > 0 or benchmark == "hellaswag"


@pytest.mark.parametrize("model", ["gpt2", "llama"])
@pytest.mark.parametrize("shots", [0, 5])
def test_mmlu_log_likelihoods_subjects_and_group_equal_the_harness(runs, model, shots):
    folder, results = runs[model]
    items, scored, counts = _ours(folder, "mmlu", shots)
    assert len(items) == N
    theirs = [pair for s in SUBJECTS for pair in _theirs(results, f"mmlu{shots}_{s}")]
    _compare(items, scored, theirs)
    each = {}
    for s in SUBJECTS:
        rows = [item_scores([ll for ll, _ in p], q.choices, q.answer) for q, p in zip(items, scored) if q.subject == s]
        each[s] = summary(rows, ("acc",))
        ref = results["results"][f"mmlu{shots}_{s}"]
        assert each[s]["acc"] == ref["acc,none"] and each[s]["n"] == ref["sample_len"]
        assert each[s]["acc_stderr"] == pytest.approx(ref["acc_stderr,none"], abs=1e-12)
    group, ref = pooled(list(each.values()), ("acc",)), results["results"][f"mmlu{shots}_local"]
    assert group["acc"] == pytest.approx(ref["acc,none"], abs=1e-12)
    assert group["acc_stderr"] == pytest.approx(ref["acc_stderr,none"], abs=1e-12)
    if shots == 5 and model == "gpt2":  # five examples do not fit 128 tokens: every prompt is cut
        assert counts["truncated"] == N


@pytest.mark.parametrize("model", ["gpt2", "llama"])
def test_the_tokens_are_the_harness_s_bos_first_trailing_spaces_moved(runs, model):
    from lm_eval.models.huggingface import HFLM

    from scratchformer.benchmarks import encode_pairs

    folder, _ = runs[model]
    tokenizer = load_checkpoint(folder).tokenizer
    lm = HFLM(pretrained=str(folder), batch_size=1, device="cpu")
    for context, cont in [("Question: Why?\nAnswer:", " Because."), ("ends in spaces  ", "x"), ("Ünïcode — ok", " é")]:
        prompt, (ids,) = encode_pairs(tokenizer, context, [cont])
        assert (prompt, ids) == tuple(lm._encode_pair(context, cont))
        assert prompt[0] == 0  # <|bos|>


def test_a_folder_s_results_go_to_the_current_directory_and_the_folder_is_left_alone(runs, tmp_path, monkeypatch,
                                                                                     capsys):
    from scratchformer.app.cli import main

    folder, _ = runs["llama"]
    before = sorted(p.name for p in folder.iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(SHARED_DATA))
    assert main(["evaluate", "--ckpt", str(folder), "--benchmark", "hellaswag", "--limit", "3"]) == 0
    assert "a Hugging Face folder is not written into" in capsys.readouterr().out
    assert json.loads((tmp_path / "benchmarks.json").read_text())["hellaswag"]["n"] == 3
    assert sorted(p.name for p in folder.iterdir()) == before
