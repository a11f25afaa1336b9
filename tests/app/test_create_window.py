"""`app.create_window(argv)` builds the same window as `python -m app`: engine host started, model chosen."""

from __future__ import annotations

import pytest

import app
from app import __main__ as entry
from tests.helpers.gui import ghost_state

pytestmark = pytest.mark.usefixtures("user_dirs")


def test_fake_engine_window_loads_and_drafts(qtbot):
    window = app.create_window(["--fake-engine", "steps=3,delay=0.01"])
    qtbot.addWidget(window)
    assert window.host.alive
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    assert window.menuFile.objectName() == "menuFile" and window.editor.objectName() == "editor"
    window.editor.setPlainText("Hi")
    cursor = window.editor.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    window.editor.setTextCursor(cursor)  # a draft continues the text before the cursor
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    window.editor.document().setModified(False)
    window.close()
    assert not window.host.alive


def test_without_a_model_the_window_says_so(qtbot, monkeypatch, tmp_path):
    monkeypatch.setattr(entry, "DEMO_MODEL", tmp_path / "no-demo-here")
    window = app.create_window([])
    qtbot.addWidget(window)
    assert window.model_state == "not loaded"
    assert window.modelLabel.text() == "No model"
    assert "Load model folder" in window.statusBar().currentMessage()
    window.editor.document().setModified(False)
    window.close()


def test_missing_model_folder_is_a_clear_sentence_and_the_demo_runs(qtbot, tmp_path):
    """Issue 27: a folder that is not there leaves a writer with the built-in demo and a sentence naming the
    folder (it used to be "Model error" and no assistant)."""
    missing = tmp_path / "nowhere"
    window = app.create_window(["--fake-engine", "--model", str(missing)])
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    assert window.modelLabel.text() == "Ready: Built-in demo"
    assert "nowhere was not found" in window.modelNotice.text()
    assert str(missing) in window.modelNotice.label.toolTip()  # the whole path, however long
    window.editor.document().setModified(False)
    window.close()


def test_the_configured_model_folder_is_used(qtbot, tmp_path):
    from app.config.settings import Settings

    folder = tmp_path / "configured"
    folder.mkdir()
    Settings().set("model.folder", str(folder))
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    assert window.model_dir == str(folder)
    window.editor.document().setModified(False)
    window.close()


def test_arguments():
    args = entry.parse_args(["--fake-engine", "notes.md", "--device", "cpu"])
    assert args.fake_engine == "" and args.files == ["notes.md"] and args.device == "cpu"
    args = entry.parse_args(["--fake-engine", "steps=3,fail_at=2"])
    engine = entry.fake_engine_factory(args.fake_engine)()
    assert engine.steps == 3 and engine.fail_at_step == 2
