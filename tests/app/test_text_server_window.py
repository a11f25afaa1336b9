"""The window on the text tier (any OpenAI-compatible model, here the scripted stub): the status bar names the
server and model, strength, pins and re-roll are off with the reason in their tooltips, drafts, rewrites (by
preset) and infill are accepted with Tab, and a fault leaves the document exactly as it was."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.config.settings import Settings
from engine.fake import FakeEngine
from engine.remote import text_features
from engine.remote.client import Timeouts
from tests.helpers.gui import build_window, ghost_text, set_text
from tests.helpers.openai_stub import Behaviour, OpenAIStub

BEFORE = "The boats came in at dawn,"


@pytest.fixture
def stub():
    text_features.forget()
    with OpenAIStub(Behaviour(answer="and the gulls circled the masts.")) as server:
        yield server
    text_features.forget()


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.delenv("LETTERPRESS_API_KEY", raising=False)
    w = build_window(qtbot, FakeEngine(steps=2), settings=Settings(tmp_path / "config"))
    w.server_mode.timeouts = Timeouts(connect=2.0, read=5.0)
    yield w
    from app.platform import privacy

    privacy.forbid_servers()
    w.host.shutdown()


def _connect(qtbot, window, stub):
    window.server_mode.connect_server(stub.url, "stub-model", None)
    qtbot.waitUntil(lambda: window.server_mode.whereLabel.text().endswith("· stub-model"), timeout=20_000)


def _settled(qtbot, window):
    qtbot.waitUntil(
        lambda: window.assistant.suggestion is not None and not window.assistant.suggestion.running,
        timeout=20_000,
    )


def test_on_a_text_model_the_status_bar_names_it_and_diffusion_controls_say_why_they_are_off(
    qtbot, window, stub
):
    _connect(qtbot, window, stub)
    host = stub.url.removeprefix("http://").removesuffix("/v1")
    assert window.server_mode.whereLabel.text() == f"Server: {host} · stub-model"
    assert not window.editing.dial.isEnabled()
    assert "need DiffusionGemma" in window.editing.dial.toolTip()
    assert "need DiffusionGemma" in window.editing.actionRerollUncertain.toolTip()


def test_a_draft_streams_into_the_ghost_and_tab_accepts_it(qtbot, window, stub):
    _connect(qtbot, window, stub)
    set_text(window, BEFORE)
    window.actionDraft.trigger()
    _settled(qtbot, window)
    assert ghost_text(window).strip() == "and the gulls circled the masts."
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == BEFORE + " and the gulls circled the masts."


@pytest.mark.parametrize("preset", ["shorter", "grammar", "formal"])
def test_a_preset_rewrite_replaces_the_selection_in_one_undo_step(qtbot, window, stub, preset):
    stub.behaviour.answer = "The fleet returned at first light."
    _connect(qtbot, window, stub)
    doc = "The boats all came back in to the harbour at dawn today. Then we slept."
    set_text(window, doc, select=(0, 56))
    window.findChild(type(window.actionRewrite), f"actionPreset_{preset}").trigger()
    _settled(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText() == "The fleet returned at first light. Then we slept."
    window.editor.undo()
    assert window.editor.toPlainText() == doc


def test_infill_fills_the_gap_and_keeps_the_text_after_it(qtbot, window, stub):
    stub.behaviour.answer = "over the lazy"
    _connect(qtbot, window, stub)
    set_text(window, "The fox jumped  dog.", cursor=15)
    window.actionInfill.trigger()
    _settled(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert window.editor.toPlainText().endswith(" dog.")
    assert "over the lazy" in window.editor.toPlainText()


def test_a_stream_that_stops_leaves_the_document_unchanged_with_a_sentence(qtbot, window, stub):
    _connect(qtbot, window, stub)
    stub.behaviour.stop_after = 2
    set_text(window, BEFORE)
    window.actionDraft.trigger()
    said = lambda: f"{window.statusBar().currentMessage()} {window.modelNotice.text()}"  # noqa: E731
    qtbot.waitUntil(lambda: "stopped answering" in said(), timeout=20_000)
    assert window.editor.toPlainText() == BEFORE
    assert window.assistant.suggestion is None or not ghost_text(window).strip()
