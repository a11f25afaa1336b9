"""Advisory file locks that a crash cannot leave behind: the operating system drops them with the process.

`FileLock` holds `flock` (POSIX) or `msvcrt.locking` (Windows) on a small lock file for as long as it is
acquired. Nothing here trusts a process id: a lock whose holder died (SIGKILL, power loss, another PID
namespace, a reboot that gave the PID to an unrelated process) is simply free, because the kernel released it.
The lock file also carries a little JSON about its holder (process, host, how to reach it) for messages and
for "switch to the other window".

Used for one file, one editor (`document_lock_path`, keyed by `document_key`) and by recovery, where
each running session holds `<session>.lock` so its autosave is never offered while it is alive.

Taking and letting go are atomic against each other: the open-create, the lock and the check that the path
still names the locked file (acquire), and the removal and unlock (release), each run while holding the
folder's `.mutex` (a blocking `flock`/`msvcrt` lock on a file that is never removed), so no process can create
a fresh lock file at the path between another's check and its lock, or between its removal and unlock: several
processes opening one document at the same instant get exactly one editor.

We use our own few lines rather than the `filelock` package: we need the lock to conflict between two windows
of one process (flock does, per open file description; `filelock` instances are re-entrant per process), the
holder's details inside the lock file, and a race-free removal of the file on release.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt
else:
    import fcntl

_INFO_LIMIT = 64 * 1024
_WIN_LOCK_OFFSET = 1 << 30  # Windows locks a byte far past the JSON, so others can still read who holds it


class FileLock:
    """An exclusive, non-blocking lock on `path`; `acquire()` returns False when someone else holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, info: dict[str, Any] | None = None) -> bool:
        """Take the lock (creating the file); writes `info` into it. Raises OSError if the folder is
        unusable."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with folder_mutex(self.path.parent):
            for _ in range(10):  # the file can be removed (by a person, a tool) between our open and our lock
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
                if not _lock(fd):
                    os.close(fd)
                    return False
                try:
                    there = os.stat(self.path)
                    held = os.fstat(fd)
                    same = (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)
                except FileNotFoundError:
                    same = False
                if same:
                    self._fd = fd
                    if info is not None:
                        self.write_info(info)
                    return True
                _unlock(fd)
                os.close(fd)
        return False

    def still_here(self) -> bool:
        """True while the lock file at `path` is the very file this lock holds. Someone may delete it (a
        "clean-up" tool, a person) or put another file there: the lock then protects nothing any more, and a
        second start would take what it guards for a crash leftover. False also when not held."""
        if self._fd is None:
            return False
        try:
            held, there = os.fstat(self._fd), os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)

    def write_info(self, info: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = json.dumps(info).encode("utf-8")[:_INFO_LIMIT]
        with contextlib.suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_SET)
            os.ftruncate(self._fd, 0)
            os.write(self._fd, data)

    def release(self) -> None:
        """Let go (the lock file is removed while still locked, so nobody else can be holding it)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with folder_mutex(self.path.parent):
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                _unlock(fd)
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


MUTEX_NAME = ".mutex"


_mutex_guard = threading.Lock()
_mutexes: dict[str, threading.RLock] = {}
_depth: dict[str, int] = {}


@contextlib.contextmanager
def folder_mutex(folder: Path) -> Iterator[None]:
    """Hold the lock folder's mutex (blocking, held for a few system calls): taking and letting go of a lock
    in `folder` are then one step each for every process. Re-entrant within a process (a collected lock's
    `__del__` may release inside another's step, on the same thread). A folder where the mutex cannot be
    made (read-only) goes on without it: the per-file lock still excludes, only its creation is no longer
    serialized."""
    key = str(folder)
    with _mutex_guard:
        local = _mutexes.setdefault(key, threading.RLock())
    with local:
        depth = _depth.get(key, 0)
        _depth[key] = depth + 1
        fd = -1
        try:
            if depth == 0:
                fd = _open_mutex(folder)
            yield
        finally:
            _depth[key] -= 1
            if fd >= 0:
                with contextlib.suppress(OSError):
                    _unlock(fd)
                os.close(fd)


def _open_mutex(folder: Path) -> int:
    """The locked mutex file's descriptor, or -1 when it cannot be made or locked here."""
    try:
        fd = os.open(folder / MUTEX_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return -1
    try:
        _lock_blocking(fd)
    except OSError:
        os.close(fd)
        return -1
    return fd


def is_locked(path: Path) -> bool:
    """True when some live process (or another lock in this one) holds the lock on `path`."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False  # no lock file: nobody holds it
    except OSError:
        return True  # cannot look (permissions): assume its owner is alive rather than take its work
    try:
        if _lock(fd):
            _unlock(fd)
            return False
        return True
    finally:
        os.close(fd)


def read_info(path: Path) -> dict[str, Any]:
    """What the holder wrote into the lock file ({} when unreadable)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(_INFO_LIMIT).decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def document_key(document: Path) -> str:
    """What makes two names one document: its real path (a symlink and its target are one document), or, for a
    file with several hard links (saved in place, so every name sees the new text), its device and inode."""
    real = os.path.normcase(os.path.realpath(document))
    try:
        st = os.stat(real)
    except OSError:
        return real
    if st.st_nlink > 1 and st.st_ino:
        return f"inode:{st.st_dev}:{st.st_ino}"
    return real


def document_lock_path(folder: Path, document: Path) -> Path:
    """The lock file for `document` (see `document_key`)."""
    key = document_key(document)
    return folder / f"{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.lock"


def holder_info(**extra: Any) -> dict[str, Any]:
    """The details a lock holder writes about itself."""
    return {"pid": os.getpid(), "host": socket.gethostname(), **extra}


def _lock(fd: int) -> bool:
    try:
        if sys.platform == "win32":  # pragma: no cover
            os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _lock_blocking(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover - LK_LOCK retries for about 10 s, then raises
        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_EX)


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover
        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
