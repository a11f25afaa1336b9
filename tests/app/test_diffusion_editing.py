"""Issue 16 through the real window and the scripted engine: rewrite strength, re-roll the uncertain words,
pin words, the word-level diff view and the alternatives panel."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt

from engine.api import DenoiseSettings, DraftRequest, RewriteRequest, WarmStart
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, ghost_text, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")

DOC = "The committee met on Tuesday and agreed that the budget should be cut."


def draft(qtbot, window, text="Evening fell."):
    set_text(window, text)
    qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_ready(qtbot, window)


def sent(qtbot, engine, count):
    """The engine's `count`-th request (the engine thread records it when it starts running it)."""
    qtbot.waitUntil(lambda: len(engine.requests) >= count)
    return engine.requests[count - 1]


def in_order(words: list[str], text: str) -> bool:
    pos = 0
    for w in words:
        found = text.find(w, pos)
        if found < 0:
            return False
        pos = found + len(w)
    return True


# -- the fake engine honours warm starts ---------------------------------------------------------------------


def test_fake_engine_keeps_pins_and_runs_only_the_matching_steps():
    engine = FakeEngine(steps=10)
    engine.load("fake")
    text = "one two three four five six seven eight"
    events = []
    result = engine.run(
        DraftRequest(before="x", canvas=WarmStart(text, pins=((4, 7), (19, 23)))), events.append
    )
    assert in_order(["two", "five"], result.text)
    assert [s.text for s in events[0].candidates[0].spans if s.pinned] == ["two", "five"]
    light = []
    engine.run(RewriteRequest(selection=text, instruction="x", strength=0.2), light.append)
    assert [e.step for e in light] == [9, 10]


# -- rewrite strength ----------------------------------------------------------------------------------------


def test_presets_use_their_default_strength_and_the_dial_reruns_the_rewrite(qtbot, settings):
    engine = FakeEngine(steps=6)
    window = build_window(qtbot, engine, settings=settings)
    set_text(window, DOC, select=(0, len(DOC)))
    window.findChild(type(window.actionRewrite), "actionPreset_grammar").trigger()
    wait_ready(qtbot, window)
    assert sent(qtbot, engine, 1).strength == pytest.approx(0.2)
    dial = window.editing.dial
    assert dial.value == pytest.approx(0.2) and dial.key == "grammar"
    assert window.findChild(type(dial.slider), "rewriteStrengthDial") is dial.slider

    dial.set_value(0.5)  # the writer turns the dial while the grammar rewrite is on screen
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    assert isinstance(engine.requests[-1], RewriteRequest) and engine.requests[-1].strength == pytest.approx(
        0.5
    )
    wait_ready(qtbot, window)
    assert settings["rewrite.strengths"]["grammar"] == pytest.approx(0.2), "a drag saves nothing"

    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    set_text(window, DOC, select=(0, len(DOC)))
    window.findChild(type(window.actionRewrite), "actionPreset_freely").trigger()
    assert sent(qtbot, engine, 3).strength == pytest.approx(1.0) and dial.key == "freely"
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    set_text(window, DOC, select=(0, len(DOC)))
    window.findChild(type(window.actionRewrite), "actionPreset_grammar").trigger()
    assert sent(qtbot, engine, 4).strength == pytest.approx(0.2), "back to the preset's saved default"
    assert dial.value == pytest.approx(0.2)


def test_strength_levels_are_in_the_menus_the_palette_and_the_right_click_menu(qtbot):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine)
    commands = window.palette_commands()
    for name in ("Assist ▸ Rewrite strength ▸ Light (0.2)", "Assist ▸ Rewrite strength ▸ Full (1.0)"):
        assert name in commands, sorted(commands)
    set_text(window, DOC, select=(0, len(DOC)))
    commands["Assist ▸ Rewrite strength ▸ Light (0.2)"].trigger()  # applies to Ctrl+R's rewrite
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    assert sent(qtbot, engine, 1).strength == pytest.approx(0.2)
    wait_ready(qtbot, window)
    from PySide6.QtWidgets import QMenu

    menu = QMenu()
    for hook in window.context_menu_hooks:
        hook(menu)
    labels = [a.text() for a in menu.actions()]
    assert "Rewrite &strength" in labels and "Re-roll &uncertain words" in labels


# -- re-roll the uncertain words -----------------------------------------------------------------------------


def test_alt_r_rerolls_uncertain_words_live_and_confident_words_come_back_exactly(qtbot, settings):
    settings.set("rewrite.reroll_threshold", 0.9)
    engine = FakeEngine(steps=8, step_delay=0.01)
    window = build_window(qtbot, engine, settings=settings)
    draft(qtbot, window)
    spans = window.assistant.suggestion.spans
    confident = [s.text.strip() for s in spans if s.confidence >= 0.9 and s.text.strip()]
    uncertain = [s.text.strip() for s in spans if s.confidence < 0.9 and s.text.strip()]
    assert confident and uncertain
    assert window.findChild(type(window.actionRewrite), "actionRerollUncertain").isEnabled()
    engine.hold_at_step = 3  # look at the re-roll mid-denoise
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.AltModifier)
    request = sent(qtbot, engine, 2)
    assert isinstance(request, DraftRequest) and request.canvas is not None
    assert [w for s, e in request.canvas.pins for w in request.canvas.text[s:e].split()] == confident
    qtbot.waitUntil(lambda: window.assistant.suggestion.step == 3)
    assert ghost_state(window) == "denoising"
    assert window.editing.pinned_words() == confident, "pinned words stand still while the rest denoises"
    pinned_drawn = [s.text.strip() for s in window.assistant.ghost.content.spans if s.pinned]
    assert pinned_drawn == confident
    engine.release.set()
    wait_ready(qtbot, window)
    assert in_order(confident, ghost_text(window))
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert in_order(confident, window.editor.toPlainText())


def test_reroll_is_in_the_palette_and_explains_when_there_is_nothing_to_do(qtbot, settings):
    settings.set("rewrite.reroll_threshold", 0.05)
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine, settings=settings)
    assert not window.editing.actionRerollUncertain.isEnabled()
    draft(qtbot, window)
    assert "Assist ▸ Re-roll uncertain words" in window.palette_commands()
    sent = len(engine.requests)
    assert not window.editing.reroll_uncertain()
    assert "nothing to re-roll" in window.statusBar().currentMessage()
    assert len(engine.requests) == sent


def test_reroll_after_a_partial_accept_asks_for_a_new_suggestion(qtbot):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine)
    draft(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier)  # accept one word
    sent = len(engine.requests)
    assert not window.editing.reroll_uncertain()
    assert len(engine.requests) == sent and "partly accepted" in window.statusBar().currentMessage()


# -- pin words -----------------------------------------------------------------------------------------------


def _click_word(qtbot, window, index):
    window.assistant.ghost.flush()
    qtbot.waitUntil(lambda: bool(window.assistant.ghost.hits))
    rect = next(r for r, i in window.assistant.ghost.hits if i == index)
    qtbot.mouseClick(
        window.editor.viewport(),
        Qt.MouseButton.LeftButton,
        pos=QPoint(int(rect.center().x()), int(rect.center().y())),
    )


def test_click_and_keys_pin_words_which_are_drawn_pinned_and_survive_a_reroll(qtbot):
    engine = FakeEngine(steps=5)
    window = build_window(qtbot, engine)
    draft(qtbot, window)
    spans = window.assistant.suggestion.spans
    words = [i for i, s in enumerate(spans) if s.text.strip()]
    before = window.editor.textCursor().position()
    _click_word(qtbot, window, words[2])
    assert window.editing.pinned_words() == [spans[words[2]].text.strip()]
    assert window.editor.textCursor().position() == before, "a click on the ghost does not move the cursor"
    qtbot.keyClick(window.editor, Qt.Key.Key_P, Qt.KeyboardModifier.AltModifier)  # pin the next word
    kept = [spans[words[2]].text.strip(), spans[words[3]].text.strip()]
    assert window.editing.pinned_words() == kept
    window.assistant.ghost.flush()
    assert [s.text.strip() for s in window.assistant.ghost.content.spans if s.pinned] == kept
    assert window.editor.toPlainText() == "Evening fell.", "pinning never edits the document"

    qtbot.keyClick(
        window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier
    )
    request = sent(qtbot, engine, 2)
    assert [w for s, e in request.canvas.pins for w in request.canvas.text[s:e].split()] == kept
    wait_ready(qtbot, window)
    assert in_order(kept, ghost_text(window))
    assert window.editing.pinned_words() == kept, "pins come back from the engine and stay pinned"
    _click_word(qtbot, window, next(i for i, s in enumerate(window.assistant.suggestion.spans) if s.pinned))
    assert len(window.editing.pinned_words()) == 1


# -- the diff view -------------------------------------------------------------------------------------------


def test_diff_view_strikes_deleted_words_and_highlights_inserted_ones(qtbot, settings):
    settings.set("rewrite.view", "diff")
    engine = FakeEngine(
        steps=4, texts=["The committee met on Monday and agreed that the budget must be cut."]
    )
    window = build_window(qtbot, engine, settings=settings)
    assert window.editing.actionToggleDiffView.isChecked()
    set_text(window, DOC, select=(0, len(DOC)))
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    wait_ready(qtbot, window)
    window.assistant.ghost.flush()
    content = window.assistant.ghost.content
    deleted = [s.text.strip() for s, st in zip(content.spans, content.styles, strict=True) if st == "deleted"]
    inserted = [
        s.text.strip() for s, st in zip(content.spans, content.styles, strict=True) if st == "inserted"
    ]
    assert deleted == ["Tuesday", "should"] and inserted == ["Monday", "must"]
    assert "−2 +2 words" in content.badge
    assert ghost_text(window) == "The committee met on Monday and agreed that the budget must be cut."
    window.editing.actionToggleDiffView.trigger()  # back to "original struck, new below"
    window.assistant.ghost.flush()
    assert not any(window.assistant.ghost.content.styles)
    window.editing.actionToggleDiffView.trigger()
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert (
        window.editor.toPlainText() == "The committee met on Monday and agreed that the budget must be cut."
    )


# -- the alternatives panel ----------------------------------------------------------------------------------


def test_alternatives_panel_lists_best_first_and_a_click_shows_one(qtbot, settings):
    settings.set("denoise.alternatives", 3)
    texts = [" alpha beta gamma delta.", " one two three four five six seven eight nine.", " red green blue."]
    engine = FakeEngine(steps=4, texts=texts)
    window = build_window(qtbot, engine, settings=settings)
    window.editing.actionShowAlternatives.trigger()
    panel = window.findChild(type(window.editing.panel), "alternativesPanel")
    assert panel is not None and panel.isVisible()
    draft(qtbot, window)
    rows = panel.rows()
    assert len(rows) == 3
    scores = window.assistant.suggestion.scores
    assert [scores[i] for i, _ in rows] == sorted(scores, reverse=True)
    target = rows[-1][0]
    item = panel.list.item(2)
    rect = panel.list.visualItemRect(item)
    qtbot.mouseClick(panel.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert window.assistant.alternatives[0] == target
    assert ghost_text(window) == texts[target]


def test_strength_one_requests_are_todays_rewrite(qtbot):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine)
    set_text(window, DOC, select=(0, len(DOC)))
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    wait_ready(qtbot, window)
    request = sent(qtbot, engine, 1)
    assert request.strength == 1.0 and request.warm_start() is None
    assert request.settings == DenoiseSettings(**{**request.settings.__dict__})


def test_an_infill_can_be_rerolled_around_its_confident_words(qtbot, settings):
    settings.set("rewrite.reroll_threshold", 0.9)
    engine = FakeEngine(steps=6, texts=["Then, quite unexpectedly, the wind turned back toward the sea."])
    window = build_window(qtbot, engine, settings=settings)
    doc = "The first paragraph ends here.\n\n\nThe last paragraph starts here."
    set_text(window, doc, cursor=doc.index("\n\n\n") + 2)
    qtbot.keyClick(
        window.editor, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    )
    wait_ready(qtbot, window)
    spans = window.assistant.suggestion.spans
    confident = [s.text.strip() for s in spans if s.confidence >= 0.9 and s.text.strip()]
    qtbot.keyClick(window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.AltModifier)
    request = sent(qtbot, engine, 2)
    assert request.kind == "infill" and request.canvas is not None and request.middle_tokens is None
    wait_ready(qtbot, window)
    assert in_order(confident, ghost_text(window))
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText().endswith("The last paragraph starts here.")


def test_the_reroll_and_pin_keys_follow_their_settings(qtbot, settings):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine, settings=settings)
    assert window.editing.actionRerollUncertain.shortcut().toString() == "Alt+R"
    settings.set("keys.reroll_uncertain", "Alt+U")
    assert window.editing.actionRerollUncertain.shortcut().toString() == "Alt+U"
    draft(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_U, Qt.KeyboardModifier.AltModifier)
    assert sent(qtbot, engine, 2).canvas is not None
    with pytest.raises(ValueError):
        settings.set("keys.pin_next_word", "Ctrl+Shift+D")  # the diff view's key


def test_the_alternatives_panel_fills_when_opened_over_a_visible_suggestion(qtbot, settings):
    settings.set("denoise.alternatives", 2)
    window = build_window(qtbot, FakeEngine(steps=3, texts=[" one.", " two words."]), settings=settings)
    draft(qtbot, window)
    window.editing.actionShowAlternatives.trigger()
    assert len(window.editing.panel.rows()) == 2
