"""Open Recent: the documents last opened or saved, newest first, in a small JSON file written atomically."""

from __future__ import annotations

import json
import logging
from pathlib import Path

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
