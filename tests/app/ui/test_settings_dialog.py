"""Regressions found rebinding the assistant's keys as a writer would (real Settings dialog under Xvfb,
xdotool)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QKeySequenceEdit

pytestmark = pytest.mark.usefixtures("user_dirs")


def _dialog(qtbot, settings):
    from app.ui.settings_dialog import SettingsDialog

    dlg = SettingsDialog(settings)
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    return dlg


def _click_into(qtbot, dlg, name):
    edit = dlg.findChild(QKeySequenceEdit, name)
    dlg.scroll_area.ensureWidgetVisible(edit)
    qtbot.mouseClick(edit, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(edit.hasFocus, timeout=2000)
    return edit


def test_tab_and_shift_tab_can_be_bound_back_after_moving_them(qtbot, settings):
    # QKeySequenceEdit ends editing on Tab/Backtab by default: a writer who moved "accept" to Ctrl+J could
    # never press Tab into the field to bind it back (focus moved on instead); the same for Shift+Tab.
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


@pytest.mark.parametrize(
    ("setting", "key", "mods"),
    [
        ("keys.draft", Qt.Key.Key_Tab, Qt.KeyboardModifier.NoModifier),
        ("keys.rewrite", Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier),
    ],
)
def test_a_request_bound_to_a_key_the_editor_uses_runs_instead_of_typing(qtbot, settings, setting, key, mods):
    # Moving accept off Tab and giving Tab to "Draft at cursor" was accepted by Settings, but Tab kept typing
    # a tab: only the suggestion keys won over the editor's own handling of Tab, Ctrl+Right and the like.
    from engine.fake import FakeEngine
    from tests.helpers.gui import build_window, ghost_state, set_text

    settings.set("keys.accept", "Ctrl+J")
    settings.set("keys.accept_word", "Ctrl+Shift+K")
    settings.set(setting, QKeySequence(mods | key).toString(QKeySequence.SequenceFormat.PortableText))
    window = build_window(qtbot, FakeEngine(texts=[" more words."], steps=2), settings=settings)
    set_text(window, "Some text here", select=(5, 9))
    qtbot.keyClick(window.editor, key, mods)
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    assert window.editor.toPlainText() == "Some text here", (
        "the key ran the request; nothing was typed or moved"
    )
    qtbot.keyClick(window.editor, Qt.Key.Key_J, Qt.KeyboardModifier.ControlModifier)
    assert "more words." in window.editor.toPlainText()
