"""Issue 27's window cases through the real window (pytest-qt, offscreen, the scripted engine): the strength
dial changes only the request in play (saving a preset's default is its own command, with a reset), status
messages last only as long as what they say is true, nothing is cut mid-word, the toolbar and Settings stay
still, the find fields keep a usable width, Save As starts in a sensible folder, and the Alternatives panel
is open again after a restart when it was open before."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from app.config.settings import Settings
from engine.api import RewriteRequest
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text, wait_ready

pytestmark = pytest.mark.usefixtures("user_dirs")

DOC = "The committee met on Tuesday and agreed that the budget should be cut."


def sent(qtbot, engine, count):
    qtbot.waitUntil(lambda: len(engine.requests) >= count)
    return engine.requests[count - 1]


def rewrite_with(qtbot, window, preset):
    set_text(window, DOC, select=(0, len(DOC)))
    window.findChild(type(window.actionRewrite), f"actionPreset_{preset}").trigger()
    wait_ready(qtbot, window)


def close(qtbot, window):
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: ghost_state(window) == "idle")


# -- 1. the strength dial ------------------------------------------------------------------------------------


def test_a_drag_of_the_dial_changes_this_rewrite_only_not_the_presets_saved_default(qtbot, settings):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine, settings=settings)
    dial = window.editing.dial
    rewrite_with(qtbot, window, "grammar")
    assert sent(qtbot, engine, 1).strength == pytest.approx(0.2)
    dial.slider.setValue(6)  # the writer drags the dial (debounced, as a drag is)
    request = sent(qtbot, engine, 2)
    assert isinstance(request, RewriteRequest) and request.strength == pytest.approx(0.6), "this rewrite"
    wait_ready(qtbot, window)
    assert settings["rewrite.strengths"]["grammar"] == pytest.approx(0.2), "the saved default is untouched"
    assert Settings(settings.folder)["rewrite.strengths"]["grammar"] == pytest.approx(0.2)
    assert "not saved" in dial.caption.full_text()
    close(qtbot, window)
    rewrite_with(qtbot, window, "freely")
    rewrite_with(qtbot, window, "grammar")
    assert sent(qtbot, engine, 4).strength == pytest.approx(0.2), (
        "a new grammar rewrite starts at its default"
    )
    assert dial.value == pytest.approx(0.2)


def test_save_as_default_for_a_preset_and_reset_it_to_the_built_in_default(qtbot, settings):
    engine = FakeEngine(steps=4)
    window = build_window(qtbot, engine, settings=settings)
    editing = window.editing
    rewrite_with(qtbot, window, "grammar")
    save, reset = editing.actionSaveStrengthDefault, editing.actionResetStrengthDefault
    assert save.objectName() == "actionStrengthDefault_save" and not save.isEnabled()
    editing.set_strength(0.5)
    assert save.isEnabled() and save.text() == "Save 0.5 as default for “Fix grammar”"
    assert save in window.editing.menuStrength.actions() and save in editing.dial.actions()
    assert "Assist ▸ Rewrite strength ▸ Save 0.5 as default for “Fix grammar”" in window.palette_commands()
    save.trigger()
    assert settings["rewrite.strengths"]["grammar"] == pytest.approx(0.5)
    assert Settings(settings.folder)["rewrite.strengths"]["grammar"] == pytest.approx(0.5), "on disk"
    assert settings["rewrite.strengths"]["formal"] == pytest.approx(0.5) and not save.isEnabled()
    wait_ready(qtbot, window)
    close(qtbot, window)
    rewrite_with(qtbot, window, "freely")
    rewrite_with(qtbot, window, "grammar")
    assert engine.requests[-1].strength == pytest.approx(0.5), "the saved default is used"
    assert reset.isEnabled() and reset.text() == "Reset “Fix grammar” to its default (0.2)"
    reset.trigger()
    assert settings["rewrite.strengths"]["grammar"] == pytest.approx(0.2)
    assert editing.dial.value == pytest.approx(0.2) and not reset.isEnabled()
    assert settings["rewrite.strengths"]["freely"] == pytest.approx(1.0), "only that preset is reset"


# -- 5. the second toolbar row stays still ------------------------------------------------------------------


def toolbar_geometry(window):
    tools = window.editing.toolbarEditing
    return [
        (w.objectName() or type(w).__name__, w.geometry().getRect())
        for w in tools.findChildren(QWidget)
        if w.isVisible() and w.parentWidget() is tools
    ]


def test_the_editing_toolbar_does_not_move_when_the_dial_or_its_preset_changes(qtbot, settings):
    settings.set("rewrite.presets", {**settings["rewrite.presets"], "legal": "Make it read like a contract."})
    engine = FakeEngine(steps=2)
    window = build_window(qtbot, engine, settings=settings)
    dial = window.editing.dial
    before = toolbar_geometry(window)
    assert len(before) >= 4, before
    for value in (0.1, 0.5, 0.9, 1.0):
        dial.set_value(value)
        qtbot.wait(1)
        assert toolbar_geometry(window) == before, value
    for preset in ("grammar", "formal", "legal", "freely"):
        rewrite_with(qtbot, window, preset)
        dial.set_value(0.3)
        qtbot.wait(1)
        assert toolbar_geometry(window) == before, preset
        close(qtbot, window)
    caption = dial.caption
    for text in ("Rewrite freely strength 0.3 (not saved)", "Legal strength 1.0"):
        assert caption.fontMetrics().horizontalAdvance(text) <= caption.contentsRect().width(), text
