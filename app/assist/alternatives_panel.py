"""A small panel listing the K alternatives of the current suggestion with their mean confidence, best first.

Alt+] / Alt+[ cycle the alternatives one at a time; this panel shows them side by side. Each row is the
alternative's mean word confidence (the engine's own score once it has finished) and its text; a click shows
that alternative as the ghost. The list is rebuilt only when what it would show changes.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDockWidget, QLabel, QListWidget, QListWidgetItem, QVBoxLayout, QWidget

from app.platform.text_fit import shorten_words
from app.ui.widgets import plain_tip

ROLE_INDEX = Qt.ItemDataRole.UserRole
ROW_CHARS = 160  # a row shows this much of an alternative (the whole of it in the row's tooltip)


def ranked(sug: Any) -> list[tuple[int, float, str]]:
    """(alternative index, mean confidence, text) of a suggestion, best first."""
    if sug is None or sug.error:
        return []
    rows = []
    for i, spans in enumerate(sug.alternatives):
        text = "".join(s.text for s in spans)
        if not text.strip():
            continue
        if i < len(sug.scores):
            score = sug.scores[i]
        else:
            conf = [s.confidence for s in spans if s.text.strip()]
            score = sum(conf) / len(conf) if conf else 0.0
        rows.append((i, score, text))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


class AlternativesPanel(QDockWidget):
    """Dockable list of alternatives; emits `chosen(index)` when the writer clicks one."""

    chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Alternatives", parent)
        self.setObjectName("alternativesPanel")
        body = QWidget(self)
        column = QVBoxLayout(body)
        column.setContentsMargins(4, 4, 4, 4)
        self.hint = QLabel("No suggestion.", body)
        self.hint.setObjectName("alternativesHint")
        self.hint.setWordWrap(True)
        self.list = QListWidget(body)
        self.list.setObjectName("alternativesList")
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.itemClicked.connect(self._on_clicked)
        column.addWidget(self.hint)
        column.addWidget(self.list)
        self.setWidget(body)
        self._shown: tuple[Any, ...] = ()

    def refresh(self, sug: Any) -> None:
        rows = ranked(sug)
        current = sug.index if sug is not None else -1
        running = sug is not None and sug.running
        key = (tuple((i, round(score, 3), text) for i, score, text in rows), current, running, sug is None)
        if key == self._shown:
            return
        self._shown = key
        self.list.clear()
        for rank, (i, score, text) in enumerate(rows, 1):
            shown = shorten_words(text, ROW_CHARS)  # ends at a word
            item = QListWidgetItem(f"{rank}. {score:.1%} · {shown}")
            item.setData(ROLE_INDEX, i)
            item.setToolTip(plain_tip(text))  # the suggestion may come from a server: never rich text
            self.list.addItem(item)
            if i == current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        if not rows:
            self.hint.setText("No suggestion." if sug is None else "Waiting for the first draft…")
        else:
            self.hint.setText(
                f"{len(rows)} alternative{'s' if len(rows) != 1 else ''}, best first"
                + (" (still denoising)" if running else "")
                + ". Click one to show it."
            )

    def rows(self) -> list[tuple[int, str]]:
        """(alternative index, label) of every row, top to bottom (for tests and automation)."""
        return [
            (int(self.list.item(r).data(ROLE_INDEX)), self.list.item(r).text())
            for r in range(self.list.count())
        ]

    def _on_clicked(self, item: QListWidgetItem) -> None:
        self.chosen.emit(int(item.data(ROLE_INDEX)))
