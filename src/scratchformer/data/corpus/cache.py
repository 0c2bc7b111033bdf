"""Where prepared corpora live, and the keys that name them.

Prepared corpora are kept in one cache folder, ``$SCRATCHFORMER_CORPORA`` (default: ``corpora`` in the user
cache, ``$XDG_CACHE_HOME/scratchformer/corpora`` or ``~/.cache/scratchformer/corpora``), not in a run
directory, so that a second run, a ``--resume``, another model and ``scratchformer evaluate`` on the same
files all find the same corpus. A corpus's name is a digest (``key``) of everything that decides its ids:
the content of the files (not their names or dates, so a copied or renamed file is the same corpus), how
they are read (the task family's format), the tokenizer (its own saved form, so a resumed run's tokenizer
finds the corpus its first run wrote) and the format version. A changed byte or setting is a new name.

Hashing a file of gigabytes takes seconds, so each file's SHA-256 is remembered in ``fingerprints.json``
beside its size, modification time and inode, and trusted on a later run only if none of those changed and
the file had not been modified within two seconds of being hashed (git's "racy" rule: a change made in the
same clock tick as the hashing would not move the modification time).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.atomic import atomic_write_text
from scratchformer.data.files import sha256_of
from scratchformer.data.plan import Source
from scratchformer.errors import DataError

__all__ = ["ENV_VAR", "corpora_dir", "digest", "documents", "fingerprint", "remove_stale"]

ENV_VAR = "SCRATCHFORMER_CORPORA"
MEMO = "fingerprints.json"
RACY_NS = 2_000_000_000  # a file modified this close to its hashing is hashed again next time
STALE_S = 7 * 24 * 3600  # a temporary directory this old is deleted whoever left it


def corpora_dir() -> Path:
    """``$SCRATCHFORMER_CORPORA``, else ``corpora`` under the user cache folder."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scratchformer" / "corpora"


def digest(value: Any) -> str:
    """SHA-256 (hex, first 32 characters) of ``value`` as canonical JSON."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def documents(source: Source) -> list[tuple[str, Path]]:
    """(name, path) of every file a source reads, in reading order. A folder (language modelling) is its
    ``.txt``/``.txt.gz`` files, sorted by path, each named relative to the folder."""
    folder = Path(source.paths[0])
    if source.kind == "text" and folder.is_dir():
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".txt", ".txt.gz")))
        if not files:
            raise DataError(f"{folder} is a folder without .txt or .txt.gz files")
        return [(p.relative_to(folder).as_posix(), p) for p in files]
    paths = [Path(p) for p in source.paths]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise DataError(f"no such file: {missing[0]}")
    return [(p.name, p) for p in paths]


def fingerprint(source: Source, root: Path, progress: Callable[[int], None] | None = None) -> str:
    """A digest of the source's content and of how it is read (its kind)."""
    docs = documents(source)
    memo = _Memo(root)
    hashes = [memo.sha256(path, progress) for _, path in docs]
    memo.save()
    folder = source.kind == "text" and Path(source.paths[0]).is_dir()
    names = [name for name, _ in docs] if folder else None  # a folder's order and names matter; a file's name not
    return digest({"kind": source.kind, "content": hashes, "names": names})


class _Memo:
    """The remembered SHA-256 of files, by absolute path (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.path, self.changed = root / MEMO, False
        try:
            self.entries: dict[str, dict[str, Any]] = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.entries = {}

    def sha256(self, path: Path, progress: Callable[[int], None] | None) -> str:
        key = str(path.resolve())
        try:
            stat = path.stat()
        except OSError as err:
            raise DataError(f"cannot read {path}: {err.strerror or err}") from None
        seen = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}
        known = self.entries.get(key)
        if known and {k: known.get(k) for k in seen} == seen and stat.st_mtime_ns < known["hashed_ns"] - RACY_NS:
            return known["sha256"]
        hashed_ns = time.time_ns()
        value = sha256_of(path, progress)
        self.entries[key] = {**seen, "sha256": value, "hashed_ns": hashed_ns}
        self.changed = True
        return value

    def save(self) -> None:
        if not self.changed:
            return
        alive = {k: v for k, v in self.entries.items() if os.path.exists(k)}
        try:
            atomic_write_text(self.path, json.dumps(alive))
        except OSError:
            pass  # only a speed-up: the files are hashed again next time


def remove_stale(root: Path) -> list[Path]:
    """Delete the temporary directories of preparations that died (their process is gone from this host, or
    they are a week old); returns what was deleted."""
    removed = []
    host = socket.gethostname().replace("-", "_")
    for tmp in root.glob(".*.tmp-*"):
        try:
            owner_host, pid, _ = tmp.name.rsplit(".tmp-", 1)[1].rsplit("-", 2)
            dead = owner_host == host and not _alive(int(pid))
            if dead or time.time() - tmp.stat().st_mtime > STALE_S:
                shutil.rmtree(tmp, ignore_errors=True)
                removed.append(tmp)
        except (ValueError, OSError):
            continue
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
