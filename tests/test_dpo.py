"""Preference tuning (``task=dpo``): the records in their three forms, the named dataset's split, the loss and its
rewards as the paper writes them, the answer's log-probability on its tokens alone, cut and skipped records counted,
the reference (precomputed and saved with the run, or the model with its LoRA adapters off) equal to the start, so
that the first loss is ln 2, each refusal in one line, and the commands as a user runs them. Parity with trl:
``test_dpo_trl.py``."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
import torch

from conftest import exactly
from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.preferences import check_preference
from scratchformer.data.records import read_records
from scratchformer.data.roles import DataFiles
from scratchformer.errors import ConfigError, DataError
from scratchformer.nn.lora import adapters_off, add_lora
from scratchformer.tasks.build import build_task
from scratchformer.tasks.dpo import answer_logps, dpo_loss
from scratchformer.tasks.instruct import IGNORE
from shared_runs import CHATML, PREFERENCES, copy_of

DATA = Path(os.environ.get("SCRATCHFORMER_DATA", "../shared/data"))
SHARED = DATA / "preferences" / "instruction-data-with-preference.json"
# PREFERENCES (shared_runs.py): the records the shared DPO chain learns; test_dpo_trl.py imports them from here


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


def dpo_task(records, tmp_path: Path, **settings):
    """task=dpo on ``records`` (one file for training and validation alike), built as a run builds it."""
    path = tmp_path / "preferences.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    run = exactly({"task": "dpo", "beta": 0.1, "max_len": 256, **settings},
                  DataFiles(train=(str(path),), val=(str(path),)))
    return build_task(run.train, run.model, run.data, log=lambda line: None)


@pytest.fixture(scope="module")
def runs(shared_run) -> dict[str, Path]:
    """A small GPT (dropout 0.1) trained on text (``base``), instruction-tuned on the records' instructions
    (``instruct``), then tuned by DPO for 10 steps as the issue's bar runs it (``dpo``), and the records (``prefs``):
    made once per test run (``shared_run("dpo")``), read-only (a test that writes into one works on a copy)."""
    root = shared_run("dpo")
    return {"prefs": root / "preferences.json", "base": root / "base", "instruct": root / "instruct",
            "dpo": root / "dpo"}


def rows_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ---- the records
def test_the_three_forms_of_a_record_make_the_same_rows(runs, tmp_path):
    alpaca = {"instruction": "Say something about the fox.", "input": "", "chosen": "It jumps.", "rejected": "Lazy."}
    trl_form = {"prompt": "Say something about the fox.", "chosen": "It jumps.", "rejected": "Lazy."}
    user = [{"role": "user", "content": "Say something about the fox."}]
    conversational = {"prompt": user, "chosen": [{"role": "assistant", "content": "It jumps."}],
                      "rejected": [{"role": "assistant", "content": "Lazy."}]}
    chats = {"chosen": [*user, {"role": "assistant", "content": "It jumps."}],
             "rejected": [*user, {"role": "assistant", "content": "Lazy."}]}
    made = [dpo_task([form] * 2, tmp_path, init_from=str(runs["instruct"])).rows["train"].fields
            for form in (alpaca, trl_form, conversational, chats)]
    assert all(m == made[0] for m in made[1:])
    assert made[0]["prompt.text"][0].endswith("### Instruction:\nSay something about the fox.\n\n### Response:\n")
    tok = load_checkpoint(runs["instruct"]).tokenizer
    assert made[0]["chosen"][0][-1] == tok.eos_id and tok.decode(made[0]["chosen"][0]) == "It jumps."


def test_identical_answers_are_skipped_and_counted(runs, tmp_path):
    same = {"instruction": "Name a fox.", "chosen": "A fox.", "rejected": "A fox."}
    task = dpo_task([*PREFERENCES, same], tmp_path, init_from=str(runs["instruct"]))
    assert len(task.rows["train"]) == len(PREFERENCES)
    assert any("skipped 1 of 9 records whose chosen and rejected answers are the same" in n for n in task.data_notes())


@pytest.mark.parametrize(("record", "says"), [
    ({"instruction": "x", "chosen": "a"}, 'line 2 has no "rejected"'),
    ({"prompt": "x", "chosen": "a", "rejected": 3}, '"rejected" must be a string or a non-empty list'),
    ({"chosen": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "a"}],
      "rejected": [{"role": "user", "content": "y"}, {"role": "assistant", "content": "b"}]},
     "must be chats that differ only in their last message"),
    ({"prompt": "x", "chosen": [{"role": "user", "content": "a"}], "rejected": "b"},
     '"chosen": the last message must be the assistant\'s'),
])
def test_a_bad_record_is_refused_naming_the_file_and_line(record, says, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(PREFERENCES[0]) + "\n" + json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_records(path, check_preference)
    assert str(err.value).startswith(f"{path} line 2") and says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.skipif(not SHARED.is_file(), reason="the shared preference records are absent (set SCRATCHFORMER_DATA)")
def test_the_named_dataset_is_split_as_the_instruction_records(runs, tmp_path):
    run = exactly({"task": "dpo", "beta": 0.1, "max_len": 1024, "dataset": "preferences", "data_dir": str(DATA),
                   "init_from": str(runs["instruct"])})
    task = build_task(run.train, run.model, run.data, log=lambda line: None)
    book = json.loads(SHARED.read_text(encoding="utf-8"))
    skipped = {split: sum(r["chosen"] == r["rejected"] for r in part)
               for split, part in (("train", book[:935]), ("test", book[935:1045]), ("val", book[1045:]))}
    assert sum(skipped.values()) == 6
    assert {s: len(task.rows[s]) for s in skipped} == {s: n - skipped[s] for s, n in
                                                       (("train", 935), ("test", 110), ("val", 55))}
    # the instruction records in the same order: a split of one is the same records' split of the other, so no
    # instruction run taught a DPO run's test record (two test prompts repeat a training prompt's words: the book's
    # data holds "Generate a sentence using the word 'innovative'." three times)
    instructions = json.loads((DATA / "instructions" / "instruction-data.json").read_text(encoding="utf-8"))
    assert [(r["instruction"], r["input"], r["output"]) for r in book] == \
        [(r["instruction"], r["input"], r["output"]) for r in instructions]
    taught = {(r["instruction"], r["input"]) for r in instructions[:935]}
    assert sum((r["instruction"], r["input"]) in taught for r in book[935:1045]) == 2


# ---- the loss
def test_the_loss_is_ln2_at_the_start_and_the_paper_s_otherwise():
    logps = torch.tensor([[-10.0, -12.0], [-8.0, -5.0]])
    losses, rewards = dpo_loss(logps, logps.clone(), 0.1)
    torch.testing.assert_close(losses, torch.full((2,), math.log(2)))
    assert (rewards == 0).all()
    ref = torch.tensor([[-11.0, -11.0], [-8.0, -6.0]])
    losses, rewards = dpo_loss(logps, ref, 0.5)
    torch.testing.assert_close(rewards, torch.tensor([[0.5, -0.5], [0.0, 0.5]]))
    torch.testing.assert_close(losses, -torch.nn.functional.logsigmoid(torch.tensor([1.0, -0.5])))
    smoothed, _ = dpo_loss(logps, ref, 0.5, eps=0.1)  # conservative DPO: 10 % of the opposite preference
    torch.testing.assert_close(smoothed, 0.9 * losses - 0.1 * torch.nn.functional.logsigmoid(torch.tensor([-1.0, 0.5])))


def test_an_answer_s_log_probability_is_its_tokens_alone_whatever_the_padding(runs, tmp_path):
    task = dpo_task(PREFERENCES, tmp_path, init_from=str(runs["instruct"]))
    model = load_checkpoint(runs["instruct"]).model
    rows = task.rows["train"]
    batch = task.examples("train", range(len(rows)))
    assert (batch["y"][:, :, : min(len(p) for p in rows.fields["prompt"]) - 1] == IGNORE).all()
    with torch.no_grad():
        together = answer_logps(model, batch)
        for i in range(len(rows)):
            for j, key in enumerate(("chosen", "rejected")):
                ids = torch.tensor([rows.fields["prompt"][i] + rows.fields[key][i]])
                logp = model(ids[:, :-1]).log_softmax(-1)[0].gather(-1, ids[0, 1:, None])[:, 0]
                alone = logp[len(rows.fields["prompt"][i]) - 1:].sum()  # the answer's tokens and <eos>
                torch.testing.assert_close(together[i, j], alone, atol=1e-4, rtol=1e-5)
        assert answer_logps(model, task.examples("train", [0]))[0, 0] == pytest.approx(together[0, 0].item(), 1e-5)


def test_a_long_record_is_cut_as_instruction_tuning_cuts_it_and_a_full_prompt_skipped(runs, tmp_path):
    long = {**PREFERENCES[0], "chosen": "the quick brown fox " * 100}
    full = {**PREFERENCES[1], "instruction": "the lazy dog " * 200}
    logged = []
    path = tmp_path / "p.json"
    path.write_text(json.dumps([long, full, *PREFERENCES]), encoding="utf-8")
    run = exactly({"task": "dpo", "beta": 0.1, "max_len": 256, "init_from": str(runs["instruct"])}, [str(path)])
    task = build_task(run.train, run.model, DataFiles(train=(str(path),), val=(str(path),)), log=logged.append)
    assert any("cut 1 of 10 train records to the first 257 tokens" in line for line in logged)
    assert any("skipped 1 of 10 train records whose prompt fills max_len=256" in line for line in logged)
    assert len(task.rows["train"]) == 9 and task.examples("train", [0])["x"].shape[-1] == 256
    strict = exactly({"task": "dpo", "beta": 0.1, "max_len": 256, "init_from": str(runs["instruct"]),
                      "truncate": "error"})
    with pytest.raises(DataError, match="longer than 256 tokens"):
        build_task(strict.train, strict.model, DataFiles(train=(str(path),), val=(str(path),)), log=logged.append)


# ---- the reference
def test_the_adapters_off_are_the_base_and_the_first_loss_is_ln2_either_way(runs, tmp_path):
    task = dpo_task(PREFERENCES, tmp_path, init_from=str(runs["instruct"]))
    model = load_checkpoint(runs["instruct"]).model.train()
    batch = task.examples("train", range(len(PREFERENCES)))
    with torch.no_grad():
        base = answer_logps(model.eval(), batch)
    add_lora(model, 4, 8.0, "all")
    for name, p in model.named_parameters():  # the adapters moved off zero: with them on, the model differs
        if "lora_" in name:
            p.data.normal_(0, 0.1)
    with torch.no_grad():
        assert (answer_logps(model, batch) - base).abs().max() > 1e-3
        with adapters_off(model):
            assert torch.equal(answer_logps(model, batch), base)
    for setting in ("adapters", "precomputed"):
        fresh = load_checkpoint(runs["instruct"]).model
        add_lora(fresh, 4, 8.0, "all")
        lora = dpo_task(PREFERENCES, tmp_path, init_from=str(runs["instruct"]), lora_rank=4, reference=setting)
        lora.start(fresh.train(), None, False)  # dropout off (the base has 0.1)
        assert (lora.strategy, bool(lora.tables)) == (setting, setting == "precomputed")
        step = lora.examples("train", range(len(PREFERENCES)))
        loss = lora.loss_sum(fresh, step, 0.0) / lora.count(step)
        assert loss.item() == pytest.approx(math.log(2), abs=1e-5)


# ---- refusals
@pytest.mark.parametrize(("words", "says"), [
    (["beta=0"], "beta=0.0 must be > 0"),
    (["beta=-1"], "beta=-1.0 must be > 0"),
    (["reference=adapters"], "reference=adapters is the model with its LoRA adapters off"),
])
def test_a_bad_setting_is_refused_in_one_line(words, says, runs, tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["train", "task=dpo", f"init_from={runs['instruct']}", "--data", str(runs["prefs"]), *words,
                 "--out", str(out)]) == 2
    assert says in error_line(capsys) and not out.exists()


def test_no_base_and_a_base_that_is_no_language_model_are_refused(runs, tmp_path, capsys):
    assert main(["train", "task=dpo", "--data", str(runs["prefs"]), "--out", str(tmp_path / "x")]) == 2
    assert "task=dpo tunes a model that already answers: give init_from=" in error_line(capsys)
    labelled = tmp_path / "l.tsv"
    labelled.write_text("a good film\t1\na bad film\t0\n" * 20, encoding="utf-8")
    cls = tmp_path / "cls"
    assert main(["train", "task=classify", f"init_from={runs['base']}", "--data", str(labelled), "max_steps=1",
                 "max_len=384", "eval_every=1", "--quiet", "--out", str(cls)]) == 0
    capsys.readouterr()
    assert main(["train", "task=dpo", f"init_from={cls}", "--data", str(runs["prefs"]), "--out",
                 str(tmp_path / "y")]) == 2
    assert "holds a gpt-classifier model; task=dpo starts from gpt" in error_line(capsys)


def test_beta_is_a_dpo_setting():
    with pytest.raises(ConfigError, match="beta works with task=dpo"):
        exactly({"task": "instruct", "beta": 0.1}).train  # noqa: B018


# ---- the commands, as the bar runs them
def test_the_run_logs_margin_and_reward_accuracy_from_ln2_then_answers(runs, capsys):
    rows = rows_of(runs["dpo"])
    train = [r for r in rows if r["split"] == "train"]
    assert train[0]["step"] == 1 and abs(train[0]["loss"] - math.log(2)) < 0.02
    val = [r for r in rows if r["split"] == "val"][-1]
    for row in (train[-1], val):
        assert {"reward_chosen", "reward_rejected", "reward_margin", "reward_accuracy"} <= set(row)
    assert val["reward_margin"] > 0 and val["reward_accuracy"] > 0.5  # lr 1e-3: it learns the 8 pairs
    ckpt = load_checkpoint(runs["dpo"])
    assert ckpt.extra["template"]["name"] == "alpaca" and (runs["dpo"] / "reference.safetensors").is_file()
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(runs["dpo"]), "--instruction", "Say something about the fox.",
                 "--greedy", "--max-new-tokens", "12"]) == 0
    answer = capsys.readouterr().out
    assert answer.strip() and "### Response" not in answer and "Below is an instruction" not in answer


def test_evaluate_reports_the_rewards_and_the_closeness_of_the_answers(runs, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--ckpt", str(runs["dpo"]), "--split", "val"]) == 0
    report = json.loads(capsys.readouterr().out)
    val = [r for r in rows_of(runs["dpo"]) if r["split"] == "val"][-1]
    assert report["examples"] == len(PREFERENCES)
    assert report["reward_margin"] == pytest.approx(val["reward_margin"], rel=1e-4)  # the base reloaded as reference
    assert 0 <= report["closer_to_chosen"] <= 1 and "chrf_chosen" in report


def test_train_prints_reward_accuracy_as_a_percentage(runs, tmp_path, capsys):
    """The registry says reward accuracy is a fraction: every validation line of ``train`` prints it as one."""
    capsys.readouterr()
    assert main(["train", "task=dpo", f"init_from={runs['instruct']}", "--data", str(runs["prefs"]), "--val",
                 str(runs["prefs"]), "max_steps=2", "eval_every=1", "num_threads=1", "--out", str(tmp_path / "r")]) == 0
    said = capsys.readouterr()
    lines = [line for line in (said.out + said.err).splitlines() if "validation" in line]
    assert len(lines) >= 3, said  # steps 1 and 2, and the kept checkpoint's at the end
    assert all(re.search(r"reward_accuracy \d{1,3}\.\d\d %", line) for line in lines), lines
    assert not any(re.search(r"reward_margin [-+.\de]+ %", line) for line in lines)  # a difference of rewards: a number


def test_report_tables_the_tasks_metrics_and_picks_the_best_row_by_select_by(runs, tmp_path):
    """``report``'s table shows DPO's validation metrics (reward accuracy as a percentage), its best row the one
    the task's ``select_by`` (the loss) picks, though another row has the better reward accuracy."""
    run = copy_of(runs["dpo"], tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["train"].pop("select_by", None)  # as a run saved without it: the task's own decides
    (run / "config.json").write_text(json.dumps(config))
    with open(run / "metrics.jsonl", "a") as f:
        for step, loss, accuracy in ((11, 0.25, 0.5), (12, 0.5, 1.0)):
            f.write(json.dumps({"step": step, "split": "val", "loss": loss, "perplexity": math.exp(loss),
                                "reward_accuracy": accuracy, "reward_margin": 1.0, "closer_to_chosen": 0.5}) + "\n")
    assert main(["report", "--ckpt", str(run)]) == 0
    final = (run / "report.md").read_text().split("## Final metrics")[1].split("\n## ")[0]
    table = [line for line in final.splitlines() if line.startswith("|") and not line.startswith("|---")]
    cells = {row[0]: row[1:] for row in ([c.strip() for c in line.strip("|").split("|")] for line in table)}
    heads = next(row for name, row in cells.items() if name == "")
    assert list(cells)[1:] == [
        "loss", "perplexity", "reward accuracy (`reward_accuracy`)", "reward margin (`reward_margin`)",
        "closer to chosen (`closer_to_chosen`)"]
    accuracy = cells["reward accuracy (`reward_accuracy`)"]  # one row names the metric beside its percentages
    assert "validation, best loss (step 11)" in heads and accuracy[heads.index("validation, best loss (step 11)")] \
        == "50.00 %", heads
    last = next(h for h in heads if h.startswith("validation, last"))
    assert accuracy[heads.index(last)] == "100.00 %", heads


def test_a_resumed_run_reads_its_reference_back_and_lora_and_trainable_train(runs, tmp_path, capsys):
    resumed = copy_of(runs["dpo"], tmp_path)  # the resume writes into the run: a copy of the shared one
    assert main(["train", "--resume", "--out", str(resumed), "max_steps=12"]) == 0
    assert "read back from, in reference.safetensors" in capsys.readouterr().err
    for words in (["lora_rank=4", "lora_targets=all"], ["trainable=last:1"]):
        out = tmp_path / words[0].split("=")[0]
        assert main(["train", "task=dpo", f"init_from={runs['instruct']}", "--data", str(runs["prefs"]), *words,
                     "max_steps=3", "eval_every=3", "lr=1e-3", "num_threads=1", "--quiet", "--out", str(out)]) == 0
        first = rows_of(out)[0]
        assert first["step"] == 1 and first["loss"] == pytest.approx(math.log(2), abs=1e-4)


def test_a_hugging_face_folder_with_a_chat_template_tuned_with_lora(shared_run, tmp_path, capsys):
    """A GPT-2 folder with its chat template: the records are asked in that template, the reference is the folder
    with the adapters off (no table), the first loss is ln 2, and generate asks in the same template."""
    pytest.importorskip("transformers", reason="a dev dependency: it writes the folder")
    folder = copy_of(shared_run("hf-trl") / "gpt2", tmp_path)  # test_dpo_trl's GPT-2 folder, given a template
    (folder / "chat_template.jinja").write_text(CHATML, encoding="utf-8")
    prefs = tmp_path / "p.jsonl"
    prefs.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": r["instruction"]}],
                                         "chosen": [{"role": "assistant", "content": r["chosen"]}],
                                         "rejected": r["rejected"]}) + "\n" for r in PREFERENCES), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "task=dpo", f"init_from={folder}", "--data", str(prefs), "--val", str(prefs), "lora_rank=4",
                 "lr=1e-3", "max_steps=2", "eval_every=2", "num_threads=1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the reference: the model with its LoRA adapters off" in err and not (out / "reference.safetensors").exists()
    first = rows_of(out)[0]
    assert first["loss"] == pytest.approx(math.log(2), abs=1e-5)
    ckpt = load_checkpoint(out)
    assert ckpt.extra["template"]["name"] == "chat" and ckpt.extra["template"]["source"] == CHATML
    assert main(["generate", "--ckpt", str(out), "--instruction", "Say something.", "--greedy",
                 "--max-new-tokens", "4"]) == 0
    assert "<|im_start|>" not in capsys.readouterr().out
