"""``scratchformer explore --export FILE``: the explorer's views written to a file to keep, instead of served.

    scratchformer explore --ckpt RUN --text "the cat sat" --export view.html    # the page, one file, offline
    scratchformer explore --ckpt RUN --text "the cat sat" --export view.svg --layer 1 --head 2
    scratchformer explore --ckpt RUN --text "ein Hund" --export cross.png --kind decoder.cross_attn

- ``.html``: the explorer's page with every number of the inputs inside it (``standalone.py``); ``--text`` may
  be repeated (the page then has a picker of inputs); ``--kind``, ``--layer``, ``--head`` choose the view it
  opens on.
- ``.png``, ``.svg``: one input's view as a picture (``plots.plot_attention``, the ``plots`` extra): the map of
  ``--layer`` and ``--head``, or every layer (and head) when they are left out. An encoder-decoder has three
  kinds of attention, so it also needs ``--kind``: ``encoder.self_attn``, ``decoder.self_attn`` or
  ``decoder.cross_attn`` (the names the explorer gives them).

The numbers are ``model_view.explore``'s, the same as the served page's for the same input and options
(``--option NAME=VALUE``, as the page sets them). Every mistake is refused in one line before anything is
written, and an existing file is replaced only with ``--force``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from scratchformer.app.explore.model_view import (
    DEFAULT_LIMITS,
    OPTIONS,
    Limits,
    checkpoint_name,
    explore,
    load_explorable,
    model_info,
)
from scratchformer.app.explore.standalone import standalone_page
from scratchformer.errors import ConfigError

EXPORT_SUFFIXES = (".html", ".png", ".svg")


def parse_options(words: Sequence[str]) -> dict[str, Any]:
    """``["beam=2", "target=a b"]`` -> ``{"beam": 2, "target": "a b"}``: a text option keeps its words, the
    others are read as JSON (numbers; ``null``: not set). Their ranges are checked as a request's are."""
    options: dict[str, Any] = {}
    for word in words:
        name, sep, raw = word.partition("=")
        if not sep or not name:
            raise ConfigError(f"--option {word!r}: write NAME=VALUE, e.g. --option beam=2")
        if name not in OPTIONS:
            raise ConfigError(f"--option {name!r} is not an option of the explorer; they are: {', '.join(OPTIONS)}")
        try:
            options[name] = raw if OPTIONS[name][1] is str else json.loads(raw)
        except ValueError:
            options[name] = raw  # the request's check names the type it wants
    return options


def choose_view(views: list[dict[str, Any]], kind: str | None, layer: int | None, head: int | None, *,
                need_kind: bool) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The view of ``kind`` among ``views`` (``explore``'s ``attention``), with ``layer`` and ``head`` checked
    against it, and the page's opening view (None when none was chosen). ``need_kind``: refuse to guess
    among several kinds."""
    by_kind = {v["kind"]: v for v in views}
    kinds = " | ".join(by_kind)
    given = (kind, layer, head) != (None, None, None)
    if kind is None:
        if need_kind and len(by_kind) > 1:
            raise ConfigError(f"this model has {len(by_kind)} kinds of attention: choose one with --kind {kinds}")
        kind = "decoder.cross_attn" if "decoder.cross_attn" in by_kind else views[0]["kind"]
    elif kind not in by_kind:
        raise ConfigError(f"--kind {kind!r} is not one of this model's kinds of attention: {kinds}")
    view = by_kind[kind]
    for flag, value, n, what in (("--layer", layer, len(view["weights"]), "layers"),
                                 ("--head", head, len(view["weights"][0]), "heads")):
        if value is not None and not 0 <= value < n:
            raise ConfigError(f"{flag} {value} is out of range: the {view['title']} has {n} {what}, 0 to {n - 1}")
    return view, ({"kind": kind, "layer": layer or 0, "head": head or 0} if given else None)


def check_output(path: Path, force: bool) -> None:
    """Refuse, in one line, a file name that cannot be written, or one that exists without ``force``."""
    if path.is_dir():
        raise ConfigError(f"--export {path} is a directory; give a file name")
    if path.suffix.lower() not in EXPORT_SUFFIXES:
        raise ConfigError(f"--export {path}: write an .html page, or a .png or .svg picture")
    if path.exists() and not force:
        raise ConfigError(f"{path} exists; pass --force to replace it")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: directory {path.parent} does not exist")


def export_view(ckpt_path: str | os.PathLike, out: str | os.PathLike, texts: Sequence[str], *,
                options: Sequence[str] = (), kind: str | None = None, layer: int | None = None,
                head: int | None = None, force: bool = False, limits: Limits = DEFAULT_LIMITS) -> Path:
    """Write the explorer's views of ``texts`` to ``out`` (see the module docstring); returns ``out``."""
    out = Path(out)
    check_output(out, force)
    picture = out.suffix.lower() != ".html"
    if not texts:
        raise ConfigError("--export needs an input: --text TEXT (repeat it for several inputs in one page)")
    if picture and len(texts) > 1:
        raise ConfigError(f"a {out.suffix[1:].upper()} draws one input, not {len(texts)}; an .html page takes several")
    ckpt = load_explorable(ckpt_path)
    chosen = parse_options(options)
    results = [explore(ckpt, text, limits, **chosen) for text in texts]
    view, initial = choose_view(results[0]["attention"], kind, layer, head, need_kind=picture)
    if picture:
        return draw_view(view, results[0]["input"], out, layer, head)
    page = standalone_page(model_info(ckpt, limits, checkpoint_name(ckpt_path)), results, initial)
    return write_file(out, page.encode("utf-8"))


def draw_view(view: dict[str, Any], text: str, out: Path, layer: int | None, head: int | None) -> Path:
    """One view (``explore``'s) as a PNG or SVG: the map of ``layer`` and ``head``, or all of them."""
    from scratchformer.app.plots.attention import plot_attention  # the plots extra, only here

    stack, attn = view["kind"].split(".")
    maps = {f"{stack}.layers.{i}.{attn}": torch.tensor(w)[None] for i, w in enumerate(view["weights"])}
    shown = text if len(text) <= 60 else text[:59] + "…"
    return plot_attention(maps, out, query_tokens=view["queries"], key_tokens=view["keys"], kind=view["kind"],
                          layers=None if layer is None else [layer], heads=None if head is None else [head],
                          title=f"{view['title']}: {shown}")  # plot_attention adds which layers and heads


def write_file(path: Path, data: bytes) -> Path:
    """Write ``data`` atomically: a temporary name beside ``path``, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


__all__ = ["EXPORT_SUFFIXES", "check_output", "choose_view", "draw_view", "export_view", "parse_options"]
