"""Issue 34 through the real window offscreen (the scripted engine): what a new user's first twenty minutes
found besides the keys and the wheel (those are in tests/app/test_real_x.py, under a real X server)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QToolTip

from engine.fake import FakeEngine
from engine.resources import demo_model_dir
from tests.helpers.gui import build_window, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")


def _draft(qtbot, window, text: str = "The harbour was quiet.") -> None:
    set_text(window, text)
    window.actionDraft.trigger()
    wait_ready(qtbot, window)


def test_the_demo_strip_sits_above_the_page_so_the_status_bar_fits_the_default_window(qtbot):
    """Case 4: the demo badge and its two buttons took ~480 px of the status bar, which pushed the window past
    its default 1000 px (the word count and "Local model" were cut)."""
    window = build_window(qtbot, FakeEngine(), model_dir=str(demo_model_dir()))
    assert window.demoBanner.isVisible()
    assert window.demoBanner.parentWidget() is window.centralWidget()
    assert window.demoBanner not in window.statusBar().findChildren(type(window.demoBanner))
    assert window.statusBar().minimumSizeHint().width() <= 1000
    assert window.minimumSizeHint().width() <= 1000


def test_the_page_does_not_jump_when_the_first_run_hint_goes(qtbot):
    """Case 6: the text moved ~100 px up under the writer's eyes when the hint hid at the first draft."""
    window = build_window(qtbot, FakeEngine(steps=2))
    window.show_first_run_hint()
    qtbot.waitUntil(lambda: window.firstRunHint.isVisible())
    qtbot.waitUntil(lambda: window.editor.y() > window.firstRunHint.y())
    top = window.editor.mapTo(window, window.editor.rect().topLeft()).y()
    _draft(qtbot, window)
    qtbot.waitUntil(lambda: not window.firstRunHint.isVisible())
    window.centralWidget().layout().activate()
    assert window.editor.mapTo(window, window.editor.rect().topLeft()).y() == top
    window.show_first_run_hint()  # Help ▸ Getting started brings it back where it was
    assert window.firstRunHint.isVisible()
    assert not window.firstRunHint.sizePolicy().retainSizeWhenHidden()


def test_reroll_with_nothing_to_reroll_says_so_beside_the_caret_whole(qtbot, settings):
    """Case 7: Alt+R changed nothing on the page and its only feedback was cut in the status bar."""
    settings.set("rewrite.reroll_threshold", 0.05)
    window = build_window(qtbot, FakeEngine(steps=4), settings=settings)
    _draft(qtbot, window)
    assert not window.editing.reroll_uncertain()
    message = window.statusBar().currentMessage()
    assert "nothing to re-roll" in message
    assert window.editing.last_tip == message
    assert QToolTip.text() == message
    QToolTip.hideText()


def test_the_demo_shows_no_confidence_percentages_and_a_real_model_does(qtbot):
    """Case 8: the Alternatives panel showed 97-100% for the demo's gibberish."""
    demo = build_window(qtbot, FakeEngine(steps=2), model_dir=str(demo_model_dir()))
    demo.editing.actionShowAlternatives.trigger()
    _draft(qtbot, demo)
    rows = demo.editing.panel.rows()
    assert rows and not any("%" in label for _, label in rows)
    assert "demo model's own certainty" in demo.editing.panel.hint.text()
    assert "certainty" in demo.editing.panel.list.item(0).toolTip()

    real = build_window(qtbot, FakeEngine(steps=2))
    real.editing.actionShowAlternatives.trigger()
    _draft(qtbot, real)
    assert all("%" in label for _, label in real.editing.panel.rows())
    assert "certainty" not in real.editing.panel.hint.text()


def test_the_shortcut_sheet_names_one_spelling_per_press_and_only_real_keys(qtbot):
    """Case 9: the sheet listed "Shift+Tab, Shift+Backtab, Backtab" and "F16"."""
    window = build_window(qtbot, FakeEngine())
    window.findChild(QAction, "actionShortcuts").trigger()
    rows = dict(window.shortcut_sheet.visible_rows())
    window.shortcut_sheet.close()
    assert rows["Accept next line"] == "Shift+Tab"
    every_key = ", ".join(rows.values())
    assert "Backtab" not in every_key
    for extra in ("F13", "F14", "F16", "F18", "F20"):
        assert extra not in every_key.split(", "), extra


def test_the_window_opens_where_the_writer_left_it(qtbot):
    """Case 9: the window's size and position were not remembered between starts."""
    from tests.helpers.gui import fake_window

    first = fake_window(qtbot)
    first.show()
    qtbot.waitExposed(first)
    first.resize(780, 560)  # within the offscreen screen (800x600), which restoreGeometry keeps it on
    qtbot.waitUntil(lambda: first.size().width() == 780)
    first.close()
    second = fake_window(qtbot)
    assert (second.width(), second.height()) == (780, 560)
    second.close()


def test_a_damaged_place_file_leaves_the_default_size(qtbot):
    from app.ui import window_place
    from tests.helpers.gui import fake_window

    window_place.place_file().parent.mkdir(parents=True, exist_ok=True)
    window_place.place_file().write_text("not base64 at all!\n", encoding="ascii")
    window = fake_window(qtbot)
    assert (window.width(), window.height()) == (1000, 720)
    window.close()


def test_settings_show_the_demo_choice_in_words_and_keep_it(qtbot, settings):
    """Case 9: Settings showed "Model folder: builtin:demo", the app's internal marker."""
    from PySide6.QtWidgets import QLineEdit

    from app.ui.settings_dialog import SettingsDialog

    settings.set("model.folder", "builtin:demo")
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    field = dialog.findChild(QLineEdit, "setting:model.folder")
    assert field.text() == ""
    assert "built-in demo" in field.placeholderText()
    assert dialog.apply()
    assert settings["model.folder"] == "builtin:demo"
    field.setText("/models/diffusiongemma")
    assert dialog.apply()
    assert settings["model.folder"] == "/models/diffusiongemma"


def test_infill_on_the_blank_line_between_paragraphs_is_a_paragraph_of_its_own(qtbot):
    """Case 5: the accepted text used up the blank line and was glued to both paragraphs."""
    from PySide6.QtCore import Qt

    from app.assist.suggestion import join

    assert join("\n", " Some middle text.", "\n").text == "\nSome middle text.\n"
    assert join("\n", " Some middle text.", "\n", complete=False).text.startswith("\n")
    assert join("x", " Some middle text.", "\n").text == " Some middle text."  # not on a line of its own

    engine = FakeEngine(steps=2, texts=[" The boats came back at dusk."])
    window = build_window(qtbot, engine)
    doc = "The harbour was quiet.\n\nBy noon the gulls had returned."
    set_text(window, doc, cursor=len("The harbour was quiet.\n"))
    window.actionInfill.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == (
        "The harbour was quiet.\n\nThe boats came back at dusk.\n\nBy noon the gulls had returned."
    )


def test_settings_say_what_the_room_above_the_page_is_for(qtbot, settings):
    """Case 9: an empty strip sat above the page (the problems line's kept room); it now says what it is
    for, and a problem takes its place without moving anything."""
    from app.ui.settings_dialog import SettingsDialog

    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.idle_note.isVisible() and "OK or Apply" in dialog.idle_note.text()
    assert not dialog.problems.isVisible()
    top = dialog.scroll_area.mapTo(dialog, dialog.scroll_area.rect().topLeft())
    dialog._show_problems(["The end temperature must be lower than the start temperature."])
    assert dialog.problems.isVisible() and not dialog.idle_note.isVisible()
    assert dialog.scroll_area.mapTo(dialog, dialog.scroll_area.rect().topLeft()) == top
