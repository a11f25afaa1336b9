"""Regressions found rebinding the assistant's keys as a writer would (real Settings dialog under Xvfb, xdotool)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QKeySequenceEdit

pytestmark = pytest.mark.usefixtures("user_dirs")


def _dialog(qtbot, settings):
    from app.settings_dialog import SettingsDialog

    dlg = SettingsDialog(settings)
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    return dlg


def _click_into(qtbot, dlg, name):
    edit = dlg.findChild(QKeySequenceEdit, name)
    dlg.scroll.ensureWidgetVisible(edit)
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    return edit


def test_tab_and_shift_tab_can_be_bound_back_after_moving_them(qtbot, settings):
    # QKeySequenceEdit ends editing on Tab/Backtab by default: a writer who moved "accept" to Ctrl+J could never
    # press Tab into the field to bind it back (focus moved on instead); the same for Shift+Tab.
    settings.set("keys.accept", "Ctrl+J")
    settings.set("keys.accept_line", "Ctrl+L")
    dlg = _dialog(qtbot, settings)
    edit = _click_into(qtbot, dlg, "setting:keys.accept")
    qtbot.keyClick(edit, Qt.Key.Key_Tab)
    assert edit.keySequence() == QKeySequence("Tab")
    line = _click_into(qtbot, dlg, "setting:keys.accept_line")
    qtbot.keyClick(line, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert dlg.apply(), dlg.problems.text()
    assert settings["keys.accept"] == "Tab" and settings["keys.accept_line"] == "Shift+Tab"


def test_tab_still_moves_on_after_a_key_was_recorded_or_when_tabbing_through(qtbot, settings):
    dlg = _dialog(qtbot, settings)
    edit = _click_into(qtbot, dlg, "setting:keys.accept")
    qtbot.keyClick(edit, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    assert edit.keySequence() == QKeySequence("Ctrl+J")
    qtbot.keyClick(edit, Qt.Key.Key_Tab)  # one key recorded: Tab goes on to the next field, as everywhere
    assert not edit.hasFocus() and edit.keySequence() == QKeySequence("Ctrl+J")
    word = dlg.findChild(QKeySequenceEdit, "setting:keys.accept_word")
    assert word.hasFocus()
    qtbot.keyClick(word, Qt.Key.Key_Tab)  # arrived by Tab: Tab keeps moving through the dialog
    assert not word.hasFocus() and word.keySequence() == QKeySequence("Ctrl+Right")
