"""The exceptions a command ends with; the command line prints each as one line, without a traceback.

``ConfigError``: settings that cannot describe a working model or run (an unknown key, a value out of range,
a task and a preset that disagree). ``DataError``: a problem in the user's data (a missing or empty file, text
that is not UTF-8, a malformed TSV row, an unknown dataset, a failed download). Each message is one readable
line naming the setting or the file. Both are ``ValueError``s, so callers that catch bad values catch them.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration that cannot describe a working model or run."""


class DataError(ValueError):
    """A problem with user-supplied data; ``str(err)`` is one line naming the file and the problem."""


class RunDirError(ValueError):
    """The output directory cannot be used as asked (it exists, another process trains into it, or there is
    nothing to resume)."""


class TrainingError(RuntimeError):
    """Training cannot go on (a NaN/inf loss, say); the last good checkpoint is kept."""


class Interrupted(Exception):
    """The run was interrupted (SIGINT/SIGTERM) and saved a checkpoint it can be resumed from."""

    def __init__(self, step: int, out: object) -> None:
        super().__init__(f"interrupted at step {step:,}; the run is saved in {out}/last. Resume it with: "
                         f"scratchformer train --out {out} --resume")
        self.step, self.out = step, out


class WriteError(OSError):
    """A file could not be written (no space, an I/O error, a read-only or vanished directory, no permission);
    ``str(err)`` is one line: what, where, and for space about how much was needed. Nothing half-written is left.
    ``code``: the errno of the failure; ``reason``: its words (kept when an outer write restates it)."""

    def __init__(self, message: str, code: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


def listed(items: list[str], most: int = 10) -> str:
    """Items for a one-line message: the first ``most`` quoted, then how many more (a message never lists a
    megabyte of unknown characters)."""
    more = f" and {len(items) - most:,} more" if len(items) > most else ""
    return ", ".join(repr(c) for c in items[:most]) + more


def did_you_mean(word: str, choices: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean X?)`` for the choice closest to a mistyped ``word``, or "" when none is close."""
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""
