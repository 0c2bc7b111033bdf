"""Your own text, the whole way: the README's recipe (pretrain a character model on a book with a window that holds a
prompt template, tune it on instructions, then on preferences, benchmark it, report it, export it to llama.cpp, serve
it) run as written on a small text of the test's own, and the fault lines a newcomer met on the way: a base whose
window cannot hold the template (refused in one line, nothing left behind), a book without the template's characters
(added, and said), a report that tells the steps a run took and the commands that make it again, a time budget that
reaches the schedule's floor when the machine slows down during the decay."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request

import pytest
import torch

import shared_runs
from conftest import REPO, SHARED_DATA, needs_data
from scratchformer.app.cli import main

README = (REPO / "README.md").read_text(encoding="utf-8")
RECIPE = re.search(r"<!-- own-text -->\n```\n(.*?)```", README, re.S)
# The recipe's runs, made small: a tiny model and a few steps each (the README's commands, these words appended)
SMALL = {"--preset": ["d_model=32", "n_layers=1", "n_heads=2", "d_ff=64", "max_steps=15", "batch_size=2",
                      "eval_every=15", "eval_batches=1"],
         "task=instruct": ["max_steps=3", "eval_every=3", "batch_size=4"],
         "task=dpo": ["max_steps=2", "eval_every=2", "batch_size=4"]}
# A book as books are (every letter, both cases, digits and the usual punctuation), but no '#': Alpaca's headings
# have it
BOOK = ("It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin nuzzled "
        "into his breast in an effort to escape the vile wind, slipped quickly through the glass doors of Victory "
        "Mansions: \"Quite so,\" said Julia; Xavier, Yvonne and Zoe (Ken, Olga, Hugh, Dora, Vera, Ursula, Gwen, "
        "Fred, Boris, Edna, Lena, Ned, Quincy, Tom, Rex, Pat, Jack, Carl, Mike, Sam, Walt) paid 1,234 or 56.78-9 "
        "pounds -- a colour of grey!\n") * 40
INSTRUCTION = "Name a colour."


def recipe_commands() -> list[list[str]]:
    """The README's recipe: each line a command (``scratchformer`` dropped), comments dropped."""
    assert RECIPE, "README.md has no recipe between <!-- own-text --> and its code block"
    lines = [line.split("  #")[0].strip() for line in RECIPE.group(1).splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("scratchformer ")]


def one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ------------------------------------------------------------------------------------ the recipe, run as written


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    """The README's recipe in a folder of its own, on ``my_book.txt`` (a text of this test's), each command as
    written with ``SMALL``'s words after a ``train``; what each printed. ``serve`` runs in the test that asks."""
    folder = tmp_path_factory.mktemp("own-text")
    (folder / "my_book.txt").write_text(BOOK, encoding="utf-8")
    before, outputs, data = os.getcwd(), {}, os.environ.get("SCRATCHFORMER_DATA")
    os.chdir(folder)
    os.environ["SCRATCHFORMER_DATA"] = str(SHARED_DATA)  # absolute: the recipe runs in a folder of its own
    try:
        for argv in recipe_commands():
            if argv[0] == "serve":
                outputs["serve"] = argv
                continue
            extra = next((words for key, words in SMALL.items() if key in argv), [])
            if argv[0] == "evaluate":  # a few questions
                argv = [("5" if a.isdigit() else a) for a in argv]
            out, err = _run(argv + (extra if argv[0] == "train" else []))
            outputs.setdefault(argv[0], []).append((argv, out, err))
    finally:
        os.chdir(before)
        os.environ.pop("SCRATCHFORMER_DATA") if data is None else os.environ.update(SCRATCHFORMER_DATA=data)
    return folder, outputs


def _run(argv: list[str]) -> tuple[str, str]:
    """``scratchformer ARGV`` in this process: its standard output and error (it must succeed)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, f"scratchformer {' '.join(argv)} failed: {err.getvalue()[-2000:]}"
    return out.getvalue(), err.getvalue()


@needs_data("instructions/instruction-data.json", "preferences/instruction-data-with-preference.json",
            "benchmarks/arc_easy_validation.jsonl.gz")
@pytest.mark.slow
def test_the_readme_recipe_runs_as_written_on_a_text_of_its_own(recipe):
    """Pretraining says its window; the instruction run adds the template's characters its book lacked (said, and in
    its tokenizer); DPO prints its reward accuracy; the benchmark, report and GGUF export each write what they say;
    every ``.safetensors`` follows the umask (readable by group and others under 022)."""
    folder, outputs = recipe
    assert [argv[0] for argv in recipe_commands()] == ["train", "train", "train", "generate", "evaluate", "report",
                                                        "export", "serve"]
    pretrain, instruct, dpo = outputs["train"]
    assert "max_len 512" in pretrain[2]
    assert "its vocabulary gains '#'" in instruct[2]  # the book has no '#'; Alpaca's headings do
    chat_run = folder / instruct[0][instruct[0].index("--out") + 1]
    assert "#" in json.loads((chat_run / "best" / "tokenizer.json").read_text())["chars"]
    assert re.search(r"reward_accuracy [\d.]+ ?%", dpo[1] + dpo[2]), dpo[1]
    answer = outputs["generate"][0][1].strip()
    assert answer and "<unk>" not in answer
    scored = outputs["evaluate"][0][1]
    assert re.search(r"^arc_easy +5 +[\d.]+ % ± [\d.]+", scored, re.M) and "benchmarks.json" in scored, scored
    report = (folder / dpo[0][dpo[0].index("--out") + 1] / "report.md").read_text()
    assert "## Where it started" in report and "## Make it again" in report
    export = outputs["export"][0]
    assert (folder / export[0][export[0].index("--out") + 1]).is_file() and "chat template" in export[1]
    old = os.umask(0o022)
    os.umask(old)
    for weights in folder.rglob("*.safetensors"):
        assert weights.stat().st_mode & 0o044 == 0o044 or old & 0o044, weights  # readable by group and others


@needs_data("instructions/instruction-data.json", "preferences/instruction-data-with-preference.json",
            "benchmarks/arc_easy_validation.jsonl.gz")
@pytest.mark.slow
def test_the_dpo_report_names_its_chain_its_units_and_commands_that_remake_it(recipe):
    """The DPO run's report: the runs it came from (the instruction run, then the pretraining), the steps it took,
    its loss in nats per pair, and commands that remake the chain from the folder it was started in."""
    folder, outputs = recipe
    dpo = outputs["train"][2][0]
    run = folder / dpo[dpo.index("--out") + 1]
    report = (run / "report.md").read_text()
    started = report.split("## Where it started")[1].split("##")[0]
    assert "task=instruct" in started and "task=lm" in started and started.index("instruct") < started.index("lm")
    assert "2 steps of 4 examples" in report and "loss in nats per pair" in report
    block = report.split("## Make it again")[1].split("```")[1].strip().splitlines()
    trains = [line for line in block if line.startswith("scratchformer train")]
    assert block == trains and len(trains) == 3  # one folder: no cd
    assert "my_book.txt" in trains[0] and "task=instruct" in trains[1] and "task=dpo" in trains[2]
    assert "`my_book.txt`" in report.split("## Make it again")[1]  # marked as the user's own file


@needs_data("instructions/instruction-data.json", "preferences/instruction-data-with-preference.json",
            "benchmarks/arc_easy_validation.jsonl.gz")
@pytest.mark.slow
def test_llama_cpp_and_the_server_answer_an_instruction_as_generate_does(recipe):
    """The GGUF export carries the run's template: llama.cpp renders an instruction in it (llama-cpp-python's chat
    completion: its own Jinja rendering and tokenizer) and answers greedily what ``generate --instruction`` answers;
    the server (the recipe's ``serve`` command) answers the same."""
    folder, outputs = recipe
    argv = outputs["generate"][0][0]
    ckpt, new = folder / argv[argv.index("--ckpt") + 1], 40
    expected = _run(["generate", "--ckpt", str(ckpt), "--instruction", INSTRUCTION, "--greedy", "--max-new-tokens",
                     str(new)])[0].rstrip("\n")
    export = outputs["export"][0][0]
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama.cpp checks need llama-cpp-python "
                                                        "(pip install -e \".[llama]\")")
    model = llama_cpp.Llama(str(folder / export[export.index("--out") + 1]), n_ctx=512, verbose=False)
    said = model.create_chat_completion([{"role": "user", "content": INSTRUCTION}], temperature=0, max_tokens=new)
    assert said["choices"][0]["message"]["content"] == expected
    # the server, started by the recipe's command (in a process of its own: a server), asked over HTTP
    serve = outputs["serve"]
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", *serve, "--port", "0"], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        url = None
        while url is None:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            url = next(iter(re.findall(r"OpenAI API at (\S+?),", line)), None)
        body = json.dumps({"model": ckpt.name, "messages": [{"role": "user", "content": INSTRUCTION}],
                           "temperature": 0, "max_tokens": new}).encode()
        request = urllib.request.Request(f"{url}/chat/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert json.loads(response.read())["choices"][0]["message"]["content"] == expected
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


# ------------------------------------------------------------------------------------ refused, or widened, and said


def test_instruct_from_a_short_window_is_refused_in_one_line_before_anything_is_written(shared_run, tmp_path,
                                                                                         capsys):
    """A character model of nanoGPT's window (the shared one reads 32 characters) cannot hold Alpaca's template:
    one line that says what window to pretrain with, exit code 2, no run folder (the retry needs no --resume)."""
    out = tmp_path / "inst"
    code = main(["train", "task=instruct", f"init_from={shared_run('lm')}", "--data",
                 str(shared_runs.data_file(tmp_path, "records.json")), "max_steps=5", "--out", str(out)])
    err = one_line_error(capsys, code)
    assert "reads 32 tokens at most" in err and "alpaca template alone takes" in err and "max_len=512" in err
    assert not out.exists()


def test_the_template_s_characters_are_added_to_a_character_model_that_lacks_them(tmp_path, capsys):
    """A book without '#', ':' or any capital: the instruction run starts from its weights with a vocabulary that
    gains each character Alpaca's template writes (said once), the old ids unchanged and the old rows as they were."""
    from scratchformer.checkpoints import load_checkpoint
    from scratchformer.tokenizers import load_tokenizer

    book = tmp_path / "book.txt"
    book.write_text("the cat sat on the mat and the dog ran off.\n" * 200, encoding="utf-8")
    base = tmp_path / "book"
    assert main(["train", "task=lm", "--data", str(book), *shared_runs.TINY, "max_len=256", *shared_runs.QUICK,
                 "--out", str(base)]) == 0
    out = tmp_path / "inst"
    words = ["train", "task=instruct", f"init_from={base}", "--data", str(shared_runs.data_file(tmp_path,
             "records.json")), "max_len=256", "max_steps=1", "eval_every=1", "--out", str(out)]
    assert main(words) == 0
    err = capsys.readouterr().err
    said = re.search(r"its vocabulary gains (.*?): the prompt template writes them", err)
    assert said and "'#'" in said.group(1) and "'B'" in said.group(1), err
    old, new = load_tokenizer(base / "best"), load_tokenizer(out / "best")
    assert new.chars[:len(old.chars)] == old.chars and {"#", ":", "B", "I", "R"} <= set(new.chars)
    assert load_checkpoint(out / "best").model.config.vocab_size == new.vocab_size
    # the model the run starts from: the base's rows as they were, each new one the mean of the base's
    from scratchformer.settings.resolve import resolve
    from scratchformer.train.fine_tune import starting_point

    start = starting_point(resolve(overrides=dict(w.split("=", 1) for w in words if "=" in w and "/" not in w[:5])
                                   | {"init_from": str(base)}))
    before, after, n = load_checkpoint(base / "best").model, start.load(torch.float32), old.vocab_size
    torch.testing.assert_close(after.embed.token.weight[:n], before.embed.token.weight[:n])
    torch.testing.assert_close(after.embed.token.weight[n:], before.embed.token.weight.mean(0).expand(
        new.vocab_size - n, -1))


def test_alpaca_s_template_as_jinja_renders_as_generate_asks():
    """``ALPACA_JINJA`` (what exports carry) renders every conversation as ``Template("alpaca")`` writes it, in this
    project's sandbox and in ``transformers``' ``apply_chat_template``."""
    from scratchformer.data.templates import ALPACA_JINJA, Template, _render

    chats = [[{"role": "user", "content": "Name a colour."}],
             [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}],
             [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
              {"role": "user", "content": "c"}]]
    transformers = pytest.importorskip("transformers", reason="the hf extra renders chat templates as transformers")
    tokenizers = pytest.importorskip("tokenizers")
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(
        {"<unk>": 0}, unk_token="<unk>")))
    for chat in chats:
        want = Template("alpaca").prompt(chat)
        assert _render(ALPACA_JINJA, chat, {}, "test") == want
        assert hf.apply_chat_template(chat, chat_template=ALPACA_JINJA, tokenize=False,
                                      add_generation_prompt=True) == want


# ------------------------------------------------------------------------------ a time budget on a slowing machine


def _slowing_clock(monkeypatch, step_s: float, slower_s: float, after: int):
    """The run's clock made a fake one: each step moves it by ``step_s``, by ``slower_s`` from step ``after`` on."""
    from types import SimpleNamespace

    from scratchformer.train import budget, trainer

    clock = SimpleNamespace(now=0.0, steps=0)
    monkeypatch.setattr(trainer, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    monkeypatch.setattr(budget, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    step = trainer.Trainer.train_step

    def train_step(self, i):
        clock.steps += 1
        clock.now += step_s if clock.steps <= after else slower_s
        return step(self, i)

    monkeypatch.setattr(trainer.Trainer, "train_step", train_step)
    return clock


def test_max_time_reaches_the_floor_when_the_machine_slows_during_the_decay(tmp_path, capsys, monkeypatch):
    """Steps take 10 ms, then twice as long once the decay is well under way (a shared machine): the length is
    fitted again during the decay, which goes on from its current rate to min_lr at the new end, so the run takes
    its whole (shorter) schedule within the budget and ends on the floor; the settings printout says how max_time set
    the steps."""
    clock = _slowing_clock(monkeypatch, 0.01, 0.02, after=300)
    out = tmp_path / "run"
    assert main(["train", "--preset", "copy", *shared_runs.TINY, "max_time=8s", "min_lr=1e-5", "n_test=10",
                 "eval_decode=0", "eval_every=100000", "log_every=1", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"max_time=8s: max_steps=[\d,]+, the steps that fit", err) and "max_steps=0" not in err
    planned = json.loads((out / "config.json").read_text())["train"]["max_steps"]
    last = json.loads((out / "last" / "config.json").read_text())
    assert "time budget" not in err and last["step"] == last["train"]["max_steps"] < 0.9 * planned
    lrs = [r["lr"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if r["split"] == "train"]
    assert lrs[-1] == pytest.approx(1e-5, rel=0.05) and clock.now < 8  # the floor, within the budget


def test_a_report_of_a_run_cut_by_its_time_budget_says_the_steps_taken_and_remakes_it(tmp_path, capsys,
                                                                                       monkeypatch):
    """A run whose steps slow down past its budget before a fit can follow (each late step takes 2 s of an 8 s budget)
    stops early: its report says the steps it took of those planned, and its "make it again" command, run from the
    folder the report names, trains again."""
    pytest.importorskip("matplotlib", reason="the report draws its curves (pip install -e \".[plots]\")")
    _slowing_clock(monkeypatch, 0.01, 2.0, after=120)
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    (folder / "book.txt").write_text(BOOK, encoding="utf-8")
    assert main(["train", "task=lm", "--data", "book.txt", *shared_runs.TINY, "max_len=32", "batch_size=4",
                 "max_time=8s", "eval_every=100000", "eval_batches=1", "--out", "runs/book"]) == 0
    assert "time budget" in capsys.readouterr().err
    assert main(["report", "--ckpt", "runs/book"]) == 0
    report = (folder / "runs" / "book" / "report.md").read_text()
    taken = json.loads((folder / "runs/book/last/config.json").read_text())["step"]
    planned = json.loads((folder / "runs/book/config.json").read_text())["train"]["max_steps"]
    assert f"{taken:,} steps (of {planned:,} planned: the time budget max_time was spent)" in report
    block = report.split("## Make it again")[1].split("```")[1].strip().splitlines()
    assert len(block) == 1 and block[0].startswith("scratchformer train --data book.txt ") and "max_time=8s" in block[0]
    assert block[0].endswith(" --out runs/book"), block
    monkeypatch.undo()  # the real clock again
    monkeypatch.chdir(folder)
    words = shlex.split(block[-1])[1:]
    words = [w for w in words if not w.startswith("max_time=")] + ["max_steps=2"]
    words[words.index("--out") + 1] = "runs/again"
    assert main(words) == 0 and (folder / "runs" / "again" / "last").is_dir()


# ------------------------------------------------------------------------------------ the smaller things


def test_a_report_without_matplotlib_is_one_line_and_leaves_no_folder(shared_run, tmp_path, capsys, monkeypatch):
    run = shared_runs.copy_of(shared_run("lm"), tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails, as when it is not installed
    err = one_line_error(capsys, main(["report", "--ckpt", str(run)]))
    assert 'pip install -e ".[plots]"' in err and not (run / "report").exists() and not (run / "report.md").exists()


@pytest.mark.parametrize("argv,hint", [
    (["evaluate", "--ckpt", "{lm}", "--benchmark", "hellaswg", "--limit", "2"], "did you mean hellaswag?"),
    (["train", "--max-steps", "100", "--out", "{out}"], "did you mean max_steps=100?"),
    (["train", "--preset", "shakspeare-char", "--out", "{out}"], "did you mean shakespeare-char?"),
])
def test_a_near_miss_is_answered_with_what_was_meant(shared_run, tmp_path, capsys, argv, hint):
    names = {"lm": str(shared_run("lm")), "out": str(tmp_path / "out")}
    err = one_line_error(capsys, main([a.format(**names) for a in argv]))
    assert hint in err and not (tmp_path / "out").exists()


def test_weights_follow_the_umask_as_every_other_file_does(shared_run, tmp_path):
    """``model.safetensors`` was written 0600 (safetensors' own mode) while every other file followed the umask."""
    old = os.umask(0o022)
    try:
        out = tmp_path / "run"
        assert main(["train", "task=lm", "--data", str(shared_runs.data_file(tmp_path, "text.txt")),
                     *shared_runs.TINY, "max_len=32", *shared_runs.QUICK, "average_last=2", "save_every=3",
                     "--out", str(out)]) == 0
    finally:
        os.umask(old)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".safetensors" for p in files)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in files if p.stat().st_mode & 0o777 != 0o644} == {}
