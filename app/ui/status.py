"""The status bar's message line and the request figures, written so nothing is cut mid-word or rounded to
zero.

`QStatusBar.showMessage` paints the text clipped at the first permanent widget, so a long message ended
mid-word. `MessageBar` keeps the same API (`showMessage`, `clearMessage`, `currentMessage`, `messageChanged`)
but shows the message in an `ElidedLabel`: cut at a word with "…", the full text in its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar, QWidget

from engine.api import Stats

ELLIPSIS = "…"


def elide_words(text: str, fits: Callable[[str], bool]) -> str:
    """The longest run of whole words of `text` that fits, followed by "…" (the text itself when it fits)."""
    if fits(text):
        return text
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # the most words that still fit with the ellipsis
        mid = (lo + hi + 1) // 2
        if fits(" ".join(words[:mid]).rstrip(" ,;:") + ELLIPSIS):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:  # not even one word: cut inside the first one rather than show nothing
        first = words[0]
        n = len(first)
        while n > 0 and not fits(first[:n] + ELLIPSIS):
            n -= 1
        return first[:n] + ELLIPSIS
    return " ".join(words[:lo]).rstrip(" ,;:") + ELLIPSIS


class ElidedLabel(QLabel):
    """A one-line label that shortens its text at a word boundary with "…" and shows the full text as
    tooltip."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextFormat(Qt.TextFormat.PlainText)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self._refit()

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._refit()

    def _refit(self) -> None:
        fm = self.fontMetrics()
        room = max(0, self.contentsRect().width() - 2)
        one_line = " ".join(self._full.split())
        shown = elide_words(one_line, lambda t: fm.horizontalAdvance(t) <= room) if room else ""
        super().setText(shown)
        self.setToolTip(self._full if shown != one_line or self._full != one_line else "")


class MessageBar(QStatusBar):
    """A status bar whose temporary messages are elided at a word, never clipped mid-word."""

    messageShown = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.label = ElidedLabel(self)
        self.label.setObjectName("statusMessage")
        self.addWidget(self.label, 1)
        self._message = ""
        self._timer = QTimer(self, singleShot=True)
        self._timer.timeout.connect(self.clearMessage)

    def showMessage(self, text: str, timeout: int | None = 0) -> None:  # noqa: N802 - Qt's name
        self._message = text
        self.label.set_full_text(text)
        if timeout is not None and timeout > 0:
            self._timer.start(timeout)
        else:
            self._timer.stop()
        self.messageChanged.emit(text)
        self.messageShown.emit(text)

    def clearMessage(self) -> None:  # noqa: N802
        if self._message:
            self._message = ""
            self.label.set_full_text("")
            self.messageChanged.emit("")
        self._timer.stop()

    def currentMessage(self) -> str:  # noqa: N802
        return self._message


def rate_text(stats: Stats) -> str:
    """Tokens per second that never reads "0 tok/s" for a real rate: whole numbers from 10 up, one decimal
    below, tokens per step when even that rounds to zero."""
    tps = stats.tokens_per_second
    if tps >= 10:
        return f"{tps:.0f} tok/s"
    if tps >= 0.05:
        return f"{tps:.1f} tok/s"
    if stats.steps and stats.new_tokens:
        return f"{stats.new_tokens / stats.steps:.2f} tok/step"
    return "no tokens"


def stats_text(stats: Stats, first_visible: float) -> str:
    """The last request in one line for the status bar."""
    return (
        f"{stats.steps} steps · {stats.tokens_per_forward:.1f} tok/fwd · {rate_text(stats)} · "
        f"first draft {first_visible:.2f} s"
    )


__all__ = ["ElidedLabel", "MessageBar", "elide_words", "rate_text", "stats_text"]
