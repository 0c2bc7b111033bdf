"""The built-in arithmetic problems (``dataset=arithmetic``): like the copy task, made, not read; seeded, so the same
settings give the same problems; and with a fixed held-out part no training problem repeats.

    What is 47 + 8?
    47 + 8 = 55
    #### 55

A problem joins two numbers of 1 to ``digits`` digits by one of ``operations`` (``+``, ``-``, ``*``; a difference is
never negative); its answer is GSM8K's form, the working then ``#### N``, so that the same rewards, filters and
templates serve both. Small enough for a character-level GPT trained here on 2 CPU cores to solve some of them
after instruction tuning (``task=instruct dataset=arithmetic``), and to learn more of them from rewards
(``task=grpo``).

The splits: ``TRAIN`` problems drawn with the run's seed from those not held out; the held-out problems are drawn
once, with seed ``HELD_OUT_SEED`` whatever the run's, and split into validation and test halves.
"""

from __future__ import annotations

import random
from typing import Any

from scratchformer.errors import ConfigError

__all__ = ["DIGITS", "OPERATIONS", "arithmetic_problems", "arithmetic_splits", "check_operations"]

DIGITS, OPERATIONS = 2, "+-"
TRAIN, HELD_OUT, HELD_OUT_SEED = 5000, 400, 20250101
_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def check_operations(operations: str) -> str:
    """``operations`` as given (``+-``, ``+,-,*``): the distinct signs, each one of ``+ - *``."""
    signs = "".join(dict.fromkeys(operations.replace(",", "").replace(" ", "")))
    if not signs or any(s not in _APPLY for s in signs):
        raise ConfigError(f"operations={operations!r} must be some of + - * (e.g. operations=+- or operations=+,-,*)")
    return signs


def _problem(rng: random.Random, digits: int, operations: str) -> tuple[str, str]:
    a, b = (rng.randint(0, 10 ** rng.randint(1, digits) - 1) for _ in range(2))
    sign = rng.choice(operations)
    if sign == "-" and b > a:
        a, b = b, a
    value = _APPLY[sign](a, b)
    return f"What is {a} {sign} {b}?", f"{a} {sign} {b} = {value}\n#### {value}"


def arithmetic_problems(digits: int = DIGITS, operations: str = OPERATIONS, seed: int = 0,
                        train: int = TRAIN) -> dict[str, list[dict[str, str]]]:
    """split -> its problems (``{"question", "answer"}``): ``train`` (``train`` of them, drawn with ``seed``), ``val``
    and ``test`` (the held-out problems, the same for every seed)."""
    if not 1 <= digits <= 6:
        raise ConfigError(f"digits={digits} must be between 1 and 6")
    operations = check_operations(operations)
    held_rng, held, seen = random.Random(HELD_OUT_SEED), [], set()
    space = len(operations) * (10 ** digits) ** 2
    want = min(HELD_OUT, space // 4)  # a small space keeps most of its problems for training
    while len(held) < want:
        problem = _problem(held_rng, digits, operations)
        if problem[0] not in seen:
            seen.add(problem[0])
            held.append(problem)
    rng, drawn = random.Random(seed), []
    for _ in range(train * 50):
        if len(drawn) == train:
            break
        problem = _problem(rng, digits, operations)
        if problem[0] not in seen:
            drawn.append(problem)
    half = len(held) // 2
    as_records = lambda ps: [{"question": q, "answer": a} for q, a in ps]  # noqa: E731
    return {"train": as_records(drawn), "val": as_records(held[:half]), "test": as_records(held[half:])}


def arithmetic_splits(cfg: Any) -> dict[str, tuple[list[dict[str, str]], str]]:
    """split -> (its problems, where they came from), with a run's ``digits``, ``operations`` and ``seed``."""
    digits, operations = getattr(cfg, "digits", 0) or DIGITS, getattr(cfg, "operations", None) or OPERATIONS
    made = arithmetic_problems(digits, operations, cfg.seed)
    what = f"dataset arithmetic (numbers of up to {digits} digits, {' '.join(operations)}"
    return {"train": (made["train"], f"{what}, seed {cfg.seed})"),
            "val": (made["val"], f"{what}, the held-out problems' first half)"),
            "test": (made["test"], f"{what}, the held-out problems' second half)")}
