"""The rough edges a new user hit, each through the real window with the scripted engine."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QLabel

from app.ui.contrast import contrast
from app.ui.status import elide_words, rate_text
from app.ui.theme import apply_theme
from engine.api import Span, Stats
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text

pytestmark = pytest.mark.usefixtures("user_dirs")


# -- status bar ----------------------------------------------------------------------------------------------


def test_rate_never_reads_zero_for_a_real_rate():
    assert rate_text(Stats(new_tokens=3, seconds=1.0, steps=8, forwards=8)) == "3.0 tok/s"
    assert rate_text(Stats(new_tokens=120, seconds=4.0, steps=8, forwards=8)) == "30 tok/s"
    slow = rate_text(Stats(new_tokens=1, seconds=100.0, steps=40, forwards=40))
    assert slow == "0.03 tok/step" and not slow.startswith("0 ")
    assert rate_text(Stats(new_tokens=1, seconds=4.0, steps=8, forwards=8)) == "0.2 tok/s"


def test_the_stats_label_shows_the_rate_with_a_decimal(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" a b"], steps=3, step_delay=0.4))
    set_text(window, "Go")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    text = window.statsLabel.text()
    assert "tok/s" in text and " 0 tok/s" not in text
    assert any(part.strip().endswith("tok/s") and "." in part for part in text.split("·"))


def test_long_status_messages_end_at_a_word_with_an_ellipsis_and_the_tooltip_has_it_all(qtbot):
    window = build_window(qtbot, FakeEngine())
    window.resize(700, 500)
    long = (
        "The document is longer than the model reads at once; it sees the 4,000 characters on each side of "
        "the selection, so whatever lies further away does not shape the suggestion at all."
    )
    window.show_message(long)
    label = window.statusBar().findChild(QLabel, "statusMessage")
    qtbot.waitUntil(lambda: label.text() != "", timeout=2000)
    shown = label.text()
    assert window.statusBar().currentMessage() == long
    assert shown.endswith("…") and len(shown) < len(long)
    assert long.startswith(shown[:-1].rstrip(" ,;:")) and long[len(shown[:-1].rstrip(" ,;:"))] in " ,;:"
    assert label.toolTip() == long
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()


def test_elide_words_cuts_between_words():
    fits = lambda t: len(t) <= 12  # noqa: E731
    assert elide_words("short", fits) == "short"
    assert elide_words("one two three four", fits) == "one two…"
    assert elide_words("incomprehensibilities", fits) == "incomprehen…"


def test_a_plain_ctrl_r_says_which_instruction_it_runs_while_it_runs(qtbot):
    from app.main_window import GENERIC_REWRITE

    window = build_window(qtbot, FakeEngine(texts=["Short."], steps=6, hold_at_step=2))
    set_text(window, "A long sentence here.", select=(0, 21))
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: "step 2/6" in window.assistant.ghost.content.badge, timeout=5000)
    assert window.statusBar().currentMessage() == "Rewriting: " + GENERIC_REWRITE.rstrip(".") + "…"
    qtbot.wait(100)
    assert window.statusBar().currentMessage().startswith("Rewriting: ")
    window.host.engine.release.set()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    assert not window.statusBar().currentMessage().startswith("Rewriting")
    window.actionDismissSuggestion.trigger()
    set_text(window, "A long sentence here.", select=(0, 21))
    window.host.engine.hold_at_step = None
    window.preset_actions[0].trigger()  # Shorter
    assert window.statusBar().currentMessage() == "Rewriting: Make it shorter while keeping its meaning…"


# -- dark theme contrast -------------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_the_faintest_ghost_word_keeps_3_to_1_contrast(qtbot, theme):
    apply_theme(QApplication.instance(), theme)
    try:
        window = build_window(qtbot, FakeEngine())
        ghost = window.assistant.ghost
        assert ghost.faintest_contrast() >= 3.0
        # The painted pixels agree: a zero-confidence word in a large font, its darkest/brightest ink
        # measured.
        font = window.editor.font()
        font.setPointSize(40)
        window.editor.setFont(font)
        set_text(window, "X")
        from app.assist.ghost import GhostContent

        ghost.show(GhostContent("inline", (Span(" MMMM", 0.0),)), lambda: (1, 1))
        ghost.flush()
        qtbot.wait(50)
        image: QImage = window.editor.viewport().grab().toImage()
        bg = ghost.ghost_background()
        start = window.editor.rect_for_position(1)
        best = 1.0
        for x in range(start.right() + 4, min(image.width(), start.right() + 300), 2):
            for y in range(start.top(), start.bottom(), 2):
                best = max(best, contrast(QColor(image.pixel(x, y)), bg))
        assert best >= 3.0, f"faintest ghost ink measured at {best:.2f}:1"
    finally:
        apply_theme(QApplication.instance(), "light")


# -- command palette -----------------------------------------------------------------------------------------


def test_palette_filters_as_you_type_lists_every_menu_action_and_runs_the_choice(qtbot):
    from PySide6.QtGui import QAction

    from app.ui.palette import CommandPalette, menu_commands

    window = build_window(qtbot, FakeEngine(texts=["Short."], steps=2))
    window.actionCommandPalette.trigger()
    palette = window.findChild(CommandPalette, "commandPalette")
    assert palette is not None and palette.isVisible()
    listed = palette.visible_labels()
    every = [c.label for c in menu_commands(window.menuBar(), (window.actionCommandPalette,))]
    assert sorted(listed) == sorted(every)
    for label in (
        "View ▸ Theme ▸ Dark",
        "Assist ▸ Accept suggestion",
        "Edit ▸ Find and replace",
        "Assist ▸ Rewrite as ▸ Shorter",
    ):
        assert label in listed, label
    menus = window.menuBar().findChildren(type(window.menuEdit))
    leaves = {a for m in menus for a in m.actions() if a.text() and a.menu() is None and not a.isSeparator()}
    for action in leaves - {window.actionCommandPalette}:  # every command a menu holds is in the palette
        name = action.text().replace("&", "").rstrip("…").strip()
        assert any(label.endswith("▸ " + name) for label in listed), name
    qtbot.keyClicks(palette.filter, "dark")
    assert palette.visible_labels()[0] == "View ▸ Theme ▸ Dark"
    assert len(palette.visible_labels()) < len(listed)
    palette.filter.clear()
    qtbot.keyClicks(palette.filter, "accept")
    shown = palette.visible_labels()
    assert shown and all("accept" in label.lower() for label in shown)
    assert palette.selected() is None, "nothing to accept now: the accept commands are listed greyed"
    palette.filter.clear()
    qtbot.keyClicks(palette.filter, "theme dark")
    qtbot.keyClick(palette.filter, Qt.Key.Key_Return)
    assert not palette.isVisible()
    assert QApplication.instance().property("letterpressTheme") == "dark"
    assert window.findChild(QAction, "actionTheme_dark").isChecked()
    window.set_theme("light")


def test_palette_arrow_keys_move_and_enter_runs_a_rewrite(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["Short."], steps=2))
    set_text(window, "A long sentence here.", select=(0, 21))
    window.actionCommandPalette.trigger()
    palette = window.palette_dialog
    qtbot.keyClicks(palette.filter, "rewrite as")
    first = palette.visible_labels()[0]
    qtbot.keyClick(palette.filter, Qt.Key.Key_Down)
    assert palette.selected().label != first
    palette.filter.clear()
    qtbot.keyClicks(palette.filter, "shorter")
    qtbot.keyClick(palette.filter, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=5000)
    assert window.host.engine.requests[-1].instruction.startswith("Make it shorter")


# -- find / replace ------------------------------------------------------------------------------------------


def test_find_replace_whole_word_and_match_case_say_how_many_were_replaced(qtbot):
    window = build_window(qtbot, FakeEngine())
    text = "cat catalog Cat cat. concat CAT"
    set_text(window, text, cursor=0)
    window.actionReplace.trigger()
    bar = window.find_bar
    assert bar.isVisible() and bar.whole.isVisible() and bar.case.isVisible()
    bar.find_edit.setText("cat")
    bar.replace_edit.setText("dog")
    bar.whole.setChecked(True)
    bar.case.setChecked(True)
    qtbot.mouseClick(bar.all_btn, Qt.MouseButton.LeftButton)
    assert window.editor.toPlainText() == "dog catalog Cat dog. concat CAT"
    assert bar.result.text() == "2 replaced"
    window.editor.undo()
    bar.case.setChecked(False)
    qtbot.mouseClick(bar.all_btn, Qt.MouseButton.LeftButton)
    assert window.editor.toPlainText() == "dog catalog dog dog. concat dog"
    assert bar.result.text() == "4 replaced"
    window.editor.undo()
    bar.whole.setChecked(False)
    qtbot.mouseClick(bar.all_btn, Qt.MouseButton.LeftButton)
    assert bar.result.text() == "6 replaced"
    window.editor.undo()
    assert window.editor.toPlainText() == text
    bar.find_edit.setText("dolphin")
    qtbot.mouseClick(bar.all_btn, Qt.MouseButton.LeftButton)
    assert bar.result.text() == "No matches"


def test_replace_one_respects_whole_word(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "catalog cat", cursor=0)
    bar = window.find_bar
    bar.open(replace=True)
    bar.find_edit.setText("cat")
    bar.replace_edit.setText("dog")
    bar.whole.setChecked(True)
    assert bar.find_next()
    assert window.editor.textCursor().selectionStart() == len("catalog ")
    bar._replace()
    assert window.editor.toPlainText() == "catalog dog"


def test_dark_theme_check_boxes_are_readable_checked_or_not(qtbot):
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QCheckBox

    apply_theme(QApplication.instance(), "dark")
    try:
        results = {}
        for checked in (False, True):
            box = QCheckBox("Write document text to the log")
            box.setChecked(checked)
            qtbot.addWidget(box)
            box.show()
            qtbot.waitExposed(box)
            image = box.grab().toImage()
            window = box.palette().color(QPalette.ColorRole.Window)
            # The indicator is the square at the left: its outline or fill must stand out from the window.
            side = min(image.height(), 22)
            best = max(
                contrast(QColor(image.pixel(x, y)), window)
                for x in range(side)
                for y in range(image.height())
            )
            results[checked] = best
        assert results[False] >= 3.0 and results[True] >= 3.0, results
    finally:
        apply_theme(QApplication.instance(), "light")
