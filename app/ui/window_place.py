"""The main window opens where the writer left it: its size and position are kept between starts.

Qt's own `saveGeometry()` bytes (which hold the screen and the maximized state too) are written to
`window-geometry` in the data folder when the window closes and given back when it is built; a missing or
damaged file simply leaves the default size (1000x720). `restoreGeometry` itself moves a window whose screen
is gone back onto one that exists.
"""

from __future__ import annotations

import base64
import binascii
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray
from PySide6.QtWidgets import QWidget

from app.platform.atomic import atomic_write_text
from app.platform.folders import data_dir

log = logging.getLogger(__name__)
FILE_NAME = "window-geometry"


def place_file() -> Path:
    return data_dir() / FILE_NAME


def restore(window: QWidget, path: Path | None = None) -> bool:
    """Give `window` the size and position it had when it last closed (False: none kept, or unreadable)."""
    where = path or place_file()
    try:
        raw = base64.b64decode(where.read_text(encoding="ascii").strip(), validate=True)
    except (OSError, ValueError, binascii.Error):
        return False
    return bool(window.restoreGeometry(QByteArray(raw)))


def save(window: QWidget, path: Path | None = None) -> None:
    """Keep `window`'s size and position for the next start (a read-only data folder: nothing kept)."""
    where = path or place_file()
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(where, base64.b64encode(bytes(window.saveGeometry().data())).decode("ascii") + "\n")
    except OSError as exc:
        log.info("window size not kept: %s", exc)


__all__ = ["FILE_NAME", "place_file", "restore", "save"]
