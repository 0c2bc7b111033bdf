"""Reading the command line: argparse with one-line errors, checked numbers, and ``key=value`` words anywhere."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block): ``scratchformer train: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"scratchformer: error: {message} (see {self.prog} --help)\n")


def at_least(low: int | float, kind: Callable[[str], Any] = int) -> Callable[[str], Any]:
    """An argparse type: a number ``>= low``."""

    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {text}")
        return value

    return check


def in_range(low: float, high: float, low_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a number in ``(low, high]`` (or ``[low, high]``)."""

    def check(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not ((value > low) if low_open else (value >= low)) or value > high:
            raise argparse.ArgumentTypeError(f"must be in {'(' if low_open else '['}{low:g}, {high:g}], got {text}")
        return value

    return check


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def is_setting(word: str) -> bool:
    key, sep, _ = word.partition("=")
    return bool(sep) and key.isidentifier() and not Path(word).exists()


def take_settings(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Move ``key=value`` words to the end, after ``--``, so they reach the positional ``overrides`` wherever
    they stood (argparse would otherwise give them to a preceding ``--data``, or refuse them after a flag).
    A word that is the value of an option (``--prompt a=b``) stays where it is."""
    sub = argv[0] if argv and not argv[0].startswith("-") else None
    action = next((a for a in parser._subparsers._group_actions if sub in getattr(a, "choices", {})), None) \
        if parser._subparsers and sub else None
    if action is None or sub not in ("train", "prepare", "explain", "demo", "plot"):
        return argv
    single = {opt for a in action.choices[sub]._actions if a.nargs is None and a.option_strings
              for opt in a.option_strings}
    rest, words, i = [sub], [], 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            words += argv[i + 1:]
            break
        if word in single and i + 1 < len(argv):
            rest += [word, argv[i + 1]]
            i += 2
            continue
        (words if is_setting(word) else rest).append(word)
        i += 1
    return rest + (["--", *words] if words else [])
