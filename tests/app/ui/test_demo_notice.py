"""While the built-in demo model is loaded the window says so, and is one click from a real model or a server.

Issue 25: nothing in the window said the demo is a demo, so a writer concluded the product is broken. Fast
tests drive the real MainWindow around the scripted engine (the demo's folder as its model); the slow one
loads the shipped demo model through `app.create_window`, as a new user gets it.
"""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog

from app.ui.demo_notice import demo_wording, is_demo_model
from engine.fake import FakeEngine
from engine.resources import demo_model_dir
from tests.helpers.gui import build_window, demo_window

pytestmark = pytest.mark.usefixtures("user_dirs")


def _banner_shown(window) -> bool:
    return window.demoBanner.isVisible() and window.demoBanner.label.isVisible()


def test_the_status_bar_says_the_demo_is_a_demo_and_what_it_can_show(qtbot) -> None:
    window = build_window(qtbot, FakeEngine(), model_dir=str(demo_model_dir()))
    assert _banner_shown(window)
    words = demo_wording()
    assert "demo" in window.demoBanner.label.text().lower()
    assert "not a writing model" in window.demoBanner.label.text()
    tip = window.demoBanner.label.toolTip()
    for shown in ("settles", "strength", "pin", "diff"):
        assert shown in tip
    # the label ends at a word when the status bar is short of room; its full text stays whole
    assert window.modelLabel.full_text() == f"Ready: {words.name}"
    assert window.modelLabel.text().startswith("Ready: Built-in")
    assert "not a writing model" in window.statusBar().currentMessage()


def test_another_model_has_no_demo_banner_and_loading_one_takes_it_away(qtbot, tmp_path) -> None:
    window = build_window(qtbot, FakeEngine(), model_dir=str(demo_model_dir()))
    assert _banner_shown(window)
    other = tmp_path / "real-model"
    other.mkdir()
    window.load_model(other)
    qtbot.waitUntil(
        lambda: window.model_state == "ready" and not window.demoBanner.isVisible(), timeout=10_000
    )
    assert "Built-in demo" not in window.modelLabel.text()
    assert not is_demo_model(other) and is_demo_model(demo_model_dir())


def test_one_click_opens_a_way_to_a_real_model(qtbot, monkeypatch) -> None:
    window = build_window(qtbot, FakeEngine(), model_dir=str(demo_model_dir()))
    opened: list[str] = []
    manager = QAction("&Model manager…", window)
    manager.setObjectName("actionModelManager")
    manager.triggered.connect(lambda *_: opened.append("manager"))
    window.addAction(manager)
    qtbot.mouseClick(window.demoBanner.loadButton, Qt.MouseButton.LeftButton)
    assert opened == ["manager"]


def test_one_click_connects_to_a_server_when_the_app_has_a_server_action(qtbot) -> None:
    window = build_window(qtbot, FakeEngine(), model_dir="fake")
    assert not window.demoBanner.isVisible()
    used: list[str] = []
    server = window.findChild(QAction, "actionUseServer")
    if server is None:  # a window wired without the server mode
        server = QAction("Use a &server…", window)
        server.setObjectName("actionUseServer")
        window.addAction(server)
    else:
        server.triggered.disconnect()  # the real slot opens the (modal) server dialog
    server.triggered.connect(lambda *_: used.append("server"))
    window.load_model(demo_model_dir())
    qtbot.waitUntil(lambda: _banner_shown(window), timeout=10_000)
    assert window.demoBanner.serverButton.isVisible()
    qtbot.mouseClick(window.demoBanner.serverButton, Qt.MouseButton.LeftButton)
    assert used == ["server"]


@pytest.mark.slow
def test_the_shipped_demo_through_create_window_is_labelled_and_opens_the_model_manager(
    qtbot, monkeypatch, tmp_path
) -> None:
    for window in demo_window(qtbot, monkeypatch, tmp_path, ""):
        assert _banner_shown(window)
        assert window.modelLabel.text() == f"Ready: {demo_wording().name}"
        qtbot.mouseClick(window.demoBanner.loadButton, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda w=window: _dialog_open(w), timeout=10_000)
        window.model_dialog.reject()


def _dialog_open(window) -> bool:
    dialog = getattr(window, "model_dialog", None)
    return isinstance(dialog, QDialog) and dialog.isVisible()
