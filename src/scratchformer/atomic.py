"""Writing files so that a failure or a crash never leaves a half-written file under its final name, and a failed
write ends in one line that says what could not be written, where, and (for space) about how much it needed.

A write goes to a temporary name in the destination folder and is moved into place with ``os.replace`` (a
directory of files, such as a checkpoint, the same way: ``atomic_dir``). When the write fails (no space, an I/O
error, a read-only or vanished directory, permission denied) the temporary files are removed and a
``WriteError`` is raised: ``could not write the checkpoint last/ in runs/x: no space left on device (it needs
about 3.6 MB, 120 kB are free)``. The command line prints that line and exits non-zero.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from scratchformer.errors import WriteError

__all__ = ["atomic_dir", "atomic_write_text", "failed_write", "publish_dir", "size_text", "staging_dir", "writing"]


def size_text(n: int) -> str:
    """Bytes for a person: ``812 B``, ``7.1 kB``, ``55.0 MB``, ``1.24 GB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.{2 if unit == 'GB' else 1}f} {unit}"
    return f"{n} B"


def failed_write(err: BaseException, what: str, where: Path, needed: int | None = None) -> WriteError:
    """The one-line error of a write that failed with ``err`` (an ``OSError``, or the ``RuntimeError`` with which
    ``torch.save`` reports a full disk)."""
    code = getattr(err, "errno", None) or getattr(err, "code", None)
    # torch.save reports a full disk as "unexpected pos", safetensors as "No space left on device (os error 28)"
    if code in (errno.ENOSPC, errno.EDQUOT) or any(w in str(err) for w in ("unexpected pos", "No space left")):
        try:
            free = shutil.disk_usage(next(p for p in (where, *where.parents) if p.exists())).free
            free = f"{size_text(free)} are free"
        except (OSError, StopIteration):
            free = "the free space is unknown"
        need = f"it needs about {size_text(needed)}, " if needed else ""
        return WriteError(f"could not write {what} in {where}: no space left on device ({need}{free})",
                          code=errno.ENOSPC)
    reason = getattr(err, "reason", None) or getattr(err, "strerror", None) \
        or (str(err).strip().splitlines() or [type(err).__name__])[0]
    return WriteError(f"could not write {what} in {where}: {reason[:1].lower()}{reason[1:]}", code=code, reason=reason)


@contextlib.contextmanager
def writing(what: str, where: Path, *, needed: int | None = None, leftovers: tuple[Path, ...] = ()) -> Iterator[None]:
    """Inside the block, a failed write removes ``leftovers`` and becomes one ``WriteError``."""
    try:
        yield
    except Exception as err:
        if not isinstance(err, (OSError, RuntimeError)) and type(err).__name__ != "SafetensorError":
            raise  # not a failed write (safetensors' own error type is one: it reports the disk's errors)
        for path in leftovers:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        raise failed_write(err, what, where, needed) from None  # a nested write's error, said of the whole


def atomic_write_text(path: str | Path, text: str, what: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file and ``os.replace``; returns ``path``."""
    path = Path(path)
    # A unique name opened with "x" (not mkstemp) so the file gets the usual umask permissions, not 0600.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    data = text.encode("utf-8")
    with writing(what or path.name, path.parent, needed=len(data), leftovers=(tmp,)):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    return path


@contextlib.contextmanager
def staging_dir(beside: Path) -> Iterator[Path]:
    """A fresh temporary directory in ``beside``'s folder (the same file system, so what is written there moves into
    place by an atomic rename), removed when the block ends, whatever happens; what it held and was not moved goes
    with it. A directory a killed process left there before is removed first."""
    for stale in beside.parent.glob(f".{beside.name}.tmp-*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    tmp = beside.with_name(f".{beside.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def follow_umask(path: Path) -> None:
    """Give ``path`` (a file, or each file in a folder) the permissions a new file gets under the process's umask
    (0644 under the usual 022) where a writer made it private (0600: safetensors writes so), so that a checkpoint
    or an export is readable by whoever may read the folder it is in, as every other file there is."""
    mask = os.umask(0)
    os.umask(mask)
    mode = 0o666 & ~mask
    for f in [path] if path.is_file() else path.rglob("*"):
        if f.is_file() and not f.is_symlink() and (f.stat().st_mode & 0o777) == 0o600 != mode:
            os.chmod(f, mode)


def publish_dir(tmp: Path, final: Path) -> None:
    """Move the directory ``tmp`` to ``final``, replacing what is there: the previous copy is moved to ``.NAME.old``
    first and deleted after, so a crash at any point leaves a complete directory under one of the two names. Its
    files follow the umask (``follow_umask``)."""
    follow_umask(tmp)
    old = final.with_name(f".{final.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists() or final.is_symlink():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(final: Path, what: str, needed: int | None = None) -> Iterator[Path]:
    """``with atomic_dir(final, "the checkpoint last/") as tmp:`` write the files into ``tmp``; at the end of the
    block they are flushed to disk and ``tmp`` replaces ``final`` (``publish_dir``). A failed write removes ``tmp``
    and becomes one ``WriteError``. The one directory writer: checkpoints, exports (``interop/``) alike."""
    with writing(what, final.parent, needed=needed), staging_dir(final) as tmp:
        yield tmp
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        publish_dir(tmp, final)
