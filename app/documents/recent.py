"""Open Recent: the documents last opened or saved, newest first, in a small JSON file written atomically; the
menu that lists them; and where Open and Save As start."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QMenu, QWidget

from app.platform.atomic import atomic_write_bytes

log = logging.getLogger(__name__)


class RecentFiles:
    """The most recently opened or saved documents, newest first, in a small JSON file (written
    atomically)."""

    def __init__(self, path: Path, limit: int = 10) -> None:
        self.path = path
        self.limit = limit

    def load(self) -> list[Path]:
        try:
            items = json.loads(self.path.read_text(encoding="utf-8"))
            return [Path(p) for p in items if isinstance(p, str)][: self.limit]
        except (OSError, ValueError, TypeError):
            return []

    def add(self, path: Path) -> list[Path]:
        path = path.resolve()
        items = [path] + [p for p in self.load() if p != path]
        self._store(items[: self.limit])
        return items[: self.limit]

    def remove(self, path: Path) -> None:
        self._store([p for p in self.load() if p != path])

    def clear(self) -> None:
        self._store([])

    def _store(self, items: list[Path]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.path, json.dumps([str(p) for p in items], indent=1).encode("utf-8"))
        except OSError as exc:
            log.warning("recent files list not saved: %s", exc.strerror or exc)


class RecentMenu(QMenu):
    """File ▸ Open Recent (objectName `menuRecent`): one entry per recent document, then Clear list; greyed
    while the list is empty. `rebuild()` after the list changed."""

    def __init__(
        self, title: str, parent: QWidget, recent: RecentFiles, open_path: Callable[[Path], object]
    ) -> None:
        super().__init__(title, parent)
        self.setObjectName("menuRecent")
        self.recent = recent
        self._open = open_path

    def rebuild(self) -> None:
        self.clear()
        items = self.recent.load()
        for p in items:
            action = self.addAction(p.name)
            action.setToolTip(str(p))
            action.setStatusTip(str(p))
            action.triggered.connect(lambda *_, p=p: self._open(p))
        if items:
            self.addSeparator()
            self.addAction("Clear list", self._clear)
        self.setEnabled(bool(items))

    def _clear(self) -> None:
        self.recent.clear()
        self.rebuild()


def start_folder(path: Path | None, recent: RecentFiles) -> Path:
    """Where Open and Save As start: the current file's folder, else the folder last opened from or saved to
    (the newest recent file's: remembered across restarts), else the documents folder. Never the working
    directory the app happened to be started in."""
    if path is not None:
        return path.parent
    for item in recent.load():
        if item.parent.is_dir():
            return item.parent
    from app.platform.folders import documents_dir

    return documents_dir()
