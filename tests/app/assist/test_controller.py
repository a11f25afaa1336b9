"""Regressions found by trying the editor as a writer would (real window under Xvfb, keys typed by xdotool),
re-checked here through the real window with the scripted engine (pytest-qt, offscreen)."""

from __future__ import annotations

import re

import pytest
from PySide6.QtCore import Qt

from engine import fake
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, ghost_text, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")

BEFORE = "It was morning. "
SENTENCE = "He counted the boats that had come back in the night."
AFTER = " The sea was calm."
DOC = BEFORE + SENTENCE + AFTER
CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def rewrite_sentence(qtbot, window):
    s = DOC.index(SENTENCE)
    set_text(window, DOC, select=(s, s + len(SENTENCE)))
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)


def undo(qtbot, window):
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)


@pytest.mark.parametrize("accept", ["tab", "word"])
def test_typing_right_after_an_accept_is_its_own_undo_step(qtbot, accept):
    # Qt merges a typed character into the previous edit block when it continues an insertion, so Ctrl+Z after
    # "accept, type a letter" took back the letter *and* the accepted words.
    window = build_window(qtbot, FakeEngine(texts=[" She commanded the boats home."], steps=2))
    rewrite_sentence(qtbot, window)
    if accept == "tab":
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
        accepted = BEFORE + "She commanded the boats home." + AFTER
    else:
        qtbot.keyClick(window.editor, Qt.Key.Key_Right, CTRL)
        accepted = BEFORE + "She" + AFTER
    assert window.editor.toPlainText() == accepted
    qtbot.keyClicks(window.editor, "XY")
    assert "XY" in window.editor.toPlainText()
    undo(qtbot, window)
    assert window.editor.toPlainText() == accepted, (
        "Ctrl+Z takes back only what was typed (all of it, as usual)"
    )
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC


def test_typing_after_an_accepted_draft_is_its_own_undo_step(qtbot):
    window = build_window(qtbot, FakeEngine(texts=[" and then it rained."], steps=2))
    set_text(window, "It was calm")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "It was calm and then it rained."
    qtbot.keyClicks(window.editor, " Yes")
    undo(qtbot, window)
    assert window.editor.toPlainText() == "It was calm and then it rained."
    undo(qtbot, window)
    assert window.editor.toPlainText() == "It was calm"


def _trailing_words(text: str) -> list[str]:
    """Words that keep their trailing whitespace, as `engine.display` cuts the real model's text."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else [text]


def test_accept_line_that_ends_at_a_wrap_leaves_no_doubled_space(qtbot, monkeypatch):
    # The real engine's word spans keep their trailing space ("young ", "unrighteous "), so Shift+Tab's first
    # visual line ends with the space where it wrapped; that space met the writer's own space after the region
    # ("young  The sea"), and stayed there after Esc.
    monkeypatch.setattr(fake, "_words", _trailing_words)
    long = " " + " ".join(f"word{i}" for i in range(60)) + "."
    window = build_window(qtbot, FakeEngine(texts=[long], steps=2))
    window.resize(520, 500)
    rewrite_sentence(qtbot, window)
    window.assistant.ghost.flush()
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, SHIFT)
    doc = window.editor.toPlainText()
    assert doc.startswith(BEFORE + "word0") and doc.endswith(AFTER)
    assert "  " not in doc, doc
    middle = doc[len(BEFORE) : len(doc) - len(AFTER)]
    assert long.strip().startswith(middle) and len(middle) < len(long) / 2
    assert ghost_text(window).startswith(" word"), "the rest of the ghost keeps its separating space"
    qtbot.keyClick(window.editor, Qt.Key.Key_Backtab, SHIFT)
    doc = window.editor.toPlainText()
    assert "  " not in doc and long.strip().startswith(doc[len(BEFORE) : len(doc) - len(AFTER)])
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert "  " not in window.editor.toPlainText()
    undo(qtbot, window)
    undo(qtbot, window)
    assert window.editor.toPlainText() == DOC


def test_the_badge_and_hints_name_the_keys_the_writer_bound(qtbot, settings):
    # After Settings ▸ Assistant keys moved accept to Ctrl+J, the ghost's badge still said "Tab accept".
    settings.set("keys.accept", "Ctrl+J")
    settings.set("keys.rewrite", "Ctrl+Alt+W")
    window = build_window(qtbot, FakeEngine(texts=[" and then it rained."], steps=2), settings=settings)
    set_text(window, "It was calm")
    window.actionDraft.trigger()
    wait_ready(qtbot, window)
    badge = window.assistant.ghost.content.badge
    assert "Ctrl+J accept" in badge and "Esc dismiss" in badge and "Tab" not in badge
    assert "Ctrl+J" in window.actionAcceptSuggestion.toolTip()
    qtbot.keyClick(window.editor, Qt.Key.Key_J, CTRL)
    assert window.editor.toPlainText() == "It was calm and then it rained."
    window.actionRewrite.trigger()  # nothing selected: the hint names the rewrite key as bound
    assert "(Ctrl+Alt+W)" in window.statusBar().currentMessage()


def test_alt_bracket_after_a_partial_accept_never_types_into_the_document(qtbot, settings):
    # After Ctrl+Right the rest is the only alternative, so Alt+] was disabled and reached the editor as text:
    # "]" landed after the accepted word and the suggestion was cancelled as "edited".
    texts = [" She commanded the boats home.", " Other words here.", " A third way."]
    window = build_window(qtbot, FakeEngine(texts=texts, steps=2), settings=settings)
    rewrite_sentence(qtbot, window)
    assert window.assistant.alternatives[1] > 1
    qtbot.keyClick(window.editor, Qt.Key.Key_Right, CTRL)
    accepted = window.editor.toPlainText()
    assert accepted == BEFORE + "She" + AFTER
    for key in (Qt.Key.Key_BracketRight, Qt.Key.Key_BracketLeft):
        qtbot.keyClick(window.editor, key, Qt.KeyboardModifier.AltModifier)
        assert window.editor.toPlainText() == accepted
        assert ghost_state(window) == "ready" and ghost_text(window) == " commanded the boats home."
    assert "alternative" in window.statusBar().currentMessage()
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == BEFORE + "She commanded the boats home." + AFTER


def test_accept_word_in_japanese_takes_a_word_not_the_whole_unspaced_text(qtbot):
    # Ctrl+Right took everything up to the next space; Japanese and Chinese have none, so "accept next word"
    # accepted the whole suggestion at once. It now stops at a Unicode word boundary (where Ctrl+Right moves
    # the caret in the editor), keeping closing punctuation with its word.
    alternative = "静かな朝だった。船は戻った。"
    window = build_window(qtbot, FakeEngine(texts=[alternative], steps=2))
    doc = "前の文。古い文です。後の文。"
    set_text(window, doc, select=(4, 10))
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    seen = []
    for _ in range(len(alternative)):
        qtbot.keyClick(window.editor, Qt.Key.Key_Right, CTRL)
        text = window.editor.toPlainText()
        assert text.startswith("前の文。") and text.endswith("後の文。")
        middle = text[4 : len(text) - 4]
        assert alternative.startswith(middle)
        seen.append(middle)
        if ghost_state(window) == "idle":
            break
    assert seen[0] == "静" and len(seen) > 5, seen
    assert "だった。" in "".join(s[-3:] for s in seen) or any(s.endswith("た。") for s in seen)
    assert seen[-1] == alternative
    for _ in seen:
        undo(qtbot, window)
    assert window.editor.toPlainText() == doc
