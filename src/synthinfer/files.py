"""Crash-safe file output: staging beside the target, fsync, atomic replacement, an exclusive
lock per output path, and sweeping what an interrupted write left behind.

Every output is built under a hidden staging name beside its target,
``.<name>.<8 hex digits>.tmp``, made durable (``fsync`` of each file and folder) and renamed
into place, so a reader sees the old output or the new one, never a partial one. Replacing an
existing output uses Linux ``renameat2(RENAME_EXCHANGE)``, which swaps the two names in one
step; the old output then sits under the staging name and is removed. Where the exchange is
unavailable (another OS, a kernel or C library without ``renameat2``, or a filesystem that
refuses the flag) the old output is first renamed to ``.<name>.<8 hex digits>.old`` and the new
one renamed into place: a crash between the two renames leaves the old output there and
nothing at the target, which the next write to the target refuses, naming it.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from synthinfer.errors import ReleaseError

#: renameat2's flag that swaps two paths atomically (linux/fs.h), and "relative to the cwd".
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
#: Errors by which renameat2 says the exchange is unsupported (not that it failed).
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP}


def _renameat2() -> Callable[..., int] | None:
    try:
        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not glibc >= 2.28 / not Linux
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` (both must exist, on one filesystem) in one atomic step.

    Returns False, having changed nothing, where the system cannot exchange paths; raises
    ``OSError`` for any other failure.
    """
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def fsync_path(path: Path) -> None:
    """Flush a file's content, or a folder's entries, to the disk."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if Path(path).is_dir() else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (itself included), folders after their contents."""
    root = Path(root)
    if not root.is_dir():
        fsync_path(root)
        return
    for folder, _, files in os.walk(root, topdown=False):
        for f in files:
            fsync_path(Path(folder) / f)
        fsync_path(Path(folder))


def staging_path(target: Path, suffix: str = ".tmp") -> Path:
    """A fresh hidden name beside ``target``: ``.<name>.<8 hex digits><suffix>``
    (``suffix`` ``.tmp`` for output being built, ``.old`` for an output being replaced)."""
    target = Path(target)
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}{suffix}")


def _staging_pattern(target: Path) -> re.Pattern[str]:
    return re.compile(re.escape(f".{Path(target).name}.") + r"[0-9a-f]{8}\.(tmp|old)")


def remove(path: Path) -> None:
    """Remove a file, link or folder tree, if it exists."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def sweep_staging(target: Path) -> None:
    """Remove what interrupted writes to ``target`` left beside it; call with :func:`output_lock`
    held, so that no staging item belongs to a live writer.

    ``.tmp`` items (output being built, or an exchanged old output not yet removed) are
    removed, complete or not. A ``.old`` item is the old output of an interrupted replacement
    without exchange: it is removed when ``target`` exists, and otherwise, since it is then the
    only copy, refused with :class:`~synthinfer.errors.ReleaseError` naming it.
    """
    target = Path(target)
    if not target.parent.is_dir():
        return
    pattern = _staging_pattern(target)
    stale = sorted(p for p in target.parent.iterdir() if pattern.fullmatch(p.name))
    present = target.exists() or target.is_symlink()
    orphans = [p for p in stale if p.suffix == ".old" and not present]
    if orphans:
        raise ReleaseError(
            f"{target} is missing and {', '.join(map(str, orphans))} holds the output it replaced when a write was "
            f"interrupted: move it back to {target} (or delete it) and run again"
        )
    for p in stale:
        remove(p)


_held: dict[str, tuple[int, int]] = {}  # lock file -> (thread ident, depth) for this process
_held_guard = threading.Lock()


@contextlib.contextmanager
def output_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the output ``path`` for the block; a second writer, in
    another process or thread, fails at once with :class:`~synthinfer.errors.ReleaseError`.

    The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``.<name>.lock`` beside ``path`` (its folder is
    made if missing); the holder removes the file when done. The same thread may take the lock
    again inside the block (the command line holds it over a whole fit; ``write_release``
    takes it too). Without ``fcntl`` (not POSIX) there is no lock.
    """
    target = Path(path).absolute()
    lock = target.with_name(f".{target.name}.lock")
    key, me = str(lock), threading.get_ident()
    with _held_guard:
        owner, depth = _held.get(key, (me, 0))
        if depth and owner != me:
            raise ReleaseError(f"{target} is being written by another thread of this process; choose another path")
        if depth:
            _held[key] = (me, depth + 1)
    if depth:
        try:
            yield
        finally:
            with _held_guard:
                _held[key] = (me, _held[key][1] - 1)
        return
    try:
        import fcntl
    except ImportError:
        yield
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ReleaseError(
                f"{target} is being written by another process (it holds the lock {lock}); wait for it to finish or "
                "choose another path"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # The previous holder removes the lock file on leaving: if it did so after we opened
        # it, we hold a lock on a deleted file, and must lock the one now at the path.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    with _held_guard:
        _held[key] = (me, 1)
    try:
        yield
    finally:
        with _held_guard:
            del _held[key]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a staging path beside ``path``, fsync it, then rename it into place
    (and fsync the folder), so a failure or a crash keeps the old file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = staging_path(path)
    try:
        write(tmp)
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_path(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda p: p.write_text(text))
