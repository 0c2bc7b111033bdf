"""Instruction tuning (``task=instruct``): the loss on the answers alone (prompt and padding get zero gradient),
Alpaca's template as the book writes it, a Hugging Face chat template rendered as ``transformers`` renders it, the
records read and refused in one line, the named dataset's split, and the commands as a user runs them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from scratchformer.app.cli import main
from scratchformer.checkpoints import load_checkpoint
from scratchformer.data.records import read_records
from scratchformer.data.templates import Template, find_template
from scratchformer.errors import ConfigError, DataError
from scratchformer.models import build_model
from scratchformer.settings.resolve import resolve
from scratchformer.tasks.build import build_task
from scratchformer.tasks.instruct import IGNORE, response_targets
from shared_runs import CHATML, INSTRUCT_MODEL, RECORDS, copy_of

DATA = Path(os.environ.get("SCRATCHFORMER_DATA", "../shared/data"))
BOOK = DATA / "instructions" / "instruction-data.json"
# the instruction runs' model (shared_runs.INSTRUCT_MODEL: two layers, a window of 256, which a run tuned from a
# base keeps: asserted below)
SMALL = INSTRUCT_MODEL


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err, err
    return err.splitlines()[-1]


@pytest.fixture
def records(shared_file) -> Path:
    """``RECORDS`` in a file, shared by every test (read-only)."""
    return shared_file("records.json")


def test_the_targets_are_the_response_and_its_end_token_only():
    rows = [[5, 6, 7, 8, 20, 21, 2], [5, 6, 20, 2]]  # prompts of 4 and 2 tokens, then the answer and <eos> (2)
    batch = response_targets(rows, [4, 2], pad_id=0)
    assert batch["x"].tolist() == [[5, 6, 7, 8, 20, 21], [5, 6, 20, 0, 0, 0]]
    assert batch["mask"].tolist() == [[True] * 6, [True] * 3 + [False] * 3]
    assert batch["y"].tolist() == [[IGNORE, IGNORE, IGNORE, 20, 21, 2], [IGNORE, 20, 2, IGNORE, IGNORE, IGNORE]]


def test_prompt_and_padding_get_zero_gradient(records):
    run = resolve(overrides={"task": "instruct", **dict(s.split("=") for s in SMALL)}, data=[str(records)])
    task = build_task(run.train, run.model, [str(records)], quiet=True)
    torch.manual_seed(0)
    model = build_model(task.model_config)
    seen = {}

    class Keep(torch.nn.Module):  # the model, keeping its logits' gradient
        def __init__(self):
            super().__init__()
            self.inner, self.config = model, model.config

        def forward(self, x, mask):
            seen["logits"] = logits = self.inner(x, mask)
            logits.retain_grad()
            return logits

    lengths = task.rows["train"].lengths("ids")
    batch = task.examples("train", [int(lengths.argmin()), 0, int(lengths.argmax())])  # padding in the short rows
    assert (~batch["mask"]).any()
    task.loss_sum(Keep(), batch, 0.0).backward()
    per_position = seen["logits"].grad.abs().sum(-1)  # (B, T)
    answer = batch["y"] != IGNORE
    assert (per_position[~answer] == 0).all()  # every prompt position and every pad: no gradient at all
    assert (per_position[answer] > 0).all()
    # as inputs, the pads are seen by no real token: their embeddings get no gradient (the prompt's do: it is read)
    kept = {}

    def keep(module, args, output):
        output.retain_grad()
        kept["x"] = output

    handle = model.embed.register_forward_hook(keep)
    task.loss_sum(model, batch, 0.0).backward()
    handle.remove()
    per_input = kept["x"].grad.abs().sum(-1)  # (B, T)
    assert (per_input[~batch["mask"]] == 0).all() and (per_input[batch["mask"]] > 0).all()


def test_a_row_scores_the_same_alone_and_padded_in_a_batch(records):
    run = resolve(overrides={"task": "instruct", **dict(s.split("=") for s in SMALL), "dropout": "0"},
                  data=[str(records)])
    task = build_task(run.train, run.model, [str(records)], quiet=True)
    model = build_model(task.model_config).eval()
    with torch.no_grad():
        lengths = task.rows["train"].lengths("ids")
        pair = [int(lengths.argmin()), int(lengths.argmax())]
        alone = sum(task.loss_sum(model, task.examples("train", [i]), 0.0) for i in pair)
        together = task.loss_sum(model, task.examples("train", pair), 0.0)
    torch.testing.assert_close(together, alone, atol=1e-4, rtol=1e-5)


def test_alpaca_template_as_the_book_writes_it():
    def book(entry):  # LLMs-from-scratch, chapter 7: format_input, then "\n\n### Response:\n" and the output
        text = ("Below is an instruction that describes a task. Write a response that appropriately completes the "
                f"request.\n\n### Instruction:\n{entry['instruction']}")
        return text + (f"\n\n### Input:\n{entry['input']}" if entry["input"] else "") + "\n\n### Response:\n"

    for record in (RECORDS[0], RECORDS[-1]):
        prompt, response = Template("alpaca").split(record)
        assert prompt == book(record) and response == record["output"]
    assert Template("alpaca").instruction("Spell the word backwards.", "cat") == book(RECORDS[-3])


def test_a_chat_template_renders_as_transformers_renders_it(tmp_path):
    transformers = pytest.importorskip("transformers", reason="a dev dependency: the reference renderer")
    from tokenizers import Tokenizer, models

    jinja = tmp_path / "chat_template.jinja"
    jinja.write_text(CHATML, encoding="utf-8")
    template = find_template("auto", tmp_path)
    assert template.name == "chat" and template.origin == str(jinja)
    chat = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "2+2?"},
                         {"role": "assistant", "content": "4"}]}
    prompt, response = template.split(chat)
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"x": 0}, unk_token="x")))
    hf.chat_template = CHATML
    assert prompt == hf.apply_chat_template(chat["messages"][:-1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n") and response == "4"
    # an Alpaca record under a chat template: the instruction and its input are the user's message
    prompt, _ = template.split(RECORDS[-1])
    assert prompt == "<|im_start|>user\nSpell the word backwards.\n\nsun<|im_end|>\n<|im_start|>assistant\n"
    # the folder's tokenizer_config.json holds it too (transformers 4's place for it)
    jinja.unlink()
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHATML}), encoding="utf-8")
    assert find_template("auto", tmp_path).source == CHATML
    assert find_template("alpaca", tmp_path).name == "alpaca"
    with pytest.raises(ConfigError, match="template=chat needs the base folder's chat template"):
        find_template("chat", None)


def test_json_lines_and_chats_are_read(tmp_path):
    path = tmp_path / "mixed.jsonl"
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}
    path.write_text(json.dumps(RECORDS[0]) + "\n\n" + json.dumps(chat) + "\n", encoding="utf-8")
    assert read_records(path) == [RECORDS[0], chat]


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("no_output.json", json.dumps([RECORDS[0], {"instruction": "x", "input": ""}]),
     "the record at index 1 has no \"output\""),
    ("no_output.jsonl", json.dumps(RECORDS[0]) + "\n" + json.dumps({"instruction": "x"}) + "\n",
     "line 2 has no \"output\""),
    ("role.jsonl", json.dumps({"messages": [{"role": "robot", "content": "x"}]}),
     "line 1: role 'robot' is not one of system, user, assistant"),
    ("last.jsonl", json.dumps({"messages": [{"role": "user", "content": "x"}]}),
     "the last message must be the assistant's"),
    ("empty.json", "  \n", "is empty"),
    ("none.json", "[]", "holds no records"),
    ("broken.json", "[{\"instruction\": ", "is not valid JSON (line 1"),
    ("number.jsonl", json.dumps({"instruction": "x", "output": 4}), "\"output\" must be a string, not int"),
])
def test_bad_records_are_refused_in_one_line(tmp_path, capsys, name, text, needle):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=needle.replace("(", r"\(")):
        read_records(path)
    out = tmp_path / "run"
    assert main(["train", "task=instruct", "--data", str(path), *SMALL, "max_steps=1", "--out", str(out)]) == 2
    assert needle in error_line(capsys) and not (out / "best").exists()


def test_a_template_that_cannot_render_is_refused_in_one_line(records, tmp_path, capsys):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ raise_exception('this template wants a system message') }}", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "task=instruct", "--data", str(records), f"template={bad}", *SMALL, "max_steps=1",
                 "--out", str(out)]) == 2
    line = error_line(capsys)
    assert f"the chat template of {bad} cannot render" in line and "wants a system message" in line
    bad.write_text("{% for m in messages %}", encoding="utf-8")  # not even Jinja
    assert main(["train", "task=instruct", "--data", str(records), f"template={bad}", *SMALL, "max_steps=1",
                 "--out", str(out)]) == 2
    assert "cannot render" in error_line(capsys)
    assert main(["train", "task=instruct", "--data", str(records), "template=nowhere.jinja", *SMALL, "--out",
                 str(out)]) == 2
    assert "template=nowhere.jinja is not alpaca, chat, auto or a .jinja file" in error_line(capsys)
    assert main(["train", "task=lm", "--data", str(records), "template=alpaca", *SMALL, "--out", str(out)]) == 2
    assert "template" in error_line(capsys)


@pytest.mark.skipif(not BOOK.is_file(), reason="the shared instruction records are absent (set SCRATCHFORMER_DATA)")
def test_the_named_dataset_is_split_as_the_book_splits_it():
    run = resolve(overrides={"task": "instruct", "dataset": "instructions", "data_dir": str(DATA)})
    task = build_task(run.train, run.model, None, quiet=True)
    assert {s: len(task.rows[s]) for s in ("train", "val", "test")} == {"train": 935, "val": 55, "test": 110}
    book = json.loads(BOOK.read_text(encoding="utf-8"))
    assert task.rows["test"].values("response.text", [0]) == [book[935]["output"]]
    assert task.rows["val"].values("response.text", [54]) == [book[-1]["output"]]


@pytest.mark.slow
@pytest.mark.skipif(not BOOK.is_file(), reason="the shared instruction records are absent (set SCRATCHFORMER_DATA)")
def test_the_readme_command_trains_from_scratch_and_logs_a_validation_loss(tmp_path):
    out = tmp_path / "run"
    assert main(["train", "task=instruct", "--data", str(BOOK), "d_model=64", "n_layers=2", "n_heads=2", "d_ff=128",
                 "max_steps=20", "eval_every=20", "num_threads=1", "--quiet", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if r["split"] == "val"]
    assert val and val[-1]["step"] == 20 and 0 < val[-1]["loss"] < 6


def test_instruct_from_a_gpt_run_then_generate_answers_an_instruction(records, shared_run, tmp_path, capsys):
    base = shared_run("lm-records") / "lm"  # a GPT of SMALL on the records' own words (init_from only reads it)
    out = tmp_path / "tuned"
    assert main(["train", "task=instruct", f"init_from={base}", "--data", str(records), "max_steps=30", "lr=3e-3",
                 "eval_every=30", "eval_decode=4", "num_threads=1", "--quiet", "--out", str(out)]) == 0
    ckpt = load_checkpoint(out)
    assert ckpt.extra["template"]["name"] == "alpaca" and ckpt.model_config.max_len == 256  # the base's length
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if r["split"] == "val"][-1]
    assert {"loss", "exact_match", "chrf"} <= set(val)
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(out), "--instruction", "Add 1 and 2.", "--greedy"]) == 0
    answer = capsys.readouterr().out
    assert "### Response" not in answer and "Below is an instruction" not in answer  # the answer alone
    assert main(["generate", "--ckpt", str(out)]) == 2
    assert "give --prompt TEXT" in error_line(capsys)
    assert main(["evaluate", "--ckpt", str(out), "--split", "val"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["examples"] == 3 and "chrf" in report and "exact_match" in report  # 10 % of 33 records


def test_a_base_that_is_not_a_gpt_is_refused_naming_the_pairs(records, shared_run, tmp_path, capsys):
    enc = shared_run("classifier")  # an encoder classifier (read-only: the refusal reads its config)
    capsys.readouterr()
    assert main(["train", "task=instruct", f"init_from={enc}", "--data", str(records), "max_steps=1", "--out",
                 str(tmp_path / "x")]) == 2
    line = error_line(capsys)
    assert "holds an encoder model; task=instruct starts from gpt" in line
    assert "task=classify from encoder or gpt" in line


def test_a_hugging_face_folder_brings_its_chat_template(records, shared_run, tmp_path, capsys):
    pytest.importorskip("transformers", reason="a dev dependency: it wrote the folder")
    # a random Qwen3 folder with its byte-level BPE (shared, copied: the test moves it), its end-of-text token id 0
    folder = copy_of(shared_run("hf-open") / "qwen3", tmp_path)
    for name in ("config.json", "generation_config.json"):  # as transformers writes them for eos_token_id=0
        config = json.loads((folder / name).read_text(encoding="utf-8"))
        (folder / name).write_text(json.dumps({**config, "eos_token_id": 0}), encoding="utf-8")
    (folder / "chat_template.jinja").write_text(CHATML, encoding="utf-8")
    out = tmp_path / "chat"
    assert main(["train", "task=instruct", f"init_from={folder}", "--data", str(records), "max_steps=2",
                 "eval_every=2", "max_len=96", "num_threads=1", "--quiet", "--out", str(out)]) == 0
    ckpt = load_checkpoint(out)
    assert ckpt.extra["template"]["name"] == "chat" and ckpt.extra["template"]["source"] == CHATML
    capsys.readouterr()
    assert main(["generate", "--ckpt", str(out), "--instruction", "Add 1 and 2.", "--greedy",
                 "--max-new-tokens", "5"]) == 0
    assert "<|im_start|>" not in capsys.readouterr().out  # the answer alone, not the prompt
    # the base moved away: evaluating the run reads its records in the template it was trained with, its own
    from scratchformer.data.roles import DataFiles
    from scratchformer.settings.config import TrainConfig

    folder.rename(tmp_path / "moved")
    task = build_task(TrainConfig.from_dict(ckpt.train), ckpt.model_config, DataFiles.from_dict(ckpt.extra["data"]),
                      tokenizer=ckpt.tokenizer, template=ckpt.extra["template"], quiet=True)
    assert task.rows["val"].texts("ids", [0])[0].startswith("<|im_start|>user\n")
    assert main(["evaluate", "--ckpt", str(out), "--split", "val"]) == 0


def test_an_empty_template_is_refused_before_anything_runs(records, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "task=instruct", "--data", str(records), "template=", *SMALL, "--out", str(out)]) == 2
    assert "template= is empty" in error_line(capsys) and not out.exists()
