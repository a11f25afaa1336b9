"""The wheel scrolls a page; it changes a value only in the field the writer chose (issue 34, case 2).
The real wheel over the real Settings dialog is in tests/app/test_real_x.py;
here the rule itself, offscreen."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QDoubleSpinBox, QScrollArea, QSlider, QVBoxLayout, QWidget

from app.ui import wheel_guard


def _wheel(widget: QWidget, notches: int) -> None:
    centre = QPointF(widget.width() / 2, widget.height() / 2)
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(QPoint(int(centre.x()), int(centre.y())))),
        QPoint(0, 0),
        QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def test_an_unfocused_field_on_a_scrolling_page_keeps_its_value_and_a_focused_one_turns(qtbot):
    area = QScrollArea()
    page = QWidget()
    field = QDoubleSpinBox(page)
    field.setDecimals(3)
    field.setSingleStep(0.001)
    field.setValue(0.1)
    QVBoxLayout(page).addWidget(field)
    area.setWidget(page)
    assert wheel_guard.guard(area) == 1
    qtbot.addWidget(area)
    area.show()
    qtbot.waitExposed(area)
    assert field.focusPolicy() == Qt.FocusPolicy.StrongFocus, "the wheel must not focus it"
    _wheel(field, -3)
    assert field.value() == 0.1
    field.setFocus()
    qtbot.waitUntil(field.hasFocus)
    _wheel(field, -3)
    assert field.value() < 0.1, "once chosen, the wheel turns it"


def test_a_dial_outside_a_scrolling_page_still_turns_under_the_wheel(qtbot):
    """The toolbar's rewrite-strength dial is meant to be turned by the wheel without focus."""
    slider = QSlider(Qt.Orientation.Horizontal)
    slider.setRange(0, 10)
    slider.setValue(5)
    slider.setFocusPolicy(Qt.FocusPolicy.TabFocus)
    assert wheel_guard.guard(slider) == 0
    qtbot.addWidget(slider)
    slider.show()
    qtbot.waitExposed(slider)
    _wheel(slider, 1)
    assert slider.value() != 5
