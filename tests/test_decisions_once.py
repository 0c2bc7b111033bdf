"""Each decision taken once (issue "The house, tidied"): a family's fields are asked through its entry, a tokenizer's
kind through the tokenizer's own methods, sharded training decided in one place, metrics formatted by one helper, and
classes imported rather than looked up by name. Each check counts what it forbids in ``src/``, and a check of the
checker shows that it sees each form."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scratchformer"
SOURCES = sorted(PACKAGE.rglob("*.py"))
TOKENIZER_KINDS = {"char", "bpe", "pretrained"}


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


@functools.cache
def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"))


def _items(node: ast.Compare) -> list[ast.AST]:
    """Every operand of a comparison, the members of a literal tuple, list or set among them."""
    sides = [node.left, *node.comparators]
    return [i for side in sides for i in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side])]


def _strings(node: ast.Compare) -> set[str]:
    return {i.value for i in _items(node) if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def _equality(node: ast.AST) -> bool:
    return isinstance(node, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                 for op in node.ops)


def compares_a_family_field(node: ast.AST) -> bool:
    """``x.reads`` or ``x.output`` compared with anything, or ``"pixels"`` or ``"next-token"`` compared."""
    if not _equality(node):
        return False
    fields = any(isinstance(i, ast.Attribute) and i.attr in ("reads", "output") for i in _items(node))
    return fields or bool(_strings(node) & {"pixels", "next-token"})


def compares_a_tokenizer_kind(node: ast.AST) -> bool:
    return _equality(node) and bool(_strings(node) & TOKENIZER_KINDS)


def reaches_hf(node: ast.AST) -> bool:
    """``x.hf`` or ``getattr(x, "hf", ...)``: the Hugging Face tokenizer inside a pretrained one."""
    if isinstance(node, ast.Attribute):
        return node.attr == "hf"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "hf")


def compares_shard(node: ast.AST) -> bool:
    if not _equality(node) or "fsdp" not in _strings(node):
        return False
    return any(getattr(i, "attr", getattr(i, "id", None)) == "shard" for i in _items(node))


def defines_fmt(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "_fmt"


def calls_import_module(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "import_module"


@functools.cache
def _nodes() -> list[tuple[str, ast.AST]]:
    """(file, node) of every node of ``src/`` that a check looks at: the comparisons, calls, attributes and defs."""
    kinds = (ast.Compare, ast.Call, ast.Attribute, ast.FunctionDef, ast.AsyncFunctionDef)
    return [(_name(p), node) for p in SOURCES for node in ast.walk(_tree(p)) if isinstance(node, kinds)]


def _found(check, skip: tuple[str, ...] = ()) -> list[str]:
    return [f"{name}:{node.lineno}" for name, node in _nodes() if not name.startswith(skip) and check(node)]


def test_a_familys_fields_are_asked_through_its_entry():
    assert not _found(compares_a_family_field, ("families.py",))


def test_a_tokenizers_kind_is_compared_in_its_own_home_only():
    # onnx_decode.py runs alone beside an export (numpy and tokenizers, no scratchformer): it reads the kind it is
    # given from the export's JSON
    found = _found(compares_a_tokenizer_kind, ("tokenizers/", "settings/"))
    assert len(found) <= 3 and all(f.startswith("interop/onnx_decode.py") for f in found), found


def test_no_caller_reaches_through_a_tokenizer_to_its_hugging_face_object():
    assert not _found(reaches_hf, ("tokenizers/", "interop/", "formats/"))


def test_sharded_training_is_decided_once():
    assert len(_found(compares_shard)) == 1, _found(compares_shard)


def test_one_helper_formats_a_metric():
    assert len(_found(defines_fmt)) <= 1, _found(defines_fmt)


def test_classes_are_imported_not_looked_up_by_name():
    # the command table, the optional-package helper and the lazy exports name modules by design
    assert not _found(calls_import_module, ("app/cli.py", "extras.py", "lazy.py"))


def test_the_checks_see_each_form():
    def sees(check, code: str) -> bool:
        return any(check(node) for node in ast.walk(ast.parse(code)))

    assert all(sees(compares_a_family_field, c) for c in ('entry.reads == "tokens"', 'f.output in spec[0]',
                                                          'x != "pixels"', '"next-token" in outputs'))
    assert not sees(compares_a_family_field, "entry.reads_pixels") and not sees(compares_a_family_field, "a < b")
    assert all(sees(compares_a_tokenizer_kind, c) for c in ('kind == "char"', 'k in ("bpe", "x")',
                                                            'cfg.tokenizer != "pretrained"'))
    assert sees(reaches_hf, "tokenizer.hf.encode(x)") and sees(reaches_hf, 'getattr(t, "hf", None)')
    assert not sees(reaches_hf, "tokenizer.encode(x)")
    assert sees(compares_shard, 'cfg.shard == "fsdp"') and sees(compares_shard, 'shard != "fsdp"')
    assert sees(defines_fmt, "def _fmt(x): pass") and not sees(defines_fmt, "def fmt(x): pass")
    assert sees(calls_import_module, "importlib.import_module(name)") and sees(calls_import_module, "import_module(n)")


# ---- each decision, taken where it now lives
def test_every_bench_script_imports_names_that_exist():
    """A name that moves takes ``bench/`` with it: each ``from scratchformer... import name`` of every script
    resolves (the module imports and has the name)."""
    import importlib

    missing = []
    for script in sorted((PACKAGE.parents[1] / "bench").rglob("*.py")):
        for node in ast.walk(_tree(script)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "scratchformer":
                module = importlib.import_module(node.module)
                missing += [f"{script.name}: {node.module}.{a.name}" for a in node.names
                            if not hasattr(module, a.name) and not _is_module(f"{node.module}.{a.name}")]
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "scratchformer" and not _is_module(alias.name):
                        missing.append(f"{script.name}: {alias.name}")
    assert not missing, missing


def _is_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_a_metric_reads_as_the_registry_says():
    from scratchformer.registry import TASKS, format_metric, lower_is_better, metric

    assert format_metric("reward_accuracy", 0.8) == "80.00 %" and format_metric("accuracy", 1) == "100.00 %"
    assert format_metric("reward_margin", 0.123456) == "0.1235" and format_metric("bleu", 31.5) == "31.5"
    assert lower_is_better("loss") and lower_is_better("length") and not lower_is_better("reward_accuracy")
    assert metric("bleu").quality and metric("exact_match").quality and not metric("reward_margin").quality
    for task in TASKS.values():  # a run picks best/ by a metric its evaluation reports
        assert task.select_by in task.validation_metrics, task.name
    assert TASKS["grpo"].select_by == "accuracy" and TASKS["dpo"].select_by == "loss"


def test_a_runs_checkpoints_are_named_once(tmp_path):
    from scratchformer.app.serve.model import model_name
    from scratchformer.checkpoints import KEPT, run_of

    assert KEPT == ("averaged", "best", "last")
    for name in KEPT:
        assert run_of(tmp_path / "book" / name) == tmp_path / "book"
        assert model_name(tmp_path / "book" / name) == "book"
    assert run_of(tmp_path / "book") == tmp_path / "book" and model_name(tmp_path / "Qwen3-0.6B") == "Qwen3-0.6B"


def test_chat_messages_are_checked_once_for_every_reader():
    import pytest

    from scratchformer.app.serve.api import _messages
    from scratchformer.app.serve.api_errors import ApiError
    from scratchformer.data.messages import MessageError, chat_messages
    from scratchformer.data.preferences import check_preference
    from scratchformer.data.records import _check
    from scratchformer.errors import DataError

    sent = [{"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]
    read = [{"role": "system", "content": "Be brief."}, *sent[1:]]
    assert chat_messages(sent) == _messages(sent) == _check("line 1", {"messages": sent})["messages"] == read
    assert check_preference("line 1", {"prompt": sent[:2], "chosen": "a", "rejected": "b"})["record"]["messages"] \
        == [*read[:2], {"role": "assistant", "content": "a"}]
    bad = [{"role": "robot", "content": "x"}]
    with pytest.raises(MessageError, match="role 'robot' is not one of system, user, assistant") as err:
        chat_messages(bad)
    assert err.value.index == 0
    with pytest.raises(ApiError, match=r"messages\[0\]: role 'robot'"):
        _messages(bad)
    with pytest.raises(DataError, match="line 3: role 'robot'"):
        _check("line 3", {"messages": bad})
    with pytest.raises(DataError, match="the last message must be the assistant's"):
        _check("line 3", {"messages": sent[:2]})


def test_a_tokenizer_answers_for_its_kind():
    from tokenizers import Tokenizer as Backend

    from scratchformer.tokenizers import BPETokenizer, CharTokenizer

    text = "the cat sat on the mat. "
    char = CharTokenizer.train([text])
    bpe = BPETokenizer.train([text * 20], vocab_size=300)
    for tok in (char, bpe):
        assert Backend.from_str(tok.hf_json()).encode(text).ids == tok.encode(text)
        assert tok.encode_bare(text) == tok.encode(text) and tok.added_around() == ([], [])
        assert tok.own_bos_id == tok.bos_id and tok.has_pad and tok.unknown_id == tok.unk_id
    assert char.per_character and not bpe.per_character
    assert char.encode("z") == [char.unknown_id]  # a character it never saw
