"""The real main window driven like a writer would, against the scripted engine (no model needed)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction

from engine.api import GenerationError, ModelIncompleteError
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, ghost_text, record_ghost_texts, set_text, wait_ready

DOC = "The first paragraph ends here.\n\nThe last paragraph starts here."


pytestmark = pytest.mark.usefixtures("user_dirs")


def test_automation_surface_names_and_initial_state(qtbot):
    window = build_window(qtbot, FakeEngine())
    assert window.findChild(type(window.editor), "editor") is window.editor
    for name in (
        "actionDraft",
        "actionRewrite",
        "actionInfill",
        "actionAcceptSuggestion",
        "actionAcceptWord",
        "actionAcceptLine",
        "actionDismissSuggestion",
        "actionNextAlternative",
        "actionPreviousAlternative",
    ):
        assert isinstance(window.findChild(QAction, name), QAction), name
    assert ghost_state(window) == "idle"
    assert ghost_text(window) == ""
    assert not window.actionAcceptSuggestion.isEnabled()
    assert window.modelLabel.text().startswith("Ready")


def test_draft_settles_over_steps_and_tab_accepts_as_one_undo_step(qtbot):
    final = " The boats came home before dark."
    window = build_window(qtbot, FakeEngine(texts=[final], steps=8, step_delay=0.03))
    set_text(window, "Evening fell.")
    seen = record_ghost_texts(window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert ghost_state(window) == "denoising"
    wait_ready(qtbot, window)
    assert len(seen()) >= 3, "the ghost text should visibly change over the denoising steps"
    assert seen()[-1] == final and seen()[0] != final
    assert window.actionAcceptSuggestion.isEnabled()
    assert window.editor.toPlainText() == "Evening fell.", "a suggestion must never be inserted by itself"

    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "Evening fell." + final
    assert ghost_state(window) == "idle" and not window.actionAcceptSuggestion.isEnabled()
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == "Evening fell."
    assert ghost_state(window) == "idle" and ghost_text(window) == ""
    assert window.statsLabel.text().startswith("8 steps")


def test_keys_are_plain_editing_keys_without_a_suggestion(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "ab")
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "ab\t"
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert window.editor.toPlainText() == "ab\t"


def test_escape_dismisses_and_cancels_leaving_the_document_untouched(qtbot):
    engine = FakeEngine(steps=50, step_delay=0.05)
    window = build_window(qtbot, engine)
    set_text(window, DOC, cursor=len(DOC))
    with qtbot.waitSignal(window.host.finished, timeout=10_000) as finished:
        window.actionDraft.trigger()
        qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
        qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
        assert ghost_state(window) == "idle" and ghost_text(window) == ""
    assert finished.args[0].cancelled, "Esc must stop the running request"
    assert window.editor.toPlainText() == DOC
    assert not window.editor.document().isUndoAvailable()


def test_rewrite_replaces_the_selection_in_one_undo_step(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["It rained."], steps=5, step_delay=0.01))
    text = "Water fell from the sky for hours on end. Then it stopped."
    set_text(window, text, select=(0, 41))
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    wait_ready(qtbot, window)
    request = window.host.engine.requests[-1]
    assert request.kind == "rewrite" and request.selection == text[:41] and request.after == text[41:]
    assert ghost_text(window) == "It rained."
    assert window.editor.toPlainText() == text
    window.actionAcceptSuggestion.trigger()
    assert window.editor.toPlainText() == "It rained. Then it stopped."
    window.editor.undo()
    assert window.editor.toPlainText() == text


def test_rewrite_without_selection_says_so_and_sends_nothing(qtbot):
    engine = FakeEngine()
    window = build_window(qtbot, engine)
    set_text(window, "No selection here.")
    window.actionRewrite.trigger()
    assert "Select the text" in window.statusBar().currentMessage()
    assert engine.requests == [] and ghost_state(window) == "idle"


def test_infill_fills_the_empty_line_between_paragraphs(qtbot):
    middle = "A bridge sentence."
    window = build_window(qtbot, FakeEngine(texts=[middle], steps=6, step_delay=0.01))
    gap = DOC.index("\n\n") + 1  # the empty line
    set_text(window, DOC, cursor=gap)
    seen = record_ghost_texts(window)
    qtbot.keyClick(
        window.editor, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    wait_ready(qtbot, window)
    request = window.host.engine.requests[-1]
    assert request.kind == "infill" and request.before == DOC[:gap] and request.after == DOC[gap:]
    assert len(seen()) >= 3
    window.actionAcceptSuggestion.trigger()
    # A paragraph of its own: the blank line stays on both sides (it was used up, gluing the paragraphs).
    assert window.editor.toPlainText() == DOC[:gap] + "\n" + middle + "\n" + DOC[gap:]
    window.editor.undo()
    assert window.editor.toPlainText() == DOC


def test_infill_of_a_selection_replaces_it(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["MIDDLE"], steps=3))
    set_text(window, "left [old] right", select=(5, 10))
    window.actionInfill.trigger()
    wait_ready(qtbot, window)
    window.actionAcceptSuggestion.trigger()
    assert window.editor.toPlainText() == "left MIDDLE right"


def test_alternatives_cycle_with_alt_brackets(qtbot, settings):
    texts = [" one.", " two.", " three."]
    window = build_window(qtbot, FakeEngine(texts=texts, steps=3), settings=settings)
    set_text(window, "Count:")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    assert window.host.engine.requests[-1].settings.candidates == 3
    assert ghost_text(window) == " one." and window.assistant.alternatives == (0, 3)
    qtbot.keyClick(window.editor, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.AltModifier)
    assert ghost_text(window) == " two."
    qtbot.keyClick(window.editor, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.AltModifier)
    qtbot.keyClick(window.editor, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.AltModifier)
    assert ghost_text(window) == " one."
    qtbot.keyClick(window.editor, Qt.Key.Key_BracketLeft, Qt.KeyboardModifier.AltModifier)
    assert ghost_text(window) == " three."
    window.actionAcceptSuggestion.trigger()
    assert window.editor.toPlainText() == "Count: three."


def test_partial_accept_word_then_line_then_rest(qtbot):
    final = " alpha beta\ngamma delta"
    window = build_window(qtbot, FakeEngine(texts=[final], steps=3))
    set_text(window, "Start:")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == "Start: alpha"
    assert ghost_text(window) == " beta\ngamma delta"
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, Qt.KeyboardModifier.ShiftModifier)
    assert window.editor.toPlainText() == "Start: alpha beta\n"
    assert ghost_text(window) == "gamma delta"
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "Start:" + final
    assert ghost_state(window) == "idle"
    # Each accept is one undo step, and undo never brings a suggestion back.
    for expected in ("Start: alpha beta\n", "Start: alpha", "Start:"):
        window.editor.undo()
        assert window.editor.toPlainText() == expected
        assert ghost_state(window) == "idle"


def test_undo_after_a_partial_accept_removes_the_stale_suggestion(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" one two three"], steps=2))
    set_text(window, "X")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    window.actionAcceptWord.trigger()
    window.editor.undo()
    assert window.editor.toPlainText() == "X"
    assert ghost_state(window) == "idle" and not window.actionAcceptSuggestion.isEnabled()


def test_partial_accept_of_a_rewrite_replaces_the_original_and_never_interleaves(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["Short one."], steps=2))
    set_text(window, "A long winded sentence.", select=(0, 23))
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    window.actionAcceptWord.trigger()
    assert window.editor.toPlainText() == "Short"
    assert ghost_text(window) == " one."
    window.actionAcceptWord.trigger()
    assert window.editor.toPlainText() == "Short one."
    assert ghost_state(window) == "idle"


def test_typing_elsewhere_during_denoising_keeps_the_suggestion_anchored(qtbot):
    final = " Then the bell rang."
    window = build_window(qtbot, FakeEngine(texts=[final], steps=10, step_delay=0.05))
    set_text(window, "Middle sentence.", cursor=len("Middle sentence."))
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    qtbot.keyClicks(window.editor, "Typed first. ")
    assert ghost_state(window) == "denoising", "typing outside the region must not cancel it"
    wait_ready(qtbot, window)
    window.actionAcceptSuggestion.trigger()
    assert window.editor.toPlainText() == "Typed first. Middle sentence." + final


def test_typing_at_the_anchor_cancels_and_keeps_every_typed_character(qtbot):
    window = build_window(qtbot, FakeEngine(steps=20, step_delay=0.05))
    set_text(window, "Hello")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
    qtbot.keyClicks(window.editor, " world")
    assert window.editor.toPlainText() == "Hello world"
    assert ghost_state(window) == "idle"
    qtbot.wait(300)  # late steps of the cancelled request must not bring it back
    assert ghost_state(window) == "idle" and window.editor.toPlainText() == "Hello world"


def test_editing_inside_a_rewrite_selection_cancels_it(qtbot):
    window = build_window(qtbot, FakeEngine(steps=20, step_delay=0.05))
    set_text(window, "keep this part", select=(5, 9))
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
    cursor = window.editor.textCursor()
    cursor.setPosition(7)
    window.editor.setTextCursor(cursor)
    qtbot.keyClicks(window.editor, "X")
    assert window.editor.toPlainText() == "keep thXis part"
    assert ghost_state(window) == "idle"


def test_a_new_request_wins_and_stale_events_are_dropped(qtbot):
    texts = lambda req: [" first."] if "A" in req.before else [" second."]  # noqa: E731
    window = build_window(qtbot, FakeEngine(texts=texts, steps=20, step_delay=0.02))
    set_text(window, "A")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
    set_text(window, "B")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    assert ghost_text(window) == " second."
    qtbot.wait(100)
    assert ghost_text(window) == " second."


def test_engine_error_shows_error_state_and_message(qtbot):
    engine = FakeEngine(steps=6, fail_at_step=3, error=GenerationError("Ran out of patience. Try again."))
    window = build_window(qtbot, engine)
    set_text(window, "Text")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "error", timeout=5000)
    assert "Ran out of patience" in window.statusBar().currentMessage()
    assert ghost_text(window) == "" and not window.actionAcceptSuggestion.isEnabled()
    assert window.actionDismissSuggestion.isEnabled()
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert ghost_state(window) == "idle" and window.editor.toPlainText() == "Text"


def test_load_failure_is_shown_in_the_status_bar(qtbot):
    engine = FakeEngine(load_error=ModelIncompleteError("shard 2 is missing; download it again."))
    window = build_window(qtbot, engine)
    assert window.model_state == "error"
    assert window.modelLabel.text() == "Model error"
    assert "download it again" in window.modelLabel.toolTip()
    set_text(window, "x")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "error", timeout=5000)
    assert "No model is loaded" in window.statusBar().currentMessage()


def test_repaints_are_throttled_and_the_last_step_lands(qtbot):
    final = " settled text"
    window = build_window(qtbot, FakeEngine(texts=[final], steps=300, step_delay=0.001))
    set_text(window, "Go")
    steps: list[int] = []
    window.host.stepped.connect(lambda e: steps.append(e.step))
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    window.assistant.ghost.flush()
    qtbot.wait(50)
    assert ghost_text(window) == final
    assert window.assistant.ghost.paints < 300, "no more than about one repaint per frame"
    assert steps[-1] == 300


def test_word_count_and_zoom(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "one two three four")
    qtbot.waitUntil(lambda: window.wordsLabel.text() == "4 words", timeout=3000)
    size = window.editor.font().pointSizeF()
    window.actionZoomIn.trigger()
    assert window.editor.font().pointSizeF() > size
    window.actionZoomReset.trigger()
    assert window.editor.font().pointSizeF() == size


def test_find_and_replace_all_is_one_undo_step(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "cat and cat and Cat", cursor=0)
    assert window.editor.find_text("cat")
    assert window.editor.textCursor().selectedText() == "cat"
    assert window.editor.replace_all("cat", "dog") == 3
    assert window.editor.toPlainText() == "dog and dog and dog"
    window.editor.undo()
    assert window.editor.toPlainText() == "cat and cat and Cat"


def test_command_palette_lists_the_rewrite_presets(qtbot):
    window = build_window(qtbot, FakeEngine(texts=["Short."], steps=2))
    commands = window.palette_commands()
    assert "Assist ▸ Rewrite as ▸ Shorter" in commands
    assert "Assist ▸ Accept suggestion" not in commands, "only what can run now is offered"
    set_text(window, "A long sentence here.", select=(0, 21))
    commands["Assist ▸ Rewrite as ▸ Shorter"].trigger()
    wait_ready(qtbot, window)
    assert window.host.engine.requests[-1].instruction.startswith("Make it shorter")


def test_word_count_of_a_large_document_stays_cheap(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "word " * 300_000)
    qtbot.waitUntil(lambda: window.wordsLabel.text() == "300,000 words", timeout=10_000)


def test_undo_after_typing_then_accepting_only_removes_the_suggestion(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" and more."], steps=2))
    set_text(window, "")
    qtbot.keyClicks(window.editor, "I typed this")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "I typed this and more."
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == "I typed this"
    qtbot.keyClick(
        window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    assert window.editor.toPlainText() == "I typed this and more."
    assert ghost_state(window) == "idle"


def test_zooming_keeps_the_suggestion(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" kept."], steps=2))
    set_text(window, "Zoom")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    window.actionZoomIn.trigger()
    assert ghost_state(window) == "ready" and ghost_text(window) == " kept."


def test_loading_a_model_stops_the_running_suggestion_cleanly(qtbot):
    window = build_window(qtbot, FakeEngine(steps=50, step_delay=0.05))
    set_text(window, "Text")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=5000)
    window.load_model("fake")
    qtbot.waitUntil(lambda: ghost_state(window) == "idle", timeout=5000)
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=5000)
    assert window.editor.toPlainText() == "Text"


def test_tab_while_denoising_accepts_exactly_what_is_visible_and_stops(qtbot):
    engine = FakeEngine(texts=[" final words here"], steps=10, hold_at_step=3)
    window = build_window(qtbot, engine)
    set_text(window, "Now")
    with qtbot.waitSignal(window.host.finished, timeout=5000) as finished:
        window.actionDraft.trigger()
        qtbot.waitUntil(lambda: "step 3/10" in window.assistant.ghost.content.badge, timeout=5000)
        visible = ghost_text(window)
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert finished.args[0].cancelled
    assert window.editor.toPlainText() == "Now" + visible
    assert ghost_state(window) == "idle"
