"""Shared helpers for GUI tests: build the real main window around a scripted engine, wait for ghost states."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtGui import QTextCursor


def isolate_user_dirs(monkeypatch: Any, tmp_path: Path) -> None:
    """Keep settings, recovery files and logs of a test inside its tmp folder."""
    for name in ("CONFIG", "DATA", "LOG"):
        folder = tmp_path / name.lower()
        folder.mkdir(exist_ok=True)
        monkeypatch.setenv(f"LETTERPRESS_{name}_DIR", str(folder))


def build_window(qtbot: Any, engine: Any, *, settings: Any = None, model_dir: str = "fake") -> Any:
    """The real MainWindow, with `engine` owned by the real EngineHost thread; shown and with the model loaded."""
    from app.engine_host import EngineHost
    from app.main_window import MainWindow

    host = EngineHost(lambda: engine)
    host.start()
    window = MainWindow(host, settings=settings, model_dir=model_dir)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    window.editor.setFocus()
    qtbot.waitUntil(lambda: window.model_state in ("ready", "error"), timeout=10_000)
    return window


def set_text(window: Any, text: str, *, cursor: int | None = None, select: tuple[int, int] | None = None) -> None:
    """Replace the document (as if opened) and place the cursor or selection."""
    editor = window.editor
    editor.setPlainText(text)
    c = QTextCursor(editor.document())
    if select is not None:
        c.setPosition(select[0])
        c.setPosition(select[1], QTextCursor.MoveMode.KeepAnchor)
    else:
        c.setPosition(len(text) if cursor is None else cursor)
    editor.setTextCursor(c)


def is_joined(doc: str, before: str, suggestion: str, after: str, *, whole: bool = True) -> bool:
    """`doc` is `before` + (all of / a prefix of) `suggestion` + `after`, where only the whitespace at the two
    joins may differ from the suggestion's (the assistant fixes doubled spaces and glued words there)."""
    if not (doc.startswith(before) and doc.endswith(after) and len(doc) >= len(before) + len(after)):
        return False
    middle = doc[len(before): len(doc) - len(after)].strip()
    if whole:
        return middle == suggestion.strip()
    return bool(middle) and suggestion.lstrip().startswith(middle)


def ghost_state(window: Any) -> str:
    return str(window.editor.property("ghostState"))


def ghost_text(window: Any) -> str:
    return str(window.editor.property("ghostText") or "")


def record_ghost_texts(window: Any) -> Callable[[], list[str]]:
    """Collect every distinct ghost text the editor shows from now on."""
    seen: list[str] = []

    def on_change() -> None:
        text = ghost_text(window)
        if text and (not seen or seen[-1] != text):
            seen.append(text)

    window.assistant.changed.connect(on_change)
    return lambda: seen
