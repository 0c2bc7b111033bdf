"""What a program says of an answer: the rewards of ``task=grpo`` (``reward=...``), each a function
``reward(problem, answer) -> number`` of the problem's record (a dict with its ``question`` and ``answer``) and the
answer's text.

    answer   1 if the answer's last number is the reference's (the number after its "#### ", as GSM8K's
             flexible-extract filter finds and compares it: ``metrics.extract_answer``, ``same_answer``), else 0; a
             reference with no "#### " is compared as text, spaces stripped
    format   1 if the answer ends in the form the problems ask for: "#### " and a number, else 0

Several with commas (``reward=answer,format``), their sum weighted by ``reward_weights`` (``1,0.2``; 1 each by
default). A function of your own: ``reward=path/to/file.py:function`` (the path relative to the folder the run is
started in). That file is Python and runs: it is imported when the run starts, and the function is called on every
answer sampled; give only code you trust. A function that raises, or returns anything but a finite number, ends the
run in one line that names it and the problem.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError, DataError
from scratchformer.tasks.metrics import extract_answer, same_answer

__all__ = ["BUILT_IN", "Reward", "answer_reward", "format_reward", "rewards_of", "score"]

FORMAT = re.compile(r"####\s*-?[$0-9.,]*[0-9][0-9.,]*\s*$")


def answer_reward(problem: dict[str, Any], answer: str) -> float:
    """1.0 if ``answer`` gives the reference's answer (its last number against the number after "#### "), else 0."""
    reference = str(problem["answer"])
    if "####" not in reference:
        return float(answer.strip() == reference.strip())
    return same_answer(extract_answer(answer), reference)


def format_reward(problem: dict[str, Any], answer: str) -> float:
    """1.0 if ``answer`` ends with "#### " and a number (the form GSM8K's answers and the built-in problems take)."""
    return float(bool(FORMAT.search(answer)))


BUILT_IN: dict[str, Callable[[dict[str, Any], str], Any]] = {"answer": answer_reward, "format": format_reward}


@dataclass(frozen=True)
class Reward:
    name: str  # as the setting names it: "answer", or "rw.py:short"
    function: Callable[[dict[str, Any], str], Any]
    weight: float = 1.0


def _load(spec: str) -> Callable[[dict[str, Any], str], Any]:
    """The function ``path.py:name`` names, its file imported (it is Python, and runs)."""
    path, _, name = spec.rpartition(":")
    file = Path(path).expanduser()
    if not path or not name or not path.endswith(".py"):
        raise ConfigError(f"reward={spec!r} is not {' or '.join(BUILT_IN)} or path/to/file.py:function")
    if not file.is_file():
        raise ConfigError(f"reward={spec}: no file {file} (the path is from the folder the run is started in)")
    module_spec = importlib.util.spec_from_file_location(f"scratchformer_reward_{file.stem}", file)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - the user's file: whatever it raises is said in one line
        raise ConfigError(f"reward={spec}: importing {file} raised {type(err).__name__}: {err}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"reward={spec}: {file} has no function {name!r}")
    return function


def rewards_of(setting: str, weights: str | None = None) -> list[Reward]:
    """The rewards ``reward=`` names (comma-separated), with ``reward_weights`` (comma-separated numbers, one each)."""
    names = [n.strip() for n in str(setting).split(",") if n.strip()]
    if not names:
        raise ConfigError(f"reward={setting!r} names no reward: give {', '.join(BUILT_IN)} or path/to/file.py:function")
    given = [w.strip() for w in str(weights).split(",")] if weights else ["1"] * len(names)
    if len(given) != len(names):
        raise ConfigError(f"reward_weights={weights} gives {len(given)} weights for {len(names)} rewards ({setting})")
    try:
        values = [float(w) for w in given]
    except ValueError:
        raise ConfigError(f"reward_weights={weights} must be numbers, one for each reward") from None
    return [Reward(n, BUILT_IN[n] if n in BUILT_IN else _load(n), w) for n, w in zip(names, values)]


def score(rewards: list[Reward], problem: dict[str, Any], answer: str, where: str) -> list[float]:
    """Each reward of ``answer`` to ``problem`` (``where``: which problem, for a refusal); a function that raises or
    gives no finite number is refused in one line (``DataError``) naming it and the problem."""
    out = []
    for reward in rewards:
        question = str(problem.get("question", ""))[:60]
        try:
            value = reward.function(problem, answer)
        except Exception as err:  # noqa: BLE001 - the user's function: whatever it raises ends the run in one line
            raise DataError(f"reward {reward.name} raised {type(err).__name__}: {err} on {where} "
                            f"({question!r}); fix the function or leave it out") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataError(f"reward {reward.name} returned {value!r:.40} on {where} ({question!r}): a reward is a "
                            "finite number")
        out.append(float(value))
    return out
