"""Shared helpers for GUI tests: build the real main window around a scripted engine, wait for ghost
states."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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
    """The real MainWindow, with `engine` owned by the real EngineHost thread; shown and with the model
    loaded."""
    from app.assist.engine_host import EngineHost
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


def fake_window(qtbot: Any, argv: Sequence[str] = (), *, unsaved: str | None = "discard") -> Any:
    """The window `app.create_window` builds for `python -m app *argv --fake-engine`, with the start-up
    recovery offer answered "later" and the unsaved-changes question answered `unsaved` (None: not replaced),
    so no modal box waits on a test. The caller replaces the other questions with the answers it records."""
    import app

    window = app.create_window([*argv, "--fake-engine"])
    qtbot.addWidget(window)
    if unsaved is not None:
        window.services.documents.ask_unsaved = lambda name: unsaved
    window.services.recovery.ask = lambda doc, i, n: "later"  # the start-up offer must not block on a box
    return window


def set_text(
    window: Any, text: str, *, cursor: int | None = None, select: tuple[int, int] | None = None
) -> None:
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
    middle = doc[len(before) : len(doc) - len(after)].strip()
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


def demo_window(qtbot: Any, monkeypatch: Any, tmp_path: Path, settings_toml: str) -> Iterator[Any]:
    """The real window from `app.create_window` with the shipped demo model on the CPU (the real engine thread
    and Session), isolated user folders and `settings_toml`; closed without a save question afterwards."""
    import os

    from engine.__main__ import default_model_dir

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    yield from model_window(qtbot, monkeypatch, tmp_path, default_model_dir(), settings_toml)


def model_window(
    qtbot: Any, monkeypatch: Any, tmp_path: Path, model: Path, settings_toml: str
) -> Iterator[Any]:
    """The real window from `app.create_window` with the checkpoint `model` on the CPU, isolated user folders
    and `settings_toml`, waited for until the model is ready; closed without a save question afterwards."""
    isolate_user_dirs(monkeypatch, tmp_path)
    (tmp_path / "config" / "settings.toml").write_text(settings_toml, encoding="utf-8")
    import app

    win = app.create_window(["--model", str(model), "--device", "cpu"])
    win.show()
    qtbot.waitExposed(win)
    win.editor.setFocus()
    qtbot.waitUntil(lambda: win.model_state in ("ready", "error"), timeout=120_000)
    assert win.model_state == "ready", win.modelLabel.toolTip()
    yield win
    win.editor.document().setModified(False)
    win.close()
    win.deleteLater()


def wait_suggestion_ready(qtbot: Any, window: Any, timeout: int = 120_000) -> None:
    """Wait until the suggestion has settled (a real model can take a while), and insist it did not fail."""
    qtbot.waitUntil(lambda: ghost_state(window) in ("ready", "error"), timeout=timeout)
    assert ghost_state(window) == "ready"


def wait_ready(qtbot: Any, window: Any, timeout: int = 10_000) -> None:
    """Wait until the scripted engine's suggestion is shown in full (ghost state "ready")."""
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=timeout)
