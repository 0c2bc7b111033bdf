"""Reading the command line: each command's options declared once as data, argparse built from them, one-line
errors, checked numbers, and ``key=value`` words anywhere."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage block): ``scratchformer train: error: ...``."""

    argv: list[str] = []  # the words parsed (``scratchformer.app.cli.main`` sets them): for ``_as_setting``

    def error(self, message: str) -> NoReturn:
        hint = _as_setting(self.argv) if "unrecognized arguments" in message else ""
        self.exit(2, f"scratchformer: error: {message}{hint} (see {self.prog} --help)\n")


def _as_setting(words: list[str]) -> str:
    """For an option that is a setting's name (``--max-steps 100``): the setting, as the command line takes it."""
    from scratchformer.nn.config import ModelConfig
    from scratchformer.settings.config import TrainConfig

    names = {*ModelConfig.__dataclass_fields__, *TrainConfig.__dataclass_fields__}
    for i, word in enumerate(words):
        name = word.lstrip("-").replace("-", "_").partition("=")[0]
        if word.startswith("--") and name in names:
            value = word.partition("=")[2] or (words[i + 1] if i + 1 < len(words) else "VALUE")
            return f" (did you mean {name}={value}? settings are key=value words)"
    return ""


@dataclass(frozen=True)
class Option:
    """One option or positional argument: its flags (or name) and argparse's keywords."""

    flags: tuple[str, ...]
    kw: dict[str, Any]

    @property
    def takes_one_value(self) -> bool:
        """An option followed by exactly one word (``--out DIR``): that word is never a setting."""
        return self.flags[0].startswith("-") and "nargs" not in self.kw and "action" not in self.kw


def opt(*flags: str, **kw: Any) -> Option:
    return Option(flags, kw)


@dataclass(frozen=True)
class Command:
    """A subcommand: what it does, its options, and the function that runs it (``module:function``)."""

    name: str
    help: str
    options: list[Option]
    run: str
    description: str | None = None
    epilog: str | Callable[[], str] | None = None  # a callable: made when the parser is built
    settings: bool = False  # takes key=value words anywhere on the line
    extra: dict[str, Any] = field(default_factory=dict)


def build(prog: str, description: str, commands: list[Command]) -> Parser:
    """The parser of ``commands``, built from their declarations."""
    parser = Parser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands:
        p = sub.add_parser(command.name, help=command.help, description=command.description or command.help,
                           epilog=command.epilog() if callable(command.epilog) else command.epilog)
        for option in command.options:
            p.add_argument(*option.flags, **option.kw)
    return parser


def take_settings(commands: list[Command], argv: list[str]) -> list[str]:
    """Move ``key=value`` words to the end, after ``--``, so they reach the positional ``overrides`` wherever
    they stood (argparse would otherwise give them to a preceding ``--data``, or refuse them after a flag).
    A word is a setting when the part before its ``=`` is a name (a path such as ``./a=b.txt`` is not); the
    value of an option that takes one word (``--prompt a=b``) stays where it is."""
    command = next((c for c in commands if argv and c.name == argv[0]), None)
    if command is None or not command.settings:
        return argv
    single = {flag for option in command.options if option.takes_one_value for flag in option.flags}
    rest, words, i = [argv[0]], [], 1
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


def is_setting(word: str) -> bool:
    key, sep, _ = word.partition("=")
    return bool(sep) and key.isidentifier()


def settings_help(*configs: tuple[str, type, dict[str, tuple[str, ...]]]) -> str:
    """Every setting of the given config dataclasses, with the allowed values of each choice: generated from
    the dataclasses, so the help never falls behind them."""
    parts = []
    for title, cls, choices in configs:
        names = [f"{f.name} ({'|'.join(choices[f.name])})" if f.name in choices else f.name for f in fields(cls)]
        parts.append(f"{title}: " + ", ".join(names))
    return "; ".join(parts)


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
