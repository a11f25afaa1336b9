"""Issue 16b's trial, end to end with the shipped demo model through `app.create_window`: a re-roll whose last
word is kept ends at that word. In the real window "…muss die … sein." with every confident word kept came
back as "…sein.ies. eyes up his acclandiah yearist with?": the end of the text was noised, so the model wrote
on past the kept last word and glued new words onto it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.helpers.gui import demo_window, ghost_text, set_text, wait_suggestion_ready

pytestmark = pytest.mark.slow

SETTINGS_TOML = """
[denoise]
steps = 12
alternatives = 3
"""


@pytest.fixture
def window(qtbot, monkeypatch, tmp_path):
    yield from demo_window(qtbot, monkeypatch, tmp_path, SETTINGS_TOML)


wait_ready = wait_suggestion_ready


def test_a_reroll_with_every_word_pinned_gives_back_exactly_the_suggestion(qtbot, window):
    text = "He counted the boats in the harbour every night."
    doc = text + " It was morning."
    set_text(window, doc, select=(0, len(text)))
    window.findChild(type(window.actionRewrite), "actionPreset_grammar").trigger()
    wait_ready(qtbot, window)
    shown = ghost_text(window)
    n = len([s for s in window.assistant.suggestion.spans if s.text.strip()])
    for _ in range(n):
        qtbot.keyClick(window.editor, Qt.Key.Key_P, Qt.KeyboardModifier.AltModifier)  # pin the next word
    assert len(window.editing.pinned_words()) == n
    for _ in range(2):
        qtbot.keyClick(
            window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier
        )
        wait_ready(qtbot, window)
        every = ["".join(s.text for s in alt).strip() for alt in window.assistant.suggestion.alternatives]
        assert every and all(t == shown.strip() for t in every), (shown, every)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == shown.strip() + " It was morning."
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == doc


def test_a_reroll_that_keeps_the_last_word_ends_with_it(qtbot, window):
    text = "The people went out into the field and gathered the grain before the night came."
    set_text(window, text, select=(0, len(text)))
    window.findChild(type(window.actionRewrite), "actionPreset_grammar").trigger()
    wait_ready(qtbot, window)
    spans = window.assistant.suggestion.spans
    last = [i for i, s in enumerate(spans) if s.text.strip()][-1]
    word = spans[last].text.strip()
    assert window.editing.toggle_pin(last)
    for _ in range(2):
        qtbot.keyClick(
            window.editor, Qt.Key.Key_R, Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier
        )
        wait_ready(qtbot, window)
        every = ["".join(s.text for s in alt).rstrip() for alt in window.assistant.suggestion.alternatives]
        assert every and all(
            t.endswith(word) and (len(t) == len(word) or not t[-len(word) - 1].isalnum()) for t in every
        ), (word, every)
