"""One file, one editor: a document open for editing in one Letterpress window is locked against the others.

Each `EditorClaim` (one per window's document controller) holds the document lock (`app.platform.locks`, beside the
recovery data in `locks/`) of the file it edits. Another window, in this process or another one, that opens
the same file finds the lock taken and is told who has it; it can switch to that window (through
`app.documents.window_switch` across processes) or open the file read-only. A crash frees the lock (the kernel drops
it), so a stale lock never blocks a file: no PID is ever trusted.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.platform.locks import FileLock, document_key, document_lock_path, holder_info, read_info

log = logging.getLogger(__name__)


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

    _local: weakref.WeakValueDictionary[str, EditorClaim] = weakref.WeakValueDictionary()

    def __init__(self, folder: Path, raise_window: Callable[[], None]) -> None:
        self.folder = folder
        self.raise_window = raise_window
        self.lock: FileLock | None = None
        self.key: str | None = None

    def holds(self, path: Path) -> bool:
        return self.lock is not None and self.key == real_key(path)

    def try_claim(self, path: Path) -> FileLock | Elsewhere | None:
        """A new lock on `path` (not yet adopted), `Elsewhere` when another editor has it, or None when locking
        is impossible here (the folder cannot be written); the caller then goes on without a lock."""
        if self.holds(path):
            assert self.lock is not None
            return self.lock
        key = real_key(path)
        local = self._local.get(key)
        if local is not None and local is not self:  # also where flock is emulated per process (NFS)
            return Elsewhere("another Letterpress window", {}, local)
        lock = FileLock(document_lock_path(self.folder, path))
        try:
            from app.documents.window_switch import server

            listener = server()
            listener.handler = EditorClaim.raise_local
            got = lock.acquire(holder_info(document=key, server=listener.name))
        except OSError as exc:
            log.warning("document lock not available (%s); opening without it", exc.strerror or exc)
            return None
        if got:
            return lock
        info = read_info(lock.path)
        pid, host = info.get("pid"), info.get("host")
        where = "another Letterpress program" + (f" (process {pid} on {host})" if pid and host else "")
        return Elsewhere(where, info)

    def adopt(self, lock: FileLock | None, path: Path | None) -> None:
        """Make `lock` (for `path`) the one this window holds; the previous one is let go."""
        if lock is not self.lock:
            self.release()
        self.lock = lock
        self.key = real_key(path) if (lock is not None and path is not None) else None
        if self.key is not None:
            self._local[self.key] = self

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
