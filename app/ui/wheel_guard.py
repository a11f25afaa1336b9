"""The mouse wheel scrolls the page; it changes a spin box, slider or combo box only once the writer chose it.

Qt's spin boxes, sliders and combo boxes take wheel events under the pointer, focused or not (and their
default WheelFocus policy even focuses them): scrolling the Settings page changed the entropy bound from 0.100
to 0.001 on the way down. One application-wide filter fixes every dialog at once, the ones to come included:
such a widget on a page that scrolls is polished to take focus by click or Tab only, and a wheel event over it
while it lacks focus is passed on to the page. Outside a scrolling page the wheel is meant for the widget
(the toolbar's rewrite-strength dial turns under it), so those are left alone.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollBar,
    QWidget,
)

GUARDED = (QAbstractSpinBox, QAbstractSlider, QComboBox)
_WATCHED = (QEvent.Type.Polish, QEvent.Type.Wheel)


def on_a_scrolling_page(widget: QWidget) -> bool:
    """True when `widget` sits inside a scroll area (the page the wheel is scrolling)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


class WheelGuard(QObject):
    """Application event filter: a wheel over an unfocused value widget scrolls its page instead."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt virtual
        if event.type() not in _WATCHED:  # every event of the app passes here: leave the rest at once
            return False
        if not isinstance(watched, GUARDED) or isinstance(watched, QScrollBar):
            return False  # a scroll bar is what the wheel is for
        assert isinstance(watched, QWidget)
        if not on_a_scrolling_page(watched):
            return False
        if event.type() == QEvent.Type.Polish:
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


__all__ = ["GUARDED", "WheelGuard", "install", "on_a_scrolling_page"]
