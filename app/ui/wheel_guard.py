"""The mouse wheel scrolls the page; it changes a spin box, slider or combo box only once the writer chose it.

Qt's spin boxes, sliders and combo boxes take wheel events under the pointer, focused or not (and their
default WheelFocus policy even focuses them): scrolling the Settings page changed the entropy bound from 0.100
to 0.001 on the way down. One application-wide filter fixes every dialog at once, the ones to come included:
such a widget is polished to take focus by click or Tab only, and a wheel event over it while it lacks focus
is passed on to the page that holds it.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSlider, QAbstractSpinBox, QApplication, QComboBox, QScrollBar, QWidget

GUARDED = (QAbstractSpinBox, QAbstractSlider, QComboBox)


class WheelGuard(QObject):
    """Application event filter: a wheel over an unfocused value widget scrolls its page instead."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt virtual
        if not isinstance(watched, GUARDED) or isinstance(watched, QScrollBar):
            return False  # a scroll bar is what the wheel is for
        if event.type() == QEvent.Type.Polish:
            assert isinstance(watched, QWidget)
            if watched.focusPolicy() == Qt.FocusPolicy.WheelFocus:
                watched.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        elif event.type() == QEvent.Type.Wheel and not watched.hasFocus():
            event.ignore()  # not accepted: Qt hands the wheel to the parent (the scroll area scrolls)
            return True
        return False


def install(app: QApplication | None = None) -> None:
    """Put the guard on the application once (later calls do nothing)."""
    target = app or QApplication.instance()
    if not isinstance(target, QApplication) or target.property("letterpressWheelGuard"):
        return
    guard = WheelGuard(target)
    target.installEventFilter(guard)
    target.setProperty("letterpressWheelGuard", True)


__all__ = ["GUARDED", "WheelGuard", "install"]
