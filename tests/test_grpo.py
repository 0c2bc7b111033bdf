"""Learning from rewards (``task=grpo``): the built-in arithmetic problems, the rewards (built in and a user's own
function), the advantages and the clipped loss, a run that logs its rewards every step and is evaluated, and the
refusals in one line (a group of one, a base that does not answer, a problem without an answer, a budget the window
cannot hold, a reward function that raises). The loss's parity with trl is ``test_grpo_trl.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import shared_runs
from scratchformer.app.cli import main
from scratchformer.data.arithmetic import arithmetic_problems
from scratchformer.tasks.grpo_loss import group_advantages, surrogate
from scratchformer.tasks.rewards import answer_reward, format_reward, rewards_of, score

# GSM8K-form problems a tiny instruction-tuned GPT of the shared records can read (their characters)
PROBLEMS = [{"question": f"Add {a} and {b}.", "answer": f"{a} and {b} make {a + b}\n#### {a + b}"}
            for a in range(5) for b in range(4)]
REWARD = """
def short(problem, answer):
    return 1.0 - len(answer) / 100

def broken(problem, answer):
    raise ValueError("no")

def words(problem, answer):
    return "many"
"""


def rows_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def one_line(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code != 0 and "Traceback" not in err and err.splitlines()[-1].startswith("scratchformer: error:"), err
    return err.splitlines()[-1]


@pytest.fixture
def problems_file(tmp_path) -> Path:
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS), encoding="utf-8")
    (tmp_path / "rw.py").write_text(REWARD, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------ problems, rewards, the loss


def test_the_arithmetic_problems_are_seeded_and_keep_their_held_out_part_apart():
    a, b = arithmetic_problems(seed=0), arithmetic_problems(seed=1)
    assert a["val"] == b["val"] and a["test"] == b["test"] and a["train"] != b["train"]  # held out whatever the seed
    held = {p["question"] for p in a["val"] + a["test"]}
    assert not held & {p["question"] for p in a["train"] + b["train"]}
    first = a["train"][0]
    x, sign, y = first["question"].removeprefix("What is ").removesuffix("?").split()
    value = int(x) + int(y) if sign == "+" else int(x) - int(y)
    assert first["answer"].endswith(f"#### {value}") and value >= 0
    times = arithmetic_problems(3, "*", seed=0)["train"]
    assert all(" * " in p["question"] and max(map(int, p["question"][8:-1].split(" * "))) < 1000 for p in times)


def test_the_built_in_rewards_read_the_answer_as_gsm8k_s_flexible_filter_does():
    problem = {"question": "What is 40 + 2?", "answer": "40 + 2 = 42\n#### 42"}
    assert answer_reward(problem, "It is 42") == answer_reward(problem, "#### 42") == 1.0
    assert answer_reward(problem, "42, no: 41") == 0.0 and answer_reward(problem, "") == 0.0  # the last number counts
    assert answer_reward({"question": "Colour?", "answer": "blue"}, " blue ") == 1.0  # text compared as text
    assert format_reward(problem, "40 + 2 = 42\n#### 42") == 1.0 and format_reward(problem, "42") == 0.0
    both = rewards_of("answer,format", "1,0.5")
    assert [r.name for r in both] == ["answer", "format"] and score(both, problem, "#### 42", "p") == [1.0, 1.0]


def test_a_user_s_reward_is_loaded_from_its_file_and_a_bad_one_refused_naming_it(tmp_path, monkeypatch):
    from scratchformer.errors import ConfigError, DataError

    (tmp_path / "rw.py").write_text(REWARD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    (short,) = rewards_of("rw.py:short")
    assert score([short], PROBLEMS[0], "x" * 10, "p") == [pytest.approx(0.9)]
    with pytest.raises(DataError, match=r"reward rw.py:broken raised ValueError: no on training problem 3"):
        score(rewards_of("rw.py:broken"), PROBLEMS[0], "x", "training problem 3")
    with pytest.raises(DataError, match="reward rw.py:words returned 'many'.*a finite number"):
        score(rewards_of("rw.py:words"), PROBLEMS[0], "x", "p")
    with pytest.raises(ConfigError, match="has no function 'gone'"):
        rewards_of("rw.py:gone")
    with pytest.raises(ConfigError, match="no file nothere.py"):
        rewards_of("nothere.py:short")
    with pytest.raises(ConfigError, match="2 weights for 1 rewards"):
        rewards_of("answer", "1,2")


def test_advantages_are_relative_to_the_group_and_scaled_as_asked():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])  # two groups of four
    adv = group_advantages(rewards, 4)
    std = torch.tensor([1.0, 0.0, 0.0, 0.0]).std()  # unbiased: 0.5
    assert torch.allclose(adv[:4], (rewards[:4] - 0.25) / (std + 1e-4)) and torch.equal(adv[4:], torch.zeros(4))
    assert torch.allclose(group_advantages(rewards, 4, "none")[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]))
    assert torch.allclose(group_advantages(rewards, 4, "batch"), (rewards - rewards[:4].mean().repeat(8).where(
        torch.arange(8) < 4, torch.tensor(1.0))) / (rewards.std() + 1e-4))


def test_the_clipped_loss_is_the_policy_gradient_at_ratio_one_and_clips_past_epsilon():
    logps = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.7, -9.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv = torch.tensor([2.0, -1.0])
    out = surrogate(logps, None, None, adv, mask, epsilon=0.2, epsilon_high=0.28, beta=0.0, loss_type="dapo")
    out.loss_sum.backward()
    assert out.loss_sum.item() == pytest.approx(-(2.0 * 3 - 1.0 * 2)) and out.clipped == 0.0
    assert torch.equal(logps.grad, -(adv[:, None] * mask))  # d(-rho A)/d log pi = -A at rho = 1; padding: none
    old = logps.detach() - torch.tensor([[0.5, 0.0, 0.0], [0.0, -0.5, 0.0]])  # ratios e^0.5 (A > 0), e^-0.5 (A < 0)
    clipped = surrogate(logps, old, None, adv, mask, epsilon=0.2, epsilon_high=0.28, beta=0.0, loss_type="grpo")
    assert clipped.clipped == pytest.approx(2 / 5)
    ref = logps.detach() + 0.1
    kl = surrogate(logps, None, ref, adv, mask, epsilon=0.2, epsilon_high=0.2, beta=0.04, loss_type="dr_grpo")
    assert kl.kl == pytest.approx(float(torch.exp(torch.tensor(0.1)) - 0.1 - 1), rel=1e-6)


# ------------------------------------------------------------------------------------ runs


def test_a_grpo_run_logs_its_rewards_every_step_and_is_evaluated(shared_run, tmp_path, capsys):
    """``train task=grpo init_from=RUN dataset=arithmetic max_steps=4 --out R`` (as the docs write it), then
    ``evaluate --ckpt R``: a training row a step with each reward, accuracy, length, the clipped share, entropy and
    the time sampling took; held-out accuracy on validation; ``evaluate`` gives the task's metrics."""
    out = tmp_path / "R"
    assert main(["train", "task=grpo", f"init_from={shared_run('instruct')}", "dataset=arithmetic", "max_steps=4",
                 "eval_every=4", "eval_decode=8", "completion_tokens=24", "num_threads=1", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    rows = rows_of(out)
    train = [r for r in rows if r["split"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    for row in train:
        assert {"reward_answer", "reward_answer_std", "reward", "accuracy", "length", "clipped", "entropy",
                "sample_s"} <= row.keys()
    val = [r for r in rows if r["split"] == "val"]
    assert val and 0.0 <= val[-1]["accuracy"] <= 1.0 and "format" in val[-1]
    assert "problems, greedy answers" in printed.out
    assert main(["evaluate", "--ckpt", str(out), "--split", "val"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert {"accuracy", "format", "reward", "length"} <= evaluated.keys() and evaluated["examples"] == 200


def test_a_user_s_problems_and_reward_function_train(shared_run, problems_file, tmp_path, capsys, monkeypatch):
    """``--data mine.jsonl reward=rw.py:short`` (the file's path from the folder the run starts in) trains, its
    reward logged; LoRA with a KL term (beta > 0: the reference is the model with its adapters off) trains too."""
    monkeypatch.chdir(tmp_path)
    base = f"init_from={shared_run('instruct')}"
    common = ["task=grpo", base, "--data", "mine.jsonl", "max_steps=3", "eval_every=3", "eval_decode=4",
              "completion_tokens=16", "group_size=4", "num_threads=1", "--quiet"]
    assert main(["train", *common, "reward=rw.py:short", "--out", "R"]) == 0
    assert all("reward_rw.py:short" in r for r in rows_of(tmp_path / "R") if r["split"] == "train")
    assert main(["train", *common, "lora_rank=4", "beta=0.04", "--out", "L"]) == 0
    assert all(r["kl"] >= 0 for r in rows_of(tmp_path / "L") if r["split"] == "train")


@pytest.mark.parametrize(("words", "needle"), [
    (["reward=rw.py:broken"], "reward rw.py:broken raised ValueError: no on training problem"),
    (["group_size=1"], "group_size=1 must be at least 2"),
    (["completion_tokens=400"], "completion_tokens=400 leaves no room"),
    (["loss_type=ppo"], "loss_type='ppo' is not one of grpo, dr_grpo, dapo"),
    (["beta=-1"], "beta=-1.0 must be >= 0"),
])
def test_a_run_that_cannot_be_is_one_line(shared_run, problems_file, tmp_path, capsys, monkeypatch, words, needle):
    monkeypatch.chdir(tmp_path)
    code = main(["train", "task=grpo", f"init_from={shared_run('instruct')}", "--data", "mine.jsonl", "max_steps=2",
                 "completion_tokens=8", "group_size=2", "num_threads=1", *words, "--out", "R"])
    assert needle in one_line(capsys, code)


def test_refusals_of_what_grpo_cannot_start_from_or_read(shared_run, tmp_path, capsys):
    """A classifier's base (it answers nothing), a problem without an answer (its file and line), and DPO keeps
    beta > 0 while GRPO takes beta=0."""
    problems = tmp_path / "p.jsonl"
    problems.write_text(json.dumps(PROBLEMS[0]) + "\n" + json.dumps({"question": "Add 1 and 1."}) + "\n")
    code = main(["train", "task=grpo", f"init_from={shared_run('classifier')}", "--data", str(problems),
                 "--out", str(tmp_path / "a")])
    assert "task=grpo starts from gpt" in one_line(capsys, code)
    code = main(["train", "task=grpo", f"init_from={shared_run('instruct')}", "--data", str(problems),
                 "--out", str(tmp_path / "b")])
    assert f"{problems} line 2 has no \"answer\"" in one_line(capsys, code)
    code = main(["train", "task=dpo", f"init_from={shared_run('instruct')}", "dataset=preferences", "beta=0",
                 "--out", str(tmp_path / "c")])
    assert "beta=0.0 must be > 0" in one_line(capsys, code)
    assert not any((tmp_path / n).exists() for n in "abc")


def test_instruction_tuning_reads_the_arithmetic_problems_as_records(tmp_path):
    """``task=instruct dataset=arithmetic`` (how the benchmark's start learns the problems' form): each problem an
    instruction, its worked answer the output."""
    from conftest import task_of

    task = task_of({"task": "instruct", "dataset": "arithmetic", "digits": 1, "operations": "+", "max_len": 256,
                    "tokenizer": "char", **dict(w.split("=") for w in shared_runs.TINY)})
    train = task.rows["train"]
    assert len(train) == 5000 and (len(task.rows["val"]), len(task.rows["test"])) == (12, 13)  # 100: a quarter held out
    assert train.values("response.text", [0])[0].split("\n")[-1].startswith("#### ")
