"""Accept, dismiss and undo keep the writer's text exact: the cases a new user hit, through the real
window."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from engine.api import CandidateView, Span
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, ghost_text, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")

BEFORE = "It was morning.  "[:-1]  # "It was morning. " (one space, as the writer typed it)
SENTENCE = "He counted the boats that had come back in the night."
AFTER = " The sea was calm."
DOC = BEFORE + SENTENCE + AFTER
SHORTER = " She commanded the boats home."  # starts with a space, as rewrite results do
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def select_sentence(window):
    s = DOC.index(SENTENCE)
    set_text(window, DOC, select=(s, s + len(SENTENCE)))


def ctrl_right(qtbot, window):
    qtbot.keyClick(window.editor, Qt.Key.Key_Right, CTRL)


def undo(qtbot, window):
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)


def redo(qtbot, window):
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL | SHIFT)


def test_shorter_then_two_word_accepts_replaces_the_sentence_and_undoes_exactly(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[SHORTER], steps=3))
    select_sentence(window)
    window.preset_actions[0].trigger()  # Shorter
    wait_ready(qtbot, window)
    ctrl_right(qtbot, window)
    assert window.editor.toPlainText() == BEFORE + "She" + AFTER
    ctrl_right(qtbot, window)
    assert window.editor.toPlainText() == BEFORE + "She commanded" + AFTER
    assert ghost_text(window) == " the boats home."
    assert SENTENCE not in window.editor.toPlainText(), "the original never stays beside the new words"
    # One undo step per accept; undoing both restores the original byte for byte.
    undo(qtbot, window)
    assert window.editor.toPlainText() == BEFORE + "She" + AFTER
    assert ghost_state(window) == "idle", "undo never brings a stale suggestion back"
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC
    assert not window.editor.document().isUndoAvailable()
    assert window.editor.textCursor().position() == len(BEFORE + SENTENCE), (
        "caret at the restored region's end"
    )
    redo(qtbot, window)
    assert window.editor.toPlainText() == BEFORE + "She" + AFTER
    assert window.editor.textCursor().position() == len(BEFORE + "She")


def test_custom_rewrite_one_word_then_esc_keeps_only_the_accepted_word(qtbot, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    window = build_window(qtbot, FakeEngine(texts=[" makes; waves rise."], steps=3))
    select_sentence(window)
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("Make it dramatic", True))
    window.actionCustomInstruction.trigger()
    wait_ready(qtbot, window)
    ctrl_right(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert window.statusBar().currentMessage() == "Suggestion dismissed."
    assert window.editor.toPlainText() == BEFORE + "makes;" + AFTER
    assert ghost_state(window) == "idle"
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC


def test_partial_accepts_of_an_infill_over_a_selection_then_the_rest(qtbot):
    doc = "left [old words] right"
    window = build_window(qtbot, FakeEngine(texts=[" NEW MIDDLE PART "], steps=2))
    set_text(window, doc, select=(5, 16))
    window.actionInfill.trigger()
    wait_ready(qtbot, window)
    ctrl_right(qtbot, window)
    assert window.editor.toPlainText() == "left NEW right", "no glued word while the rest is still ghost"
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "left NEW MIDDLE PART right"
    undo(qtbot, window)
    assert window.editor.toPlainText() == "left NEW right"
    undo(qtbot, window)
    assert window.editor.toPlainText() == doc


def test_accepts_while_still_denoising_replace_the_region_too(qtbot):
    engine = FakeEngine(texts=[SHORTER], steps=10, hold_at_step=10)
    window = build_window(qtbot, engine)
    select_sentence(window)
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: "step 10/10" in window.assistant.ghost.content.badge, timeout=5000)
    assert ghost_state(window) == "denoising"
    visible = ghost_text(window)
    ctrl_right(qtbot, window)
    first = visible.split()[0]
    assert window.editor.toPlainText() == BEFORE + first + AFTER
    assert ghost_state(window) == "ready"
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == BEFORE + visible.strip() + AFTER
    qtbot.wait(100)  # the cancelled run's late events change nothing
    assert window.editor.toPlainText() == BEFORE + visible.strip() + AFTER
    undo(qtbot, window)
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC


def test_whole_accept_joins_without_doubled_space(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[SHORTER], steps=2))
    select_sentence(window)
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == BEFORE + SHORTER.strip() + AFTER


def test_draft_after_a_word_gets_a_space_and_after_a_space_none(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["world"], steps=2))
    set_text(window, "Hello")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "Hello world"
    window2 = build_window(qtbot, FakeEngine(texts=[" more."], steps=2))
    set_text(window2, "Say it again. ")
    window2.actionDraft.trigger()
    wait_ready(qtbot, window2)
    qtbot.keyClick(window2.editor, Qt.Key.Key_Tab)
    assert window2.editor.toPlainText() == "Say it again. more."


def test_rewrite_of_a_paragraph_with_its_break_keeps_the_break(qtbot):
    doc = "First paragraph.\n\nSecond one here.\n\nThird."
    s, e = doc.index("Second"), doc.index("Third")
    window = build_window(qtbot, FakeEngine(texts=[" Second, rewritten."], steps=2))
    set_text(window, doc, select=(s, e))  # selected with the paragraph break after it
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    ctrl_right(qtbot, window)
    assert window.editor.toPlainText() == "First paragraph.\n\nSecond,\n\nThird."
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "First paragraph.\n\nSecond, rewritten.\n\nThird."


@pytest.mark.parametrize("kind", ["draft", "rewrite", "infill"])
def test_undo_puts_the_caret_at_the_restored_region_and_typing_goes_there(qtbot, kind):
    window = build_window(qtbot, FakeEngine(texts=[" inserted words"], steps=2))
    if kind == "draft":
        set_text(window, DOC, cursor=len(BEFORE + SENTENCE))
        window.actionDraft.trigger()
        restored_end = len(BEFORE + SENTENCE)
    else:
        select_sentence(window)
        (window.actionRewrite if kind == "rewrite" else window.actionInfill).trigger()
        restored_end = len(BEFORE + SENTENCE)
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    accepted = window.editor.toPlainText()
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC
    assert window.editor.textCursor().position() == restored_end
    qtbot.keyClicks(window.editor, "!")
    assert window.editor.toPlainText() == DOC[:restored_end] + "!" + DOC[restored_end:]
    undo(qtbot, window)
    redo(qtbot, window)  # redo of the typing
    undo(qtbot, window)
    window.actionRedo.trigger()  # the menu item behaves like the key
    assert window.editor.toPlainText() == DOC[:restored_end] + "!" + DOC[restored_end:]
    undo(qtbot, window)
    redo(qtbot, window)
    redo(qtbot, window)
    assert window.editor.toPlainText() in (accepted, DOC[:restored_end] + "!" + DOC[restored_end:])


def test_redo_of_an_accept_puts_the_caret_at_the_end_of_the_reinserted_text(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" and then some."], steps=2))
    set_text(window, "Start", cursor=5)
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    undo(qtbot, window)
    assert window.editor.textCursor().position() == 5
    redo(qtbot, window)
    assert window.editor.toPlainText() == "Start and then some."
    assert window.editor.textCursor().position() == len("Start and then some.")


def test_undo_and_redo_items_are_enabled_exactly_when_the_keys_act(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" more"], steps=2))
    ed, undo_item, redo_item = window.editor, window.actionUndo, window.actionRedo

    def consistent():
        assert undo_item.isEnabled() == ed.document().isUndoAvailable()
        assert redo_item.isEnabled() == ed.document().isRedoAvailable()

    consistent()
    assert not undo_item.isEnabled() and not redo_item.isEnabled()
    qtbot.keyClicks(ed, "abc")
    consistent()
    assert undo_item.isEnabled()
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(ed, Qt.Key.Key_Tab)
    consistent()
    undo(qtbot, window)
    consistent()
    assert redo_item.isEnabled()
    while ed.document().isUndoAvailable():
        undo(qtbot, window)
        consistent()
    assert not undo_item.isEnabled() and ed.toPlainText() == ""
    text_before = ed.toPlainText()
    undo(qtbot, window)  # a disabled item's key does nothing either
    assert ed.toPlainText() == text_before
    redo(qtbot, window)
    consistent()
    set_text(window, "opened another text")  # a document replaced wholesale has no history
    consistent()
    assert not undo_item.isEnabled() and not redo_item.isEnabled()


def test_shift_tab_accepts_the_next_line_on_screen(qtbot):
    long = " " + " ".join(f"word{i}" for i in range(60)) + "."
    window = build_window(qtbot, FakeEngine(texts=[long], steps=2))
    window.resize(520, 500)
    set_text(window, "Begin")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    window.assistant.ghost.flush()
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, SHIFT)
    first = window.editor.toPlainText()[len("Begin") :]
    assert first and len(first) < len(long) / 2, "one visual line, not the whole paragraph"
    assert long.startswith(first) and ghost_text(window) == long[len(first) :]
    # What was taken is what the first ghost line showed: the rest started on the next line.
    editor = window.editor
    top = editor.rect_for_position(len("Begin")).top()
    assert editor.rect_for_position(len(editor.toPlainText())).top() == top
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, SHIFT)
    second = window.editor.toPlainText()[len("Begin" + first) :]
    assert second.strip() and long[len(first) :].startswith(second)


def test_shift_tab_stops_at_a_line_break(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" alpha\nbeta"], steps=2))
    set_text(window, "x:")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, SHIFT)
    assert window.editor.toPlainText() == "x: alpha\n" and ghost_text(window) == "beta"


def test_badge_count_is_the_same_while_denoising_and_when_ready(qtbot, settings):
    # One row ends at once (empty): it is not offered while denoising either.
    window = build_window(
        qtbot, FakeEngine(texts=[" one", "", " two"], steps=6, hold_at_step=3), settings=settings
    )
    set_text(window, "Count:")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: "step 3/6" in window.assistant.ghost.content.badge, timeout=5000)
    during = window.assistant.ghost.content.badge
    assert window.assistant.alternatives[1] == 2 and "1/2" in during
    window.host.engine.release.set()
    wait_ready(qtbot, window)
    assert window.assistant.alternatives[1] == 2 and "1/2" in window.assistant.ghost.content.badge


def test_the_context_menus_undo_places_the_caret_like_ctrl_z(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" inserted words"], steps=2))
    select_sentence(window)
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    menu = window.editor.createStandardContextMenu()
    undo_item = next(a for a in menu.actions() if a.objectName() == "edit-undo")
    undo_item.trigger()
    assert window.editor.toPlainText() == DOC
    assert window.editor.textCursor().position() == len(BEFORE + SENTENCE)
    menu.deleteLater()


def test_badge_count_when_the_engine_computes_more_rows_than_it_offers(qtbot, settings):
    """An infill searches more lengths (rows) than the alternatives it returns: the badge counts what is
    offered."""

    class SearchingEngine(FakeEngine):
        def run(self, request, on_step=None, cancel=None):
            def wider(event):
                # a row the result will not keep
                extra = CandidateView((Span(" a fourth length", 0.5),), row=3)
                on_step(
                    type(event)(
                        event.request_id,
                        event.step,
                        event.max_steps,
                        event.block,
                        (*event.candidates, extra),
                        event.elapsed,
                    )
                )

            return super().run(request, wider if on_step else None, cancel)

    window = build_window(
        qtbot, SearchingEngine(texts=[" one", " two", " three"], steps=6, hold_at_step=3), settings=settings
    )
    set_text(window, "Count:")
    window.actionInfill.trigger()
    qtbot.waitUntil(lambda: "step 3/6" in window.assistant.ghost.content.badge, timeout=5000)
    assert "1/3" in window.assistant.ghost.content.badge
    window.host.engine.release.set()
    wait_ready(qtbot, window)
    assert "1/3" in window.assistant.ghost.content.badge


def test_undoing_a_partial_accept_says_what_happened(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[SHORTER], steps=2))
    select_sentence(window)
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    ctrl_right(qtbot, window)
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC and ghost_state(window) == "idle"
    assert "undo took back" in window.statusBar().currentMessage()
