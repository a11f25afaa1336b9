"""The mouse wheel scrolls the page; it changes a spin box, slider or combo box only once the writer chose it.

Qt's spin boxes, sliders and combo boxes take wheel events under the pointer, focused or not (and their
default WheelFocus policy even focuses them): scrolling the Settings page changed the entropy bound from 0.100
to 0.001 on the way down. `guard(page)` fixes a scrolling page: each such widget on it takes focus by click or
Tab only, and a wheel event over it while it lacks focus is passed on to the page. Outside a scrolling page
the wheel is meant for the widget (the toolbar's rewrite-strength dial turns under it), so those are left
alone.

The filter sits on the guarded widgets only, never on the application: an application-wide Python filter
sees every Qt event of the window, each needing the interpreter lock the engine thread is using, and that
added about 25 ms to the UI's worst stall while a model loads and drafts (tests/e2e/test_gui_tiny.py).
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QScrollBar,
    QWidget,
)

GUARDED = (QAbstractSpinBox, QAbstractSlider, QComboBox)


def on_a_scrolling_page(widget: QWidget) -> bool:
    """True when `widget` sits inside a scroll area (the page the wheel is scrolling)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QAbstractScrollArea):
            return True
        parent = parent.parentWidget()
    return False


class WheelGuard(QObject):
    """Event filter of the guarded value widgets: a wheel over an unfocused one scrolls its page instead."""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt virtual
        if event.type() != QEvent.Type.Wheel or not isinstance(watched, QWidget) or watched.hasFocus():
            return False
        event.ignore()  # not accepted: Qt hands the wheel to the parent (the scroll area scrolls)
        return True


def guard(page: QWidget) -> int:
    """Guard every spin box, slider and combo box that sits on a scrolling page inside `page` (call it once
    the page is built); returns how many were guarded."""
    keeper = page.findChild(WheelGuard, "letterpressWheelGuard")
    if keeper is None:
        keeper = WheelGuard(page)
        keeper.setObjectName("letterpressWheelGuard")
    count = 0
    for widget in page.findChildren(QWidget):
        if not isinstance(widget, GUARDED) or isinstance(widget, QScrollBar):
            continue  # a scroll bar is what the wheel is for
        if not on_a_scrolling_page(widget) or widget.property("letterpressWheelGuarded"):
            continue
        if widget.focusPolicy() == Qt.FocusPolicy.WheelFocus:
            widget.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        widget.installEventFilter(keeper)
        widget.setProperty("letterpressWheelGuarded", True)
        count += 1
    return count


__all__ = ["GUARDED", "WheelGuard", "guard", "on_a_scrolling_page"]
