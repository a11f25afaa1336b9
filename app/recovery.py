"""Autosave and crash recovery: unsaved text is copied to the recovery folder every few seconds.

Each running window writes one file, `<session id>.json`, holding the text, the document's path (or none for an
untitled document), when it was written and the writing process's id. A clean save, a discard or a clean quit
removes it. At the next start, files whose process is no longer running are crash leftovers: the window offers
to restore each one, showing which document it belongs to and when it was autosaved.

Snapshots are taken on the UI thread (a string copy) and written on one background thread, in order, so a
large document never stalls typing; writes are atomic, so a kill in the middle leaves the previous copy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from app.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
Answer = Literal["restore", "discard", "later"]


@dataclass(frozen=True)
class RecoveredDocument:
    """An autosaved copy left behind by a process that did not finish cleanly."""

    file: Path
    text: str
    path: str | None
    saved_at: float
    pid: int

    @property
    def name(self) -> str:
        return Path(self.path).name if self.path else "Untitled"

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.saved_at).strftime("%Y-%m-%d %H:%M:%S")
        where = self.path or "an untitled document"
        words = len(self.text.split())
        return f"{where}\nautosaved {when} ({words:,} words)"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    if os.name == "posix":  # a killed child that nobody reaped yet is a zombie: as good as dead
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()
            if status and status[0] in ("Z", "X"):
                return False
    return True


def find_recovered(folder: Path) -> list[RecoveredDocument]:
    """Autosaves whose writer is gone, oldest first; unreadable files are skipped (and logged), never fatal."""
    found: list[RecoveredDocument] = []
    if not folder.is_dir():
        return found
    for file in sorted(folder.glob("*.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            doc = RecoveredDocument(
                file=file,
                text=str(data["text"]),
                path=data.get("path") or None,
                saved_at=float(data["saved_at"]),
                pid=int(data.get("pid", 0)),
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("skipping unreadable recovery file %s: %s", file.name, exc)
            continue
        if not _pid_alive(doc.pid):
            found.append(doc)
    return sorted(found, key=lambda d: d.saved_at)


def _ask_box(parent: QWidget | None, doc: RecoveredDocument, index: int, total: int) -> Answer:
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Question)
    box.setWindowTitle("Recover unsaved work")
    counter = f" ({index} of {total})" if total > 1 else ""
    box.setText(f"Letterpress did not close normally. Restore the unsaved text of “{doc.name}”{counter}?")
    box.setInformativeText(doc.describe())
    restore = box.addButton("Restore", QMessageBox.ButtonRole.AcceptRole)
    discard = box.addButton("Discard", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton("Ask again next time", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(restore)
    box.exec()
    clicked = box.clickedButton()
    return "restore" if clicked is restore else "discard" if clicked is discard else "later"


class RecoveryManager(QObject):
    """Autosaves one document (through `snapshot()`, which returns `(text, path)` or None when nothing is
    unsaved) every `interval` seconds, and offers recovered copies at start.

    Wire it with `connect_document(controller)` so a save or discard removes the copy; `shutdown()` on a clean
    quit removes it too.
    """

    autosaved = Signal(str)  # path of the recovery file just written

    def __init__(self, folder: Path, snapshot: Callable[[], tuple[str, str | None] | None], *,
                 interval_s: float = 5.0, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.folder = folder
        self.snapshot = snapshot
        self.file = folder / f"{uuid.uuid4().hex}.json"
        self.ask: Callable[[RecoveredDocument, int, int], Answer] = (
            lambda doc, i, n: _ask_box(parent if isinstance(parent, QWidget) else None, doc, i, n)
        )
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autosave")
        self._last: tuple[str, str | None] | None = None
        self._pending: Future[None] | None = None
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.autosave_now)
        self.set_interval(interval_s)
        self._timer.start()

    def set_interval(self, seconds: float) -> None:
        self._timer.setInterval(max(200, int(seconds * 1000)))

    def connect_settings(self, settings: object) -> None:
        """Follow `documents.autosave_seconds` live."""
        self.set_interval(settings["documents.autosave_seconds"])  # type: ignore[index]
        settings.changed.connect(  # type: ignore[attr-defined]
            lambda key, value: self.set_interval(value) if key == "documents.autosave_seconds" else None
        )

    def connect_document(self, controller: object) -> None:
        """Remove the autosave when the controller saves or discards the document."""
        controller.saved.connect(lambda *_: self.clear())  # type: ignore[attr-defined]
        controller.discarded.connect(lambda *_: self.clear())  # type: ignore[attr-defined]

    # -- autosave --------------------------------------------------------------------------------------------

    def autosave_now(self) -> None:
        """Copy the unsaved text now (only if it changed since the last copy); no unsaved text: remove it."""
        try:
            snap = self.snapshot()
        except Exception:  # a broken snapshot must never take the timer down
            log.exception("autosave snapshot failed")
            return
        if snap is None:
            if self._last is not None:
                self.clear()
            return
        if snap == self._last:
            return
        self._last = snap
        text, path = snap
        record = {"version": FORMAT_VERSION, "pid": os.getpid(), "path": path, "saved_at": time.time(),
                  "text": text}
        self._pending = self._pool.submit(self._write, record)

    def _write(self, record: dict[str, object]) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.file, json.dumps(record, ensure_ascii=False).encode("utf-8"))
        except OSError as exc:
            log.warning("autosave failed: %s", exc.strerror or exc)
            return
        self.autosaved.emit(str(self.file))

    def clear(self) -> None:
        """Forget the copy (after a save or a discard); queued behind any write still in flight."""
        self._last = None
        self._pending = self._pool.submit(self._remove, self.file)

    @staticmethod
    def _remove(file: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            file.unlink()

    def flush(self, timeout: float = 10.0) -> None:
        """Wait until queued writes are on disk (tests, shutdown)."""
        if self._pending is not None:
            self._pending.result(timeout)

    def shutdown(self, *, keep: bool = False) -> None:
        """Clean quit: nothing unsaved is left (the window asked), so the copy goes unless `keep`."""
        self._timer.stop()
        if not keep:
            self.clear()
        self._pool.shutdown(wait=True)

    # -- recovery --------------------------------------------------------------------------------------------

    def pending(self) -> list[RecoveredDocument]:
        return [d for d in find_recovered(self.folder) if d.file != self.file]

    def offer(self, restore: Callable[[RecoveredDocument], bool]) -> list[RecoveredDocument]:
        """Ask about each recovered copy. `restore(doc)` puts it somewhere and returns False if it could not
        (e.g. the window already shows another restored document); such copies are kept for next time.
        Returns the documents that were restored."""
        docs = self.pending()
        restored: list[RecoveredDocument] = []
        for i, doc in enumerate(docs, 1):
            answer = self.ask(doc, i, len(docs))
            if answer == "restore" and restore(doc):
                restored.append(doc)
                self._adopt(doc)
            elif answer == "discard":
                self._remove(doc.file)
        return restored

    def _adopt(self, doc: RecoveredDocument) -> None:
        """A restored copy becomes this session's autosave until saved, so a second crash still keeps it."""
        self._last = (doc.text, doc.path)
        self._pending = self._pool.submit(self._adopt_file, doc.file)

    def _adopt_file(self, old: Path) -> None:
        try:
            record = json.loads(old.read_text(encoding="utf-8"))
            record["pid"] = os.getpid()
            atomic_write_bytes(self.file, json.dumps(record, ensure_ascii=False).encode("utf-8"))
            old.unlink()
        except (OSError, ValueError) as exc:
            log.warning("could not take over recovery file %s: %s", old.name, exc)
