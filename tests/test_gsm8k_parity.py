"""``evaluate --benchmark gsm8k`` asks, answers and scores as lm-evaluation-harness 0.4.13's ``gsm8k`` does: on a
random ``transformers`` Llama folder (a byte-level BPE that adds a begin-of-text token, a chat template), for the
first 50 test problems, the prompts are the harness's character for character (its five examples drawn for each
problem by its sampler), the greedy answers are its answers (cut at the stop sequences, at most 64 new tokens), both
filters extract the same answers and the metrics are the same; in the plain form and in the chat form
(``apply_chat_template=True, fewshot_as_multiturn=True``).

The output layer is scaled so that greedy decoding is decisive: with random weights the two best tokens are often
within rounding of each other, and then two correct implementations may pick differently. The harness runs
offline, once per form for the module, on a task YAML that includes its own ``gsm8k.yaml`` with only the data
pointed at local files and the answers' budget set to 64 tokens.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from conftest import SHARED_DATA, needs_data

pytestmark = needs_data("benchmarks/gsm8k_test.jsonl.gz", "benchmarks/gsm8k_train.jsonl.gz")
lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness (the dev extra) is the reference here")
transformers = pytest.importorskip("transformers", reason="the hf extra (transformers) makes the folder")

from scratchformer.benchmarks import BENCHMARKS, load_questions  # noqa: E402
from scratchformer.benchmarks.generated import answer_problems, prompt_texts  # noqa: E402
from scratchformer.benchmarks.gsm8k import score_answers  # noqa: E402
from scratchformer.checkpoints import load_checkpoint  # noqa: E402
from scratchformer.data.benchmark_files import read_jsonl  # noqa: E402
from scratchformer.tasks.metrics import ANSWER_FILTERS as FILTERS  # noqa: E402

N, NEW = 50, 64
BENCH = SHARED_DATA / "benchmarks"
TASKS = Path(lm_eval.__file__).parent / "tasks"
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def _folder(root: Path) -> Path:
    """A random Llama whose top token leads by a clear margin, and a BPE of 512 tokens learnt on GSM8K's text. The
    output rows of the end-of-text token, "Question:", "####" and a few numbers are scaled up a little further, so
    that some answers stop early (at the token or the stop sequence) and some have a "#### N" for the strict filter."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    folder = root / "llama"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    texts = [r["question"] + "\n" + r["answer"] for _, r in read_jsonl(BENCH / "gsm8k_train.jsonl.gz")[:2000]]
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<|bos|>", "<|eos|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", 0)])
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, initializer_range=0.2, bos_token_id=0, eos_token_id=1))
    likely = {1, *tok.encode("Question: #### 1 2 3 4 5", add_special_tokens=False).ids}
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
        model.lm_head.weight[sorted(likely)] *= 1.6
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|bos|>", "eos_token": "<|eos|>",
        "chat_template": TEMPLATE}))
    return folder


def _task(root: Path) -> str:
    test = root / "test.jsonl"
    test.write_text("".join(json.dumps(r) + "\n" for _, r in read_jsonl(BENCH / "gsm8k_test.jsonl.gz")[:N]))
    train = root / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for _, r in read_jsonl(BENCH / "gsm8k_train.jsonl.gz")))
    (root / "gsm8k_local.yaml").write_text(
        f"include: {TASKS / 'gsm8k/gsm8k.yaml'}\ntask: gsm8k_local\ntag: []\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {test}\n    train: {train}\n"
        "generation_kwargs:\n  until:\n    - 'Question:'\n    - '</s>'\n    - '<|im_end|>'\n  do_sample: false\n"
        f"  temperature: 0.0\n  max_gen_toks: {NEW}\n")
    return "gsm8k_local"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """The folder, and the harness's samples of each form (plain, chat) by problem."""
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    root = tmp_path_factory.mktemp("gsm8k_parity")
    folder, task = _folder(root), _task(root)
    before = os.environ.get("HF_DATASETS_OFFLINE")
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        manager = TaskManager(include_path=str(root), include_defaults=False)
        lm = HFLM(pretrained=str(folder), batch_size=N, device="cpu")
        out = {}
        for form, chat in (("plain", False), ("chat", True)):
            results = simple_evaluate(model=lm, tasks=[task], task_manager=manager, log_samples=True,
                                      apply_chat_template=chat, fewshot_as_multiturn=chat)
            by_doc: dict[int, dict] = {}
            for sample in results["samples"][task]:  # one record per problem and filter
                by_doc.setdefault(sample["doc_id"], {})[sample["filter"]] = sample
            out[form] = {"samples": [by_doc[d] for d in sorted(by_doc)], "results": results["results"][task]}
    finally:
        torch.set_num_threads(threads)
        if before is None:
            os.environ.pop("HF_DATASETS_OFFLINE", None)
        else:
            os.environ["HF_DATASETS_OFFLINE"] = before
    return folder, out


@pytest.mark.parametrize("form", ["plain", "chat"])
def test_prompts_answers_filters_and_scores_equal_the_harness(harness, form):
    folder, out = harness
    ckpt = load_checkpoint(folder)
    problems = load_questions(BENCHMARKS["gsm8k"], limit=N, data_dir=SHARED_DATA)
    texts = prompt_texts(ckpt, problems, chat=form == "chat")
    samples = out[form]["samples"]
    assert len(samples) == len(texts) == N
    for k, (text, sample) in enumerate(zip(texts, samples)):
        assert sorted(sample) == sorted(FILTERS)
        assert text == sample["strict-match"]["arguments"][0][0], k
    assert texts[0].startswith("<|bos|><|user|>\nQuestion: ") if form == "chat" else texts[0].startswith("Question: ")
    outputs, counts = answer_problems(ckpt, texts, max_new_tokens=NEW)
    assert counts["new_tokens"] == NEW and counts["unknown_characters"] == 0
    assert (counts["truncated"] > 0) == (form == "chat")  # the longest chats lose their first tokens, as there
    assert outputs == [s["strict-match"]["resps"][0][0] for s in samples]
    metrics, rows = score_answers(problems, outputs)
    for name in FILTERS:
        assert [r["answers"][name] for r in rows] == [s[name]["filtered_resps"][0] for s in samples]
        assert metrics[f"exact_match,{name}"] == out[form]["results"][f"exact_match,{name}"]
        assert metrics[f"exact_match_stderr,{name}"] == pytest.approx(
            out[form]["results"][f"exact_match_stderr,{name}"], abs=1e-12)
    # what the filters and the stops are tried on: numbers, some after "#### ", some answers that end early
    assert sum(r["answers"]["flexible-extract"] != "[invalid]" for r in rows) >= N // 2
    assert sum(r["answers"]["strict-match"] != "[invalid]" for r in rows) >= 2
    assert sum(len(ckpt.tokenizer.encode(o)) < NEW - 4 for o in outputs) >= 2
