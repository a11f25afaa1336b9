"""Issue 27, "Models and settings", through the real window (`app.create_window`, the scripted engine unless
marked slow): the built-in demo always in the model manager and stored as a marker; a saved model that cannot
be used falls back to the demo with one sentence; briefs limited by the loaded model, kept per document, and
shown; the model manager's messages once, uncut, with weights apart from the runtime."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QTextCursor
from PySide6.QtWidgets import QToolButton

import app
from app.config.model_choice import DEMO_MARKER
from app.ui.status import ELLIPSIS
from engine.resources import demo_model_dir
from tests.app.ui.test_model_dialog import fake_checkpoint
from tests.helpers.gui import ghost_state

pytestmark = pytest.mark.usefixtures("user_dirs")


@pytest.fixture(autouse=True)
def checked_folders(monkeypatch):
    """The scripted engine checks a folder as the real one does first (`validate_checkpoint`: its sentences),
    so a folder that is not a model fails as it would with the real engine."""
    from engine.fake import FakeEngine
    from engine.weights.loader import validate_checkpoint

    load = FakeEngine.load

    def checked(self, model_dir, **kwargs):
        if str(model_dir) not in ("", "fake"):
            validate_checkpoint(model_dir)
        return load(self, model_dir, **kwargs)

    monkeypatch.setattr(FakeEngine, "load", checked)


def _config() -> Path:
    return Path(os.environ["LETTERPRESS_CONFIG_DIR"])


def _settings_file(text: str) -> None:
    (_config() / "settings.toml").write_text(text, encoding="utf-8")


def _window(qtbot, *argv: str):
    window = app.create_window(["--fake-engine", "steps=2,delay=0.01", *argv])
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.model_state in ("ready", "error"), timeout=10_000)
    return window


def _close(window) -> None:
    window.editor.document().setModified(False)
    window.close()


def _manager(qtbot, window):
    window.findChild(QAction, "actionModelManager").trigger()
    dialog = window.model_dialog
    qtbot.waitUntil(lambda: dialog.isVisible(), timeout=5_000)
    return dialog


def _load_in_manager(qtbot, dialog, item_or_folder) -> None:
    if isinstance(item_or_folder, str):
        dialog.choose(item_or_folder)
    else:
        dialog.cached.itemClicked.emit(item_or_folder)
    qtbot.waitUntil(lambda: dialog.inspection is not None, timeout=60_000)
    assert dialog.inspection.loadable, dialog.check_label.text()
    with qtbot.waitSignal(dialog.host.loaded, timeout=10_000):
        dialog.load_button.click()


def _fits(label) -> bool:
    """The status bar's message line shows its whole text (nothing elided with "…")."""
    full = " ".join(label.full_text().split())
    return bool(full) and label.text() == full and not label.text().endswith(ELLIPSIS)


def _wrapped_whole(label) -> bool:
    """A word-wrapped label is tall enough for all of its lines at its width."""
    return label.wordWrap() and label.height() >= label.heightForWidth(label.width())


# -- 1. the built-in demo in the model manager, stored as a marker -------------------------------------------


def test_the_model_manager_offers_the_built_in_demo_and_stores_a_marker_not_its_path(qtbot, tmp_path):
    other = fake_checkpoint(tmp_path / "another-model")
    _settings_file(f'[model]\nfolder = "{other}"\n')
    window = _window(qtbot)
    assert window.model_dir == str(other) and not window.demoBanner.isVisible()
    dialog = _manager(qtbot, window)
    first = dialog.cached.item(0)
    assert first.text().startswith("Built-in demo") and first.data(Qt.ItemDataRole.UserRole) == DEMO_MARKER
    _load_in_manager(qtbot, dialog, first)
    qtbot.waitUntil(lambda: window.modelLabel.text() == "Ready: Built-in demo", timeout=10_000)
    stored = (_config() / "settings.toml").read_text(encoding="utf-8")
    assert f'folder = "{DEMO_MARKER}"' in stored and str(demo_model_dir()) not in stored
    assert "(none)" not in dialog.status.text() and "Built-in demo on the CPU" in dialog.status.text()
    dialog.reject()
    _close(window)

    again = _window(qtbot)  # the next start: the marker is this version's demo, wherever it is installed
    assert again.modelLabel.text() == "Ready: Built-in demo" and not again.modelNotice.isVisible()
    _close(again)


def test_a_demo_path_stored_by_an_older_version_still_means_the_demo(qtbot):
    _settings_file('[model]\nfolder = "/opt/letterpress-0.9/resources/models/letterpress-demo"\n')
    window = _window(qtbot)
    assert window.modelLabel.text() == "Ready: Built-in demo"
    assert not window.modelNotice.isVisible()  # nothing went wrong: it is the demo this version ships
    _close(window)


def test_the_first_run_hint_and_the_status_bar_use_the_demos_own_words(qtbot):
    from app.ui.demo_notice import demo_wording

    window = _window(qtbot)  # no model configured: the shipped demo, on a first start
    words = demo_wording()
    assert window.firstRunHint.isVisible() and words.hint in window.firstRunHint.text()
    assert window.demoBanner.label.text() == words.badge
    assert window.modelLabel.text() == f"Ready: {words.name}"
    _close(window)


# -- 2. a saved model that cannot be used: the demo, and one sentence ----------------------------------------


@pytest.mark.parametrize(
    "case, phrase",
    [("moved", "was not found (moved or deleted?)"), ("not_a_model", "is no longer a model folder")],
)
def test_a_saved_model_that_cannot_be_used_falls_back_to_the_demo_with_one_sentence(
    qtbot, tmp_path, case, phrase
):
    saved = tmp_path / "models" / "diffusiongemma"
    if case == "not_a_model":
        saved.mkdir(parents=True)
        (saved / "notes.txt").write_text("the model moved to another disk", encoding="utf-8")
    _settings_file(f'[model]\nfolder = "{saved}"\n')
    window = _window(qtbot)
    qtbot.waitUntil(lambda: window.modelLabel.text() == "Ready: Built-in demo", timeout=10_000)
    assert window.model_state == "ready" and window.modelLabel.text() != "Model error"
    notice = window.modelNotice.text()
    assert notice.startswith("The saved model folder") and phrase in notice and "built-in demo" in notice
    assert notice.count(". ") == 0 and notice.endswith(").")  # one sentence
    qtbot.waitUntil(lambda: _wrapped_whole(window.modelNotice.label), timeout=5_000)
    qtbot.waitUntil(lambda: _fits(window.statusBar().label), timeout=5_000)  # once laid out
    assert str(saved) in window.modelNotice.label.toolTip()  # the engine's whole message, path and all
    set_draft = "The harbour was quiet."
    window.editor.setPlainText(set_draft)
    window.editor.moveCursor(QTextCursor.MoveOperation.End)
    window.actionDraft.trigger()  # the writer has an assistant
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    window.assistant.dismiss()

    dialog = _manager(qtbot, window)  # and can still pick another model
    assert dialog.cached.item(0).text().startswith("Built-in demo")
    _load_in_manager(qtbot, dialog, str(fake_checkpoint(tmp_path / "found-again")))
    qtbot.waitUntil(lambda: window.model_dir == str(tmp_path / "found-again"), timeout=10_000)
    qtbot.waitUntil(lambda: not window.demoBanner.isVisible(), timeout=10_000)
    assert not window.modelNotice.isVisible() and window.model_state == "ready"
    dialog.reject()
    _close(window)


def test_a_failed_load_keeps_the_model_and_says_it_once_and_whole(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    window = _window(qtbot)
    not_a_model = tmp_path / "holiday-photos"
    not_a_model.mkdir()
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(not_a_model)))
    window.actionLoadModel.trigger()
    qtbot.waitUntil(lambda: "Still using" in window.modelNotice.text(), timeout=10_000)
    notice = window.modelNotice.text()
    assert notice.count("Choose the folder") == 1 and "Still using Built-in demo." in notice
    assert window.statusBar().currentMessage() == "Still using Built-in demo."
    qtbot.waitUntil(lambda: _fits(window.statusBar().label), timeout=5_000)
    qtbot.waitUntil(lambda: _wrapped_whole(window.modelNotice.label), timeout=5_000)
    _close(window)


# -- 3. the brief: the model's limit, its own document, a visible sign ---------------------------------------


def _brief_dialog(window):
    window.findChild(QAction, "actionDocumentBrief").trigger()
    return window.brief_dialog


def test_the_brief_dialog_names_the_models_limit_and_refuses_a_longer_brief(qtbot):
    window = _window(qtbot)
    limit = window.brief.limit
    assert 0 < limit < 4000 and window.brief.model_name == "Built-in demo"  # the scripted engine's 4,096
    dialog = _brief_dialog(window)
    assert f"0 of {limit:,} characters (Built-in demo reads at most {limit:,})" in dialog.count.text()
    dialog.edit.setPlainText("word " * (limit // 5 + 20))
    assert "shorten it by" in dialog.count.text()
    dialog.accept()
    assert dialog.isVisible() and window.brief.text == ""  # refused before saving
    dialog.edit.setPlainText("Audience: children. The captain is Mara.")
    dialog.accept()
    assert not dialog.isVisible() and window.brief.text == "Audience: children. The captain is Mara."
    _close(window)


def test_a_brief_too_long_for_the_loaded_model_is_a_sentence_and_requests_carry_what_it_reads(qtbot):
    window = _window(qtbot)
    long_brief = "The ship is the Maud and the captain is Mara. " * 40  # ~1,840 characters
    window.brief.set_model(4000, "a larger model")  # the brief was written while a larger model was loaded
    window.brief.set_text(long_brief)
    window.brief.set_model(300, "Built-in demo")  # then the demo is loaded (the shipped demo's limit)
    assert "reads 300 of them" in window.modelNotice.text()
    sign = window.findChild(QToolButton, "briefStatus")
    assert sign.isVisible() and sign.text() == "Brief ⚠" and "reads 300" in sign.toolTip()
    sent: list = []
    original = window.host.submit
    window.host.submit = lambda request: sent.append(request) or original(request)
    window.editor.setPlainText("The harbour was quiet.")
    window.editor.moveCursor(QTextCursor.MoveOperation.End)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    carried = sent[0].brief
    assert 0 < len(carried) <= 300 and long_brief.startswith(carried)
    assert long_brief[len(carried)] == " "  # it ends at a word
    assert window.brief.text == long_brief.strip()  # kept whole for the larger model
    _close(window)


def test_a_brief_has_a_visible_sign_that_opens_it(qtbot):
    window = _window(qtbot)
    sign = window.findChild(QToolButton, "briefStatus")
    assert sign is not None and not sign.isVisible()
    window.brief.set_text("British spelling; for a general audience.")
    assert sign.isVisible() and sign.text() == "Brief" and "British spelling" in sign.toolTip()
    sign.click()
    assert window.brief_dialog is not None and window.brief_dialog.isVisible()
    window.brief_dialog.reject()
    window.brief.set_text("")
    assert not sign.isVisible()
    _close(window)


def test_a_new_document_saved_over_a_briefed_file_does_not_get_that_brief_after_a_restart(qtbot, tmp_path):
    doc = tmp_path / "chapter.md"
    doc.write_text("The first chapter.", encoding="utf-8")
    first = _window(qtbot, str(doc))
    qtbot.waitUntil(lambda: first.services.documents.path is not None, timeout=10_000)
    first.brief.set_text("Audience: children. The captain is Mara.")
    _close(first)

    second = _window(qtbot)  # a new, untitled document without a brief, saved over chapter.md
    second.editor.setPlainText("Another story altogether.")
    documents = second.services.documents
    documents.choose_save_path = lambda suggested: str(doc)
    documents.ask_replace = lambda target: True  # "Replace chapter.md?" answered yes
    assert documents.save()
    assert second.brief.text == ""
    _close(second)

    again = _window(qtbot, str(doc))  # a restart
    qtbot.waitUntil(lambda: again.services.documents.path is not None, timeout=10_000)
    assert again.editor.toPlainText() == "Another story altogether."
    assert again.brief.text == ""
    _close(again)


# -- 5. the model manager's messages -------------------------------------------------------------------------


def test_a_folder_that_is_not_a_model_is_said_once_and_uncut_in_the_manager(qtbot, tmp_path):
    window = _window(qtbot)
    folder = tmp_path / "notes"
    folder.mkdir()
    dialog = _manager(qtbot, window)
    dialog.choose(str(folder))
    qtbot.waitUntil(lambda: dialog.inspection is not None, timeout=10_000)
    text = dialog.check_label.text()
    assert text.count("is not a model folder") == 1 and text.count("Choose the folder") == 1, text
    sentences = [s.strip() for s in text.replace("\n", " ").split(". ") if s.strip()]
    assert len(sentences) == len(set(sentences))
    qtbot.waitUntil(lambda: _wrapped_whole(dialog.check_label), timeout=5_000)
    dialog.reject()
    _close(window)


def test_the_fit_table_shows_the_models_weights_apart_from_the_runtime(qtbot):
    window = _window(qtbot)
    dialog = _manager(qtbot, window)
    dialog.cached.itemClicked.emit(dialog.cached.item(0))  # the built-in demo: about 15 MB of weights
    qtbot.waitUntil(lambda: dialog.inspection is not None and dialog.fit_table.rowCount() > 0, timeout=60_000)
    t = dialog.fit_table
    headers = [t.horizontalHeaderItem(c).text() for c in range(t.columnCount())]
    assert headers[2:5] == ["Weights", "Runtime", "Total"]
    row = {headers[c]: t.item(0, c).text() for c in range(t.columnCount())}
    assert row["Weights"].endswith(" MB") and float(row["Weights"].split()[0]) < 100
    assert row["Runtime"].endswith(" GB")  # the runtime's own memory, not the model's
    weights = dialog.inspection.fit[0].weights_gb
    assert weights is not None and weights < 0.1 < dialog.inspection.fit[0].needed_gb
    dialog.reject()
    _close(window)


# -- 6. messages that fit where they are shown ---------------------------------------------------------------


def test_a_long_settings_problem_is_cut_at_a_word_in_the_status_bar(qtbot):
    from PySide6.QtWidgets import QLabel

    long_name = " ".join(["a setting name that Letterpress does not know"] * 6)  # ~280 characters
    _settings_file(f'[appearance]\n"{long_name}" = 1\n')
    window = _window(qtbot)
    label = window.findChild(QLabel, "settingsWarning")
    problem = window.settings.problems[0]
    assert len(problem) > 160 and problem in label.toolTip()
    shown = label.text().removeprefix("⚠ Settings: ")
    assert shown.endswith(ELLIPSIS)
    body = shown.removesuffix(ELLIPSIS)
    assert problem.startswith(body) and problem[len(body)] == " "  # cut at a word, never inside one
    _close(window)


@pytest.mark.slow
def test_on_the_shipped_demo_a_long_brief_is_refused_and_an_old_one_no_longer_fails_requests(
    qtbot, monkeypatch, tmp_path
):
    """The real engine and demo: the dialog refuses 1,500 characters (the demo reads a few hundred), and a
    brief saved while a larger model was loaded no longer makes every request fail."""
    from tests.helpers.gui import demo_window

    for window in demo_window(qtbot, monkeypatch, tmp_path, "[draft]\nlength = 16\n"):
        limit = window.brief.limit
        assert 100 <= limit < 1500 and window.brief.model_name == "Built-in demo"
        long_brief = ("The captain is Mara Lindqvist and the ship is the Maud, launched in 1923. " * 30)[
            :1500
        ]
        dialog = _brief_dialog(window)
        dialog.edit.setPlainText(long_brief)
        dialog.accept()
        assert dialog.isVisible() and "shorten it by" in dialog.count.text() and window.brief.text == ""
        dialog.reject()
        window.brief._text = long_brief  # as saved while a larger model was loaded
        window.brief.changed.emit(long_brief)
        assert "Built-in demo reads" in window.modelNotice.text()
        window.editor.setPlainText("The harbour was quiet that morning.")
        window.editor.moveCursor(QTextCursor.MoveOperation.End)
        window.actionDraft.trigger()
        qtbot.waitUntil(lambda w=window: ghost_state(w) in ("ready", "error"), timeout=120_000)
        assert ghost_state(window) == "ready", window.statusBar().currentMessage()


def test_a_load_that_runs_out_of_ram_on_the_cpu_says_ram_in_the_manager(qtbot, tmp_path):
    """Issue 27: on a CPU machine short of RAM the manager never says "close programs that use the GPU"."""
    from app.assist.engine_host import EngineHost
    from app.ui.model_dialog import Inspection, ModelDialog
    from engine.api import OutOfMemoryError
    from engine.fake import FakeEngine

    error = OutOfMemoryError("The computer ran out of memory (RAM) while loading the model.")
    host = EngineHost(lambda: FakeEngine(load_error=error, load_steps=1, load_delay=0.0))
    host.start()
    try:
        dialog = ModelDialog(
            host, None, cache_dirs=[], inspector=lambda f, d: Inspection(f, summary="ok", device="cpu")
        )
        qtbot.addWidget(dialog)
        dialog.device.setCurrentText("cpu")
        dialog.choose(str(fake_checkpoint(tmp_path / "big-model")))
        qtbot.waitUntil(lambda: dialog.load_button.isEnabled(), timeout=10_000)
        with qtbot.waitSignal(host.loadFailed, timeout=10_000):
            dialog.load_button.click()
        text = dialog.status.text()
        assert "RAM" in text and "GPU" not in text, text
    finally:
        host.shutdown()
