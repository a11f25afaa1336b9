"""One file, one editor: a document open for editing in one Letterpress window is locked against the others.

Each `EditorClaim` (one per window's document controller) holds the document lock (`app.platform.locks`,
beside the recovery data in `locks/`) of the file it edits. Another window, in this process or another one,
that opens the same file finds the lock taken and is told who has it; it can switch to that window (through
`app.documents.window_switch` across processes) or open the file read-only. A crash frees the lock (the kernel
drops it), so a stale lock never blocks a file: no PID is ever trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from app.platform.locks import FileLock, document_key, document_lock_path, holder_info, read_info

log = logging.getLogger(__name__)


def identity_keys(path: Path) -> list[str]:
    """Every name the file may be locked under: its real path and its device and inode, whatever its link
    count
    now. A claim holds all of them, so a hard link made or removed after the first window opened the file
    (which changes `document_key`) still meets the first window's lock."""
    real = os.path.normcase(os.path.realpath(path))
    keys = [real]
    with contextlib.suppress(OSError):
        st = os.stat(real)
        if st.st_ino:
            keys.append(f"inode:{st.st_dev}:{st.st_ino}")
    return keys


def _key_lock_path(folder: Path, key: str) -> Path:
    return folder / f"{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.lock"


class ClaimLock(FileLock):
    """The document lock plus the locks of the file's other identities (`identity_keys`), released
    together."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.extras: dict[Path, FileLock] = {}

    def release(self) -> None:
        extras, self.extras = self.extras, {}
        for extra in extras.values():
            extra.release()
        super().release()

    def take_extras(self, folder: Path, document: Path, info: dict[str, object]) -> Path | None:
        """Hold the lock of every identity of `document` (dropping ones it no longer has, e.g. after a save
        gave
        it a new inode); returns the lock path another editor holds, if any (nothing new is then kept)."""
        wanted = {_key_lock_path(folder, k) for k in identity_keys(document)} - {self.path}
        taken: dict[Path, FileLock] = {}
        for path in wanted - self.extras.keys():
            extra = FileLock(path)
            try:
                got = extra.acquire(info)
            except OSError:
                continue
            if not got:
                for lock in taken.values():
                    lock.release()
                return path
            taken[path] = extra
        for path in list(self.extras):
            if path not in wanted:
                self.extras.pop(path).release()
        self.extras.update(taken)
        return None


@dataclass(frozen=True)
class Elsewhere:
    """The document is being edited by another window; `where` says which, for the question."""

    where: str
    info: dict[str, object]
    local: EditorClaim | None = None


def real_key(path: Path) -> str:
    """The document's identity for locking (`app.platform.locks.document_key`)."""
    return document_key(path)


class EditorClaim:
    """The lock on the one document a window edits (or none: untitled or read-only)."""

    _local: ClassVar[weakref.WeakValueDictionary[str, EditorClaim]] = weakref.WeakValueDictionary()

    def __init__(self, folder: Path, raise_window: Callable[[], None]) -> None:
        self.folder = folder
        self.raise_window = raise_window
        self.lock: FileLock | None = None
        self.key: str | None = None

    def holds(self, path: Path) -> bool:
        return self.lock is not None and self.key == real_key(path)

    problem = ""  # why the last `try_claim` could not lock at all ("" when it could): said, never silent

    def try_claim(self, path: Path) -> FileLock | Elsewhere | None:
        """A new lock on `path` (not yet adopted), `Elsewhere` when another editor has it, or None when
        locking is impossible here (the folder cannot be written); the caller then goes on without a lock."""
        if self.holds(path):
            assert self.lock is not None
            return self.lock
        key = real_key(path)
        local = self._local.get(key)
        if local is not None and local is not self:  # also where flock is emulated per process (NFS)
            return Elsewhere("another Letterpress window", {}, local)
        lock = ClaimLock(document_lock_path(self.folder, path))
        try:
            from app.documents.window_switch import server

            listener = server()
            listener.handler = EditorClaim.raise_local
            got = lock.acquire(holder_info(document=key, server=listener.name))
        except OSError as exc:
            log.warning("document lock not available (%s); opening without it", exc.strerror or exc)
            self.problem = (
                f"the lock folder {self.folder} cannot be written ({exc.strerror or exc}), so "
                "another "
                "window opening this file would not be warned"
            )
            return None
        self.problem = ""
        if got:
            busy = lock.take_extras(self.folder, path, holder_info(document=key, server=listener.name))
            if busy is None:
                return lock
            lock.release()
            info = read_info(busy)
            pid, host = info.get("pid"), info.get("host")
            where = "another Letterpress program" + (f" (process {pid} on {host})" if pid and host else "")
            return Elsewhere(where, info)
        info = read_info(lock.path)
        pid, host = info.get("pid"), info.get("host")
        where = "another Letterpress program" + (f" (process {pid} on {host})" if pid and host else "")
        return Elsewhere(where, info)

    def claim_to_open(
        self, path: Path, ask: Callable[[str, str], str], show_error: Callable[[str, str], object]
    ) -> tuple[FileLock | None, bool] | None:
        """The lock to open `path` with and whether it opens read-only; None when it is not opened here.
        When another window edits it the writer is asked (`ask(name, where)`): switch to that window (None),
        open it read-only here, or cancel (None)."""
        claimed = self.try_claim(path)
        if not isinstance(claimed, Elsewhere):
            return claimed, False
        choice = ask(path.name, claimed.where)
        if choice == "switch":
            if not EditorClaim.switch_to(claimed):
                show_error(
                    "Cannot switch",
                    f"The window that edits {path.name} did not answer. "
                    "Open it read-only, or close it there first.",
                )
            return None
        if choice != "read-only":
            return None
        return None, True

    def adopt(self, lock: FileLock | None, path: Path | None) -> None:
        """Make `lock` (for `path`) the one this window holds; the previous one is let go."""
        if lock is not self.lock:
            self.release()
        self.lock = lock
        self.key = real_key(path) if (lock is not None and path is not None) else None
        if self.key is not None:
            self._local[self.key] = self

    def refresh(self, path: Path) -> None:
        """After a save (which may give the file a new inode): hold the locks of its identities now."""
        if isinstance(self.lock, ClaimLock):
            from app.documents.window_switch import server

            self.lock.take_extras(self.folder, path, holder_info(document=self.key, server=server().name))

    def release(self) -> None:
        if self.key is not None and self._local.get(self.key) is self:
            with contextlib.suppress(KeyError):
                del self._local[self.key]
        if self.lock is not None:
            self.lock.release()
        self.lock, self.key = None, None

    @staticmethod
    def switch_to(other: Elsewhere) -> bool:
        """Bring the other window to the front; False when it cannot be reached."""
        if other.local is not None:
            other.local.raise_window()
            return True
        from app.documents.window_switch import request_switch

        return request_switch(str(other.info.get("server") or ""), str(other.info.get("document") or ""))

    @classmethod
    def raise_local(cls, key: str) -> bool:
        """Handle a switch request from another process: raise our window for `key`."""
        claim = cls._local.get(key)
        if claim is None:
            return False
        claim.raise_window()
        return True
