"""GSM8K as a user runs it, and its parts: the prompt and the examples the harness's sampler draws, the two answer
filters and exact match, greedy decoding until a stop (rows leaving their batch), the chat form through the one
helper that ``generate --instruction`` uses, and the command on a small instruction-tuned run, whose results its
report shows. (Parity with lm-evaluation-harness itself: ``test_gsm8k_parity.py``.)"""

from __future__ import annotations

import json
import random

import pytest
import torch

from conftest import SHARED_DATA, needs_data, tiny
from scratchformer.app.cli import main
from scratchformer.benchmarks.gsm8k import gsm8k_problems, score_answers
from scratchformer.generation import generate
from scratchformer.models import GPT
from scratchformer.tasks.metrics import extract_answer as extract
from scratchformer.tasks.metrics import same_answer as exact_match
from shared_runs import QUICK, TINY

gsm8k_data = needs_data("benchmarks/gsm8k_test.jsonl.gz", "benchmarks/gsm8k_train.jsonl.gz")
TRAIN = [(i + 1, {"question": f"q{i}?", "answer": f"step {i}\n#### {i}"}) for i in range(20)]
TEST = [(i + 1, {"question": f"t{i}?", "answer": f"#### {100 + i}"}) for i in range(6)]


def test_each_problem_follows_its_examples_drawn_as_the_harness_draws_them():
    problems = gsm8k_problems(TEST, TRAIN, shots=3)
    rnd = random.Random(1234)  # one generator for the task, one draw of 3 per problem, in file order
    for problem, (_, record) in zip(problems, TEST):
        shown = rnd.sample([r for _, r in TRAIN], 3)
        assert problem.text == "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in shown) + \
            f"Question: {record['question']}\nAnswer:"
        assert problem.messages[-1] == {"role": "user", "content": f"Question: {record['question']}\nAnswer:"}
        assert [m["role"] for m in problem.messages] == ["user", "assistant"] * 3 + ["user"]
    assert gsm8k_problems(TEST, TRAIN, shots=3, limit=2) == problems[:2]  # --limit changes no problem's examples
    assert gsm8k_problems(TEST, TRAIN, shots=0)[0].text == "Question: t0?\nAnswer:"


@pytest.mark.parametrize(("output", "strict", "flexible"), [
    ("She pays 3 * 2 = 6 dollars.\n#### 6", "6", "6"),
    ("So 1,200 + 34 = $1,234.\n#### 1,234.", "1,234.", "1,234."),
    ("The answer is 42, or 41", "[invalid]", "41"),
    ("no number here", "[invalid]", "[invalid]"),
    ("#### -7 then 5", "-7", "5"),
])
def test_the_strict_and_flexible_filters(output, strict, flexible):
    assert extract(output, "strict-match") == strict
    assert extract(output, "flexible-extract") == flexible


def test_exact_match_ignores_commas_dollars_the_worked_steps_a_final_point_and_case():
    reference = "3 + 4 = <<3+4=7>>7\nSo 1,234 in all.\n#### 1234"
    assert exact_match("1,234.", reference) == exact_match("$1234", reference) == 1.0
    assert exact_match("1235", reference) == exact_match("[invalid]", reference) == 0.0
    metrics, rows = score_answers(gsm8k_problems(TEST[:2], TRAIN, shots=0), ["#### 100", "about 101 or 7"])
    assert metrics["exact_match,strict-match"] == 0.5 and metrics["exact_match,flexible-extract"] == 0.5
    assert rows[1]["answers"] == {"strict-match": "[invalid]", "flexible-extract": "7"} and metrics["n"] == 2


def test_greedy_until_a_stop_equals_generate_and_rows_leave_their_batch():
    """GSM8K's answers come from the decoding engine: greedy, each as ``generate`` writes it alone, whether the
    prompts share the rows or take them one at a time; an answer ends at its own budget or its end-of-text id, the
    others going on."""
    from scratchformer.generation.engine import Engine
    from scratchformer.generation.requests import Request, Stop

    torch.manual_seed(0)
    model = GPT(tiny("gpt", max_len=64)).eval()
    prompts = [[5, 6, 7], [8] * 11, [9, 10], [11, 12, 13, 14, 15, 16]]

    def answers(max_rows: int, budgets=(20, 20, 20, 20), stop_ids=frozenset()) -> list[list[int]]:
        done = Engine(model, max_rows=max_rows).run([Request(p, n, stop=Stop(stop_ids))
                                                      for p, n in zip(prompts, budgets)])
        return [r.choices[0].tokens for r in done]

    full = answers(4)  # one batch, no stop
    for p, new in zip(prompts, full):
        assert new == generate(model, torch.tensor([p]), 20)[0, len(p):].tolist()
    assert answers(1) == full  # one prompt at a time
    lengths = (3, 20, 1, 7)  # each row stops after its own number of tokens, the others go on
    assert answers(4, lengths) == [f[:n] for n, f in zip(lengths, full)]
    eos = full[1][4]  # a token the second prompt emits: it ends there, without it
    assert answers(4, stop_ids=frozenset({eos}))[1] == full[1][:full[1].index(eos)]
    with pytest.raises(ValueError, match="do not fit the model's 64 positions"):
        Engine(model).add(Request([1] * 45, 20))


@pytest.fixture(scope="module")
def instruct_run(tmp_path_factory, shared_file):
    """A tiny instruction-tuned run of this module's own: the tests write into it (its benchmarks, its report), and
    its window of 200 tokens is what they assert (the answers' budget, 200 // 2 = 100 tokens; 5-shot prompts cut)."""
    root = tmp_path_factory.mktemp("gsm8k_run")
    threads = torch.get_num_threads()  # num_threads=1 sets it; the tests after this fixture get it back
    try:
        assert main(["train", "task=instruct", "--data", str(shared_file("records.json")), *TINY, "max_len=200",
                     *QUICK, "--out", str(root / "run")]) == 0
    finally:
        torch.set_num_threads(threads)
    return root / "run"


@gsm8k_data
def test_the_bar_gsm8k_on_an_instruction_tuned_run_then_its_report(instruct_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(SHARED_DATA))
    out = tmp_path / "o.json"
    assert main(["evaluate", "--ckpt", str(instruct_run), "--benchmark", "gsm8k", "--limit", "3",
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "strict-match" in printed and "5-shot, chat form" in printed and "100 tokens" in printed
    result = json.loads(out.read_text())["gsm8k"]
    assert result["n"] == 3 and result["shots"] == 5 and result["chat"] is True and result["truncated"] == 3
    assert {"exact_match,strict-match", "exact_match_stderr,flexible-extract"} <= set(result)
    assert result["new_tokens"] == 100 and len(result["examples"]) == 3 and result["unknown_characters"] == 3
    assert json.loads((instruct_run / "benchmarks.json").read_text())["gsm8k"]["n"] == 3  # the run keeps it
    assert main(["evaluate", "--ckpt", str(instruct_run), "--benchmark", "gsm8k", "--limit", "2", "--shots", "0",
                 "--chat", "no", "--output", str(out)]) == 0
    plain = json.loads(out.read_text())["gsm8k"]
    assert plain["chat"] is False and plain["shots"] == 0 and plain["n"] == 2
    capsys.readouterr()
    assert main(["report", "--ckpt", str(instruct_run)]) == 0
    report = (instruct_run / "report.md").read_text()
    assert "gsm8k" in report and "exact_match strict-match" in report and "(0-shot, first 2)" in report
    assert (instruct_run / "report" / "benchmarks.png").stat().st_size > 5_000


@gsm8k_data
def test_mistakes_end_in_one_line(instruct_run, capsys, monkeypatch):
    monkeypatch.setenv("SCRATCHFORMER_DATA", str(SHARED_DATA))
    for args, needle in ((["--benchmark", "gsm8k", "--shots", "8000"], "more than the 7,473 examples"),
                         (["--chat", "yes"], "--chat goes with --benchmark")):
        assert main(["evaluate", "--ckpt", str(instruct_run), *args]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
