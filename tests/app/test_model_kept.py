"""A failed load or check never takes away a working model: through the real window and engine (tiny model),
and through the model manager, which checks the folder as it is typed and keeps Load disabled until the check
passes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from tests.app.test_faults import finish, real_window, still_usable, tiny_model  # noqa: F401 - fixture
from tests.helpers.broken_folders import KINDS, build_corpus
from tests.helpers.gui import ghost_state, set_text

pytestmark = pytest.mark.usefixtures("user_dirs")
KIND = {k.name: k for k in KINDS}


def _draft_works(qtbot, window, text: str) -> None:
    set_text(window, text)
    window.actionDraft.trigger()
    finish(qtbot, window, 120_000)
    assert ghost_state(window) == "ready", window.statusBar().currentMessage()
    window.actionDismissSuggestion.trigger()
    assert window.editor.toPlainText() == text


@pytest.mark.parametrize("broken", ["empty_folder", "transposed_global_weight", "header_5gib"])
def test_choosing_a_broken_folder_keeps_the_model_in_use(
    qtbot,
    tmp_path,
    tiny_model,  # noqa: F811 - the fixture imported above
    settings,
    monkeypatch,
    broken,
):
    """Model ▸ Load model folder… on a folder that fails (at the check, or only once loading: a transposed
    weight in a global layer) leaves the loaded model in use; the status bar says why and that it is still in
    use."""
    folders = build_corpus(tiny_model, tmp_path / "corpus", tuple(k for k in KINDS if k.name == broken))
    window = real_window(qtbot, tiny_model, settings, monkeypatch)
    assert window.model_state == "ready"
    monkeypatch.setattr(
        QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folders[broken]))
    )
    window.actionLoadModel.trigger()
    qtbot.waitUntil(lambda: window.model_state != "loading", timeout=60_000)
    assert window.model_state == "ready"
    message = window.modelNotice.text()  # the whole sentence, above the page (issue 27)
    assert "Still using" in message and all(w.lower() in message.lower() for w in KIND[broken].words), message
    assert "Still using" in window.statusBar().currentMessage()
    assert window.host.model_info is not None and window.host.model_info.path == str(tiny_model)
    _draft_works(qtbot, window, "The model is still here.")
    still_usable(qtbot, window, "The model is still here.")


def test_model_manager_checks_as_typed_and_enter_checks_instead_of_browsing(
    qtbot,
    tmp_path,
    tiny_model,  # noqa: F811
    monkeypatch,
):
    from app.assist.engine_host import EngineHost
    from app.ui.model_dialog import ModelDialog
    from engine.fake import FakeEngine

    browsed: list[str] = []
    monkeypatch.setattr(
        QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: browsed.append("x") or "")
    )
    host = EngineHost(lambda: FakeEngine(load_steps=2, load_delay=0.01))
    host.start()
    try:
        dlg = ModelDialog(host, None, cache_dirs=[])
        qtbot.addWidget(dlg)
        dlg.show()
        dlg.folder.setFocus()
        qtbot.keyClicks(dlg.folder, str(tmp_path / "nowhere"))
        assert not dlg.load_button.isEnabled()  # while typing: nothing to load yet
        qtbot.waitUntil(lambda: dlg.inspection is not None, timeout=10_000)  # no Enter, no focus change
        assert "does not exist" in dlg.check_label.text() and not dlg.load_button.isEnabled()
        dlg.folder.clear()
        qtbot.keyClicks(dlg.folder, str(tiny_model))
        qtbot.keyClick(dlg.folder, Qt.Key.Key_Return)  # Enter runs the check at once
        qtbot.waitUntil(lambda: dlg.inspection is not None, timeout=10_000)
        assert dlg.inspection.loadable and dlg.load_button.isEnabled(), dlg.check_label.text()
        assert browsed == []  # Enter never opened Browse
        assert dlg.isVisible()  # nor closed the dialog
        qtbot.keyClicks(dlg.folder, "-typo")  # an edit disables Load until the new text is checked
        assert not dlg.load_button.isEnabled()
        qtbot.waitUntil(lambda: dlg.inspection is not None, timeout=10_000)
        assert not dlg.load_button.isEnabled() and "does not exist" in dlg.check_label.text()
    finally:
        host.shutdown()


def test_model_manager_load_failure_says_the_model_is_still_in_use(qtbot, tmp_path):
    from app.assist.engine_host import EngineHost
    from app.ui.model_dialog import Inspection, ModelDialog
    from engine.fake import FakeEngine

    engine = FakeEngine(load_steps=1, load_delay=0.0)
    host = EngineHost(lambda: engine)
    host.start()
    try:
        with qtbot.waitSignal(host.loaded, timeout=10_000):
            host.load("fake")
        dlg = ModelDialog(host, None, cache_dirs=[], inspector=lambda f, d: Inspection(f, summary="ok"))
        qtbot.addWidget(dlg)
        dlg.choose(str(tmp_path / "gone"))  # passes the (stub) check, then fails to load
        qtbot.waitUntil(lambda: dlg.load_button.isEnabled(), timeout=10_000)
        with qtbot.waitSignal(host.loadFailed, timeout=10_000):
            dlg.load_button.click()
        assert "Still using" in dlg.status.text() and host.model_info is not None
        assert engine.info is not None and engine.info.path == "fake"
    finally:
        host.shutdown()
