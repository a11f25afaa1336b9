"""Noticing that another program changed or deleted the open document (sync clients, git, a second editor).

`DiskState` is what we last knew of the file (size, modification time, SHA-256 of the bytes), taken when it was
opened or saved. `compare` says whether the file is still that one; it is run right before every save and
whenever `ExternalChangeWatcher` (a `QFileSystemWatcher` on the file and its folder, so an atomic replace by
another program is seen too) reports something. A touch that leaves the bytes alone is not a change.
`diff_text` and `CompareDialog` show the writer what differs before they choose.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget

Verdict = Literal["same", "changed", "deleted"]
Resolution = Literal["reload", "keep", "compare", "cancel"]


@dataclass(frozen=True)
class DiskState:
    size: int
    mtime_ns: int
    digest: str


def disk_state(path: Path) -> DiskState | None:
    """The file's state now; None when it does not exist (or cannot be read: treated as gone)."""
    try:
        st = os.stat(path)
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return DiskState(st.st_size, st.st_mtime_ns, h.hexdigest())


def compare(path: Path, known: DiskState | None, *, quick: bool = False) -> tuple[Verdict, DiskState | None]:
    """Is the file at `path` still the one we know? ("same" also when only its time changed.) `quick` trusts an
    unchanged size and modification time without reading the file (the watcher, which fires for any change in
    the folder); the check before a save always compares the content hash."""
    if quick and known is not None:
        try:
            st = os.stat(path)
        except OSError:
            return "deleted", None
        if st.st_size == known.size and st.st_mtime_ns == known.mtime_ns:
            return "same", known
    now = disk_state(path)
    if now is None:
        return ("same" if known is None else "deleted"), None
    if known is not None and now.size == known.size and now.digest == known.digest:
        return "same", now
    return "changed", now


def diff_text(mine: str, theirs: str, name: str) -> str:
    """A unified diff from the version on disk to the writer's version ("" when they are equal)."""
    lines = difflib.unified_diff(theirs.splitlines(keepends=True), mine.splitlines(keepends=True),
                                 fromfile=f"{name} (on disk)", tofile=f"{name} (your version)")
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
        self.path: Path | None = None

    def watch(self, path: Path | None) -> None:
        old = self._watcher.files() + self._watcher.directories()
        if old:
            self._watcher.removePaths(old)
        self.path = Path(os.path.realpath(path)) if path is not None else None
        self._rewatch()

    def _rewatch(self) -> None:
        if self.path is None:
            return
        for p in (self.path, self.path.parent):
            if p.exists() and str(p) not in self._watcher.files() + self._watcher.directories():
                self._watcher.addPath(str(p))

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
        layout.addWidget(QLabel(f"Lines starting with “-” are only on disk; lines starting with “+” are only in "
                                f"your version of {name}.", self))
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
