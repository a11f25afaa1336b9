"""The status bar's message line and the request figures, written so nothing is cut mid-word or rounded to
zero.

`QStatusBar.showMessage` paints the text clipped at the first permanent widget, so a long message ended
mid-word. `MessageBar` keeps the same API (`showMessage`, `clearMessage`, `currentMessage`, `messageChanged`)
but shows the message in an `ElidedLabel`: cut at a word with "…", the full text in its tooltip.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QStatusBar, QWidget

from app.platform.text_fit import ELLIPSIS, elide_words
from app.ui.widgets import plain_tip
from engine.api import Stats


class ElidedLabel(QLabel):
    """A one-line label that shortens its text at a word boundary with "…" and shows the full text as tooltip.

    With `max_width` it asks for its text's width up to that many pixels (a status-bar label beside the
    message: a long model name ends at a word instead of pushing everything else away); without, it takes
    whatever width its layout gives it. `tip` is a tooltip of its own, shown under the full text."""

    def __init__(self, parent: QWidget | None = None, *, max_width: int = 0) -> None:
        super().__init__(parent)
        self._full = ""
        self._tip = ""
        self._max_width = max_width
        if max_width:
            self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Preferred)
        else:
            self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setTextFormat(Qt.TextFormat.PlainText)

    def full_text(self) -> str:
        return self._full

    def set_full_text(self, text: str) -> None:
        self._full = text
        self.updateGeometry()
        self._refit()

    def setText(self, text: str) -> None:  # noqa: N802 - Qt's name: callers of a plain label keep working
        self.set_full_text(text)

    def setToolTip(self, tip: str) -> None:  # noqa: N802 - a tip of its own, shown under the full text
        self._tip = tip
        self._refit()

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt virtual
        hint = super().sizeHint()
        if not self._max_width:
            return hint
        margins = self.contentsMargins()
        wanted = self.fontMetrics().horizontalAdvance(" ".join(self._full.split())) + 4
        return QSize(min(self._max_width, wanted + margins.left() + margins.right()), hint.height())

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt virtual
        hint = super().minimumSizeHint()
        if not self._max_width:
            return hint
        least = min(self.sizeHint().width(), self._max_width // 2)  # squeezed, it still shows some words
        return QSize(least, hint.height())

    def resizeEvent(self, e: QResizeEvent) -> None:
        super().resizeEvent(e)
        self._refit()

    def showEvent(self, e: QShowEvent) -> None:  # noqa: N802 - Qt virtual
        super().showEvent(e)
        self._refit()

    def _refit(self) -> None:
        fm = self.fontMetrics()
        room = max(0, self.contentsRect().width() - 2)
        one_line = " ".join(self._full.split())
        laid_out = self.isVisible() and room > 0  # before that its width is not known: the whole text
        shown = elide_words(one_line, lambda t: fm.horizontalAdvance(t) <= room) if laid_out else one_line
        super().setText(shown)
        full = self._full if shown != one_line or self._full != one_line else ""
        QLabel.setToolTip(self, plain_tip("\n".join(t for t in (full, self._tip) if t and t != shown)))


class MessageBar(QStatusBar):
    """A status bar whose temporary messages are elided at a word, never clipped mid-word."""

    messageShown = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.label = ElidedLabel(self)
        self.label.setObjectName("statusMessage")
        # The message keeps room for a short sentence (about 30 characters) however many permanent labels sit
        # beside it; they shorten at a word first (the demo banner, a long model name squeezed it to ~70 px).
        self.label.setMinimumWidth(self.label.fontMetrics().averageCharWidth() * 30)
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


class TiedMessages:
    """The window's passing status messages. One describes the suggestion and the document as they were when
    it was shown; it goes once either changes (undo, a re-run that finished, an accept or dismiss), so the bar
    never keeps saying something no longer true. `edited` counts the document's edits (connect it before the
    assistant's own slots, so a message the assistant gives about an edit is shown after the edit is
    counted); `expire` is called whenever the suggestion changes."""

    def __init__(self, bar: Callable[[], QStatusBar], describes: Callable[[], object]) -> None:
        self._bar = bar  # the window's bar (made after the editor, whose edits count from the start)
        self._describes = describes  # the suggestion as a message describes it
        self._edits = 0
        self._state: tuple[str, object] | None = None  # a tied message and what it describes

    def show(self, text: str, ms: int = 8000, *, tied: bool = True) -> None:
        """A status message for `ms` (0: until replaced). A passing one (`tied`, the default) also goes as
        soon as the suggestion or the document it describes changes; lasting ones (a request running, the
        model's state, a warning) are cleared by whoever shows them."""
        self._bar().showMessage(text, ms)
        self._state = (text, self._now()) if tied and ms > 0 else None

    def _now(self) -> tuple[int, object]:
        return (self._edits, self._describes())

    def edited(self, *_args: object) -> None:
        self._edits += 1
        self.expire()

    def expire(self) -> None:
        if self._state is None:
            return
        text, described = self._state
        if described == self._now():
            return
        self._state = None
        bar = self._bar()
        if bar.currentMessage() == text:  # not one shown since by another route
            bar.clearMessage()


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


__all__ = ["ELLIPSIS", "ElidedLabel", "MessageBar", "elide_words", "rate_text", "stats_text"]
