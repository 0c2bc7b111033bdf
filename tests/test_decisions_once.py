"""Each decision taken once (issue "The house, tidied"): a family's fields are asked through its entry, a tokenizer's
kind through the tokenizer's own methods, sharded training decided in one place, metrics formatted by one helper, and
classes imported rather than looked up by name. Each check counts what it forbids in ``src/``, and a check of the
checker shows that it sees each form."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "scratchformer"
SOURCES = sorted(PACKAGE.rglob("*.py"))
TOKENIZER_KINDS = {"char", "bpe", "pretrained"}


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


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


def _found(check, skip: tuple[str, ...] = ()) -> list[str]:
    return [f"{_name(p)}:{node.lineno}" for p in SOURCES if not _name(p).startswith(skip)
            for node in ast.walk(_tree(p)) if check(node)]


def test_a_familys_fields_are_asked_through_its_entry():
    assert not _found(compares_a_family_field, ("families.py",))


def test_a_tokenizers_kind_is_compared_in_its_own_home_only():
    # onnx_decode.py runs alone beside an export (numpy and tokenizers, no scratchformer): it reads the kind it is
    # given from the export's JSON
    found = _found(compares_a_tokenizer_kind, ("tokenizers/", "settings/"))
    assert len(found) <= 3 and all(f.startswith("app/export/onnx_decode.py") for f in found), found


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
