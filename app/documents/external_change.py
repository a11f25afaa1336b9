"""Noticing that another program changed or deleted the open document (sync clients, git, a second editor).

`DiskState` is what we last knew of the file (size, modification time, SHA-256 of the bytes), taken when it
was opened or saved. `compare` says whether the file is still that one; it is run right before every save and
whenever `ExternalChangeWatcher` (a `QFileSystemWatcher` on the file and its folder, so an atomic replace by
another program is seen too) reports something. A touch that leaves the bytes alone is not a change.
`diff_text` and `CompareDialog` show the writer what differs before they choose.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

Verdict = Literal["same", "changed", "deleted", "unreadable"]
Resolution = Literal["reload", "keep", "compare", "cancel"]


@dataclass(frozen=True)
class DiskState:
    size: int
    mtime_ns: int
    digest: str


UNREADABLE = "unreadable"  # the digest of a file that is there but cannot be read (permission, not a file)
POLL_MS = 1000  # how often a file the system watcher cannot watch (a name that is not UTF-8) is looked at


def disk_state(path: Path) -> DiskState | None:
    """The file's state now; None when it does not exist. A file that is there but cannot be read (no
    permission), or that is no regular file (a FIFO put in its place: reading it would block the window), has
    the digest UNREADABLE: it is not "deleted or moved", and nothing blocks on it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return DiskState(st.st_size, st.st_mtime_ns, UNREADABLE)
    try:
        h = hashlib.sha256()
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return DiskState(st.st_size, st.st_mtime_ns, UNREADABLE)
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except FileNotFoundError:
        return None
    except OSError:
        return DiskState(st.st_size, st.st_mtime_ns, UNREADABLE)
    return DiskState(st.st_size, st.st_mtime_ns, h.hexdigest())


def compare(path: Path, known: DiskState | None, *, quick: bool = False) -> tuple[Verdict, DiskState | None]:
    """Is the file at `path` still the one we know? ("same" also when only its time changed.) `quick` trusts
    an unchanged size and modification time without reading the file (the watcher, which fires for any change
    in the folder); the check before a save always compares the content hash. "unreadable": the file is there
    but cannot be read now (its permissions changed, or something that is no file took its place)."""
    if quick and known is not None:
        try:
            st = os.stat(path)
        except OSError:
            return "deleted", None
        if (
            st.st_size == known.size
            and st.st_mtime_ns == known.mtime_ns
            and stat.S_ISREG(st.st_mode)
            and (known.digest == UNREADABLE or os.access(path, os.R_OK))
        ):
            return "same", known
    now = disk_state(path)
    if now is None:
        return ("same" if known is None else "deleted"), None
    if now.digest == UNREADABLE:
        return ("same" if known is not None and known.digest == UNREADABLE else "unreadable"), now
    if known is not None and now.size == known.size and now.digest == known.digest:
        return "same", now
    return "changed", now


def diff_text(mine: str, theirs: str, name: str) -> str:
    """A unified diff from the version on disk to the writer's version ("" when they are equal)."""
    lines = difflib.unified_diff(
        theirs.splitlines(keepends=True),
        mine.splitlines(keepends=True),
        fromfile=f"{name} (on disk)",
        tofile=f"{name} (your version)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class ExternalChangeWatcher(QObject):
    """Reports (`noticed`) that the watched file may have changed; the owner decides with `compare`. Bursts of
    notifications (a program writing in several steps) are coalesced into one."""

    noticed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watcher = QFileSystemWatcher(self)
        self._watcher.fileChanged.connect(self._poke)
        self._watcher.directoryChanged.connect(self._poke)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(250)
        self._settle.timeout.connect(self._fire)
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._on_poll)
        self._polled: tuple[int, int, int] | None = (-1, -1, -1)
        self.path: Path | None = None

    @property
    def polling(self) -> bool:
        """True when the file is looked at on a timer because the system watcher could not take it."""
        return self._poll.isActive()

    def watch(self, path: Path | None) -> None:
        old = self._watcher.files() + self._watcher.directories()
        if old:
            self._watcher.removePaths(old)
        self.path = Path(os.path.realpath(path)) if path is not None else None
        self._poll.stop()
        self._polled = (-1, -1, -1)
        self._rewatch()
        if self._poll.isActive():
            self._on_poll()  # the starting point

    def _rewatch(self) -> None:
        if self.path is None:
            self._poll.stop()
            return
        for p in (self.path, self.path.parent):
            if p.exists() and str(p) not in self._watcher.files() + self._watcher.directories():
                # The system watcher may refuse it (a name that is not valid UTF-8 cannot cross into Qt, or
                # the watch limit is reached): then look at it every POLL_MS instead, so a change is still
                # noticed.
                refused = not self._watcher.addPath(str(p))
                if refused and p == self.path:
                    self._poll.start()

    def _on_poll(self) -> None:
        if self.path is None:
            self._poll.stop()
            return
        try:
            st = os.stat(self.path)
            now: tuple[int, int, int] | None = (st.st_size, st.st_mtime_ns, st.st_mode)
        except OSError:
            now = None
        if now != self._polled:
            first = self._polled == (-1, -1, -1)
            self._polled = now
            if not first:
                self._poke()

    def _poke(self, *_: object) -> None:
        self._settle.start()

    def _fire(self) -> None:
        self._rewatch()  # an atomic replace drops the old file from the watcher
        self.noticed.emit()


class CompareDialog(QDialog):
    """The differences between the file on disk and the writer's text, and the three ways forward."""

    def __init__(self, parent: QWidget | None, name: str, mine: str, theirs: str) -> None:
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle(f"Compare — {name}")
        self.resize(900, 600)
        self.choice: Resolution = "cancel"
        layout = QVBoxLayout(self)
        layout.addWidget(
            QLabel(
                f"Lines starting with “-” are only on disk; lines starting with “+” are only in "
                f"your version of {name}.",
                self,
            )
        )
        self.view = QPlainTextEdit(self)
        self.view.setObjectName("compareView")
        self.view.setReadOnly(True)
        self.view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.view.setPlainText(diff_text(mine, theirs, name) or "The texts are identical.")
        layout.addWidget(self.view)
        buttons = QDialogButtonBox(self)
        reload_button = buttons.addButton("Reload from disk", QDialogButtonBox.ButtonRole.DestructiveRole)
        keep_button = buttons.addButton("Keep my version", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        reload_button.clicked.connect(lambda: self._done("reload"))
        keep_button.clicked.connect(lambda: self._done("keep"))
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _done(self, choice: Resolution) -> None:
        self.choice = choice
        self.accept()
