"""The thread boundary (ARCHITECTURE.md, "Which code runs on which thread"): during a request the UI thread
runs none of the engine's code but its plain vocabulary (`engine.api`: requests, events, spans). A step
arrives as plain data made on the engine thread, so painting it reads no tensor and writes no engine cache.

Measured on the real window, the real engine thread and the real `Session` on a tiny checkpoint, with a
profile hook on the UI thread that records every engine function it enters.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from PySide6.QtCore import Qt

from tests.helpers.gui import ghost_state, model_window, set_text

pytestmark = pytest.mark.slow

ENGINE = Path(__file__).resolve().parents[2] / "engine"
VOCABULARY = ENGINE / "api.py"  # plain frozen data and typed errors: the one engine module the UI may run
SETTINGS_TOML = "[denoise]\nsteps = 12\nalternatives = 3\n\n[draft]\nlength = 32\n"


@pytest.fixture
def window(qtbot, tmp_path_factory, monkeypatch, tmp_path):
    from tests.helpers.checkpoints import tiny_checkpoint

    model = tiny_checkpoint(tmp_path_factory, name="model")
    yield from model_window(qtbot, monkeypatch, tmp_path, model, SETTINGS_TOML)


def _engine_calls_on_this_thread() -> tuple[list[str], Any]:
    entered: list[str] = []

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event != "call":
            return
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ENGINE) and path != VOCABULARY:
            entered.append(f"{path.relative_to(ENGINE.parent)}:{frame.f_code.co_name}")

    return entered, profile


@pytest.mark.parametrize("task", ["draft", "rewrite", "infill"])
def test_no_engine_code_runs_on_the_ui_thread_during_a_request(qtbot, window, task):
    set_text(window, "The harbour was quiet in the morning. The boats came in late.")
    if task != "draft":
        cursor = window.editor.textCursor()
        cursor.setPosition(4)
        cursor.setPosition(11, cursor.MoveMode.KeepAnchor)
        window.editor.setTextCursor(cursor)
    entered, profile = _engine_calls_on_this_thread()
    sys.setprofile(profile)  # this thread only: the engine thread is not watched
    try:
        {"draft": window.actionDraft, "rewrite": window.actionRewrite, "infill": window.actionInfill}[
            task
        ].trigger()
        qtbot.waitUntil(lambda: ghost_state(window) in ("ready", "error"), timeout=120_000)
        shown = window.assistant.ghost.content.spans
        qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    finally:
        sys.setprofile(None)
    assert ghost_state(window) != "error"
    assert shown, "a suggestion was shown"
    assert not entered, f"engine code ran on the UI thread: {sorted(set(entered))}"
