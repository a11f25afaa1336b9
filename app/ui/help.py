"""Help: a searchable sheet of every command and its keys, built from the window's own actions, and a short
first-run hint shown once.

Why from the actions: the keys a writer can press are the ones bound on the window's QActions (defaults, or
what the writer rebound in Settings); a hand-written table drifts from them. The hint names the keys the same
way. Other modules add lines to the hint with `add_hint_line` (the demo model's own wording, for instance).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets import named

HINT_MARKER = "first-run-hint-shown"
_extra_lines: list[Callable[[], str]] = []


def add_hint_line(line: Callable[[], str]) -> None:
    """Add a line to the first-run hint (called at start-up; an empty string adds nothing)."""
    _extra_lines.append(line)


def redo_keys() -> list[QKeySequence]:
    """Redo as each platform's writers expect: Ctrl+Y and Ctrl+Shift+Z on Linux and Windows (Qt's Linux
    default is Ctrl+Shift+Z only), Cmd+Shift+Z on macOS."""
    if sys.platform == "darwin":
        return QKeySequence.keyBindings(QKeySequence.StandardKey.Redo)
    # The platform's first Redo key first: menus name the first key, and the editor's own context menu
    # (Qt's) names the platform's first (Ctrl+Shift+Z under X11); the Edit menu named Ctrl+Y beside it.
    both = [QKeySequence("Ctrl+Y"), QKeySequence("Ctrl+Shift+Z")]
    first = QKeySequence(QKeySequence.StandardKey.Redo)
    return sorted(both, key=lambda k: k.matches(first) != QKeySequence.SequenceMatch.ExactMatch)


def on_a_writers_keyboard(key: QKeySequence) -> bool:
    """False for keys an ordinary keyboard lacks: F13-F35 and the dedicated Copy/Undo/Open... keys of Sun and
    multimedia keyboards, which the platform's standard bindings add (the sheet listed "F16" for Copy)."""
    code = key[0].key().value  # type: ignore[index]  # PySide6 stubs lack __getitem__
    extra_f = Qt.Key.Key_F13.value <= code <= Qt.Key.Key_F35.value
    return not (extra_f or code == Qt.Key.Key_Help.value or code >= Qt.Key.Key_Back.value)


def keys_text(action: QAction) -> str:
    """The keys of `action` as a writer reads them: one spelling per press, only keys a keyboard has."""
    shown: list[str] = []
    for k in action.shortcuts():
        if k.isEmpty() or not on_a_writers_keyboard(k):
            continue
        text = k.toString(QKeySequence.SequenceFormat.NativeText)
        if text not in shown:
            shown.append(text)
    return ", ".join(shown)


def label(action: QAction) -> str:
    return action.text().replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip(".…").strip()


def shortcut_rows(window: QWidget) -> list[tuple[str, str]]:
    """(command, keys) for every named command of the window, commands with keys first, then by name."""
    seen: dict[str, tuple[str, str]] = {}
    for action in window.findChildren(QAction):
        name = action.objectName()
        if not name.startswith("action") or not action.text() or action.isSeparator():
            continue
        seen.setdefault(name, (label(action), keys_text(action)))
    return sorted(seen.values(), key=lambda row: (not row[1], row[0].lower()))


def hint_text(window: QWidget) -> str:
    """The first-run hint, with the keys as they are bound now."""

    def key(name: str, fallback: str) -> str:
        action = window.findChild(QAction, name)
        text = keys_text(action).split(", ")[0] if action is not None else ""
        return text or fallback

    lines = [
        (
            f"Write a few words, then press {key('actionDraft', 'Ctrl+Return')} for a draft; select text and "
            f"press {key('actionRewrite', 'Ctrl+R')} to rewrite it. {key('actionAcceptSuggestion', 'Tab')} "
            f"accepts, {key('actionDismissSuggestion', 'Esc')} "
            "dismisses. Help ▸ Keyboard shortcuts lists every key."
        ),
    ]
    lines.extend(text for line in _extra_lines if (text := line().strip()))
    return " ".join(lines)


def first_run(folder: Path) -> bool:
    """True once per data folder: the first time it is asked (the marker is written then)."""
    marker = folder / HINT_MARKER
    if marker.exists():
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker.write_text("1\n", encoding="utf-8")
    except OSError:
        return False  # a read-only data folder: better no hint than the same hint at every start
    return True


class FirstRunHint(QLabel):
    """The short hint above the page (objectName `firstRunHint`): shown on the first start and by Help ▸
    Getting started; the first suggestion hides it."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("firstRunHint")
        self.setWordWrap(True)
        self.setContentsMargins(10, 6, 10, 6)
        self.setToolTip("Shown on the first start only; Help ▸ Getting started shows it again.")
        self.hide()

    def show_text(self, text: str) -> None:
        self.setText(text)
        self._retain_room(False)
        self.show()

    def hide_keeping_room(self) -> None:
        """Its room stays (blank) until the next start: the page jumped ~100 px up under the writer's eyes at
        the first draft."""
        self._retain_room(True)
        self.hide()

    def _retain_room(self, retain: bool) -> None:
        policy = self.sizePolicy()
        policy.setRetainSizeWhenHidden(retain)
        self.setSizePolicy(policy)


class ShortcutSheet(QDialog):
    """Every command and its keys; the filter keeps the rows that hold every word typed (command or key)."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self.setObjectName("shortcutSheet")
        self.setWindowTitle("Keyboard shortcuts")
        self.filter = named(QLineEdit(self), "shortcutFilter")
        self.filter.setPlaceholderText("Search commands or keys (e.g. pin, Alt+)")
        self.filter.setClearButtonEnabled(True)
        self.table = named(QTableWidget(0, 2, self), "shortcutTable")
        self.table.setHorizontalHeaderLabels(["Command", "Keys"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        self.note = QLabel("Assistant keys can be rebound in Settings ▸ Assistant keys.", self)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (self.filter, self.table, self.note, buttons):
            layout.addWidget(widget)
        rows = shortcut_rows(window)
        self.table.setRowCount(len(rows))
        for r, (command, keys) in enumerate(rows):
            self.table.setItem(r, 0, QTableWidgetItem(command))
            self.table.setItem(r, 1, QTableWidgetItem(keys))
        self.filter.textChanged.connect(self._on_filter)
        self.resize(520, 560)

    def _cell(self, row: int, column: int) -> str:
        item = self.table.item(row, column)
        return item.text() if item is not None else ""

    def _on_filter(self, text: str) -> None:
        words = text.lower().split()
        for r in range(self.table.rowCount()):
            row = f"{self._cell(r, 0)} {self._cell(r, 1)}".lower()
            self.table.setRowHidden(r, not all(w in row for w in words))

    def visible_rows(self) -> list[tuple[str, str]]:
        return [
            (self._cell(r, 0), self._cell(r, 1))
            for r in range(self.table.rowCount())
            if not self.table.isRowHidden(r)
        ]
