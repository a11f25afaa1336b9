"""Issue 16b's trial, end to end with the shipped demo model through `app.create_window`: a re-roll whose last
word is kept ends at that word. In the real window "…muss die … sein." with every confident word kept came
back as "…sein.ies. eyes up his acclandiah yearist with?": the end of the text was noised, so the model wrote
on past the kept last word and glued new words onto it. Issue 34 case 7's: every re-roll keeps each pinned
word in its place and its start as shown."""

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


@pytest.fixture
def seeded(qtbot, monkeypatch, tmp_path):
    """The window with a counting sampling seed (each request its own, every run the same), and the demo
    tokenizer's display decoder, to count the tokens before each pinned word."""
    import itertools

    from transformers import AutoTokenizer

    import engine.plan
    from engine.__main__ import default_model_dir
    from engine.display import TokenText

    seeds = itertools.count(100)
    monkeypatch.setattr(
        engine.plan, "secrets", type("Seeds", (), {"randbelow": staticmethod(lambda n: next(seeds))})
    )
    decode = TokenText(AutoTokenizer.from_pretrained(default_model_dir())).text
    for win in demo_window(
        qtbot, monkeypatch, tmp_path, SETTINGS_TOML.replace("alternatives = 3", "alternatives = 2")
    ):
        yield win, decode


def _lead(text: str) -> str:
    ws = text[: len(text) - len(text.lstrip())]
    return "line" if "\n" in ws else "space" if ws else "glued"


def _places(spans, pinned, decode):
    """Each pinned run: its word, the tokens before it (from the spans' own token ids), and whether a letter
    or digit touches the word before / after."""
    from app.assist.pins import pin_ranges

    text, ids = "".join(s.text for s in spans), [i for s in spans for i in getattr(s, "ids", ())]
    out = []
    for a, b in pin_ranges(spans, pinned):
        word = text[a:b].strip()
        start = text.index(word, a)
        end = start + len(word)
        before = next((k for k in range(len(ids) + 1) if len(decode(ids[:k])) >= a), None)
        touching = (
            start > 0 and text[start - 1].isalnum() and word[0].isalnum(),
            text[end : end + 1].isalnum(),
        )
        out.append((word, before, touching))
    return out


def test_every_reroll_keeps_each_pinned_word_in_its_place_and_the_start_as_shown(qtbot, seeded):
    """Issue 34 case 7: "after re-roll around pins the pinned word moved and a leading space appeared". A
    draft, a rewrite and an infill; pins at the start, in the middle, at the end and every third word;
    Alt+Shift+R twice, then Alt+R; every alternative keeps each pinned word with as many tokens before it as
    it had, nothing glued on, the start as the shown suggestion's (a rewrite's "The" came back " The", a
    draft's " the" came back "es,"); Tab then joins without a doubled or a lost space."""
    window, decode = seeded
    text = "The people went out into the field and gathered the grain before the night came."
    gap = "The people went out into the field before the night came."
    grammar = window.findChild(type(window.actionRewrite), "actionPreset_grammar")
    cases = [
        ("rewrite", text + " It was morning.", {"select": (0, len(text))}, grammar.trigger),
        ("draft", "The people went out into the field and", {}, window.actionDraft.trigger),
        ("infill", gap, {"cursor": gap.index(" before")}, window.actionInfill.trigger),
    ]
    shift_r = Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ShiftModifier
    for kind, doc, where, start in cases:
        set_text(window, doc, **where)
        start()
        wait_ready(qtbot, window)
        for choose in (lambda o: o[:1], lambda o: [o[len(o) // 2]], lambda o: o[-1:], lambda o: o[1::3]):
            window.assistant.show_alternative(0)
            order = [i for i, s in enumerate(window.assistant.suggestion.spans) if s.text.strip()]
            pick = choose(order)
            window.editing.clear_pins()
            for i in pick:
                assert window.editing.toggle_pin(i)
            for key in (shift_r, shift_r, Qt.KeyboardModifier.AltModifier):
                sug = window.assistant.suggestion
                if key == Qt.KeyboardModifier.AltModifier:
                    from app.assist.pins import confident

                    pins = confident(sug.spans, 0.8) | window.editing.pins.sync(
                        (sug.request_id, sug.index), sug.spans
                    )
                else:
                    pins = window.editing.pins.sync((sug.request_id, sug.index), sug.spans)
                if not {i for i, s in enumerate(sug.spans) if s.text.strip()} - pins:
                    break  # every word is kept: nothing to re-roll (Alt+R says so and changes nothing)
                shown = "".join(s.text for s in sug.spans)
                want = _places(sug.spans, pins, decode)
                qtbot.keyClick(window.editor, Qt.Key.Key_R, key)
                wait_ready(qtbot, window)
                for alt in window.assistant.suggestion.alternatives:
                    again = "".join(s.text for s in alt)
                    assert _lead(again) == _lead(shown), (kind, pick, shown, again)
                    got = [i for i, s in enumerate(alt) if s.pinned and s.text.strip()]
                    assert _places(alt, got, decode) == want, (kind, pick, shown, again, alt)
        # Tab accepts the last re-roll as shown: one space where the shown suggestion had one, none doubled.
        shown = window.assistant.suggestion.text
        s = window.assistant.suggestion.full()[0]
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
        done = window.editor.toPlainText()
        assert "  " not in done and not done.startswith(" "), (kind, shown, done)
        if kind != "rewrite":
            assert done[s : s + 1].isspace() == (_lead(shown) == "space"), (kind, shown, done)
