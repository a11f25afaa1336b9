"""A request asked for while a model loads says it waits for the load, and runs on the new model once it is
in."""

from __future__ import annotations

from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text


def test_a_draft_asked_for_during_a_model_switch_says_it_waits_then_runs(qtbot, tmp_path) -> None:
    engine = FakeEngine(texts=[" and then the wind came."], steps=3)
    window = build_window(qtbot, engine)
    engine.load_delay = 0.4  # the next load takes a while: 4 phases of 0.4 s
    folder = tmp_path / "other-model"
    folder.mkdir()
    window.load_model(folder)
    qtbot.waitUntil(lambda: window.model_state == "loading", timeout=5000)

    set_text(window, "The harbour was quiet")
    window.actionDraft.trigger()
    message = window.statusBar().currentMessage()
    assert message.startswith("Drafting") and "waits for the model to finish loading" in message

    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    assert "waits for the model" not in window.statusBar().currentMessage()
    assert engine.requests and engine.info is not None and engine.info.path == str(folder)
