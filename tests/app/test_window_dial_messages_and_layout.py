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


# -- 3. no stale status messages -----------------------------------------------------------------------------


def message(window):
    return window.statusBar().currentMessage()


def test_accepted_then_undone_the_status_bar_no_longer_says_accepted(qtbot, settings):
    window = build_window(qtbot, FakeEngine(steps=2, texts=[" the rain came."]), settings=settings)
    set_text(window, "Evening fell and")
    qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    wait_ready(qtbot, window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert "accepted" in message(window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert window.editor.toPlainText() == "Evening fell and"
    assert "accepted" not in message(window), message(window)


def test_a_rerun_message_goes_when_the_rerun_has_finished(qtbot, settings):
    engine = FakeEngine(steps=6, step_delay=0.01)
    window = build_window(qtbot, engine, settings=settings)
    rewrite_with(qtbot, window, "grammar")
    window.editing.set_strength(0.6)
    assert message(window) == "Rewriting again at strength 0.6."
    qtbot.waitUntil(lambda: len(engine.requests) == 2)
    wait_ready(qtbot, window)
    assert "again" not in message(window), "the re-run is over: the bar does not say it is running"
    window.editing.reroll_uncertain()
    if "Re-rolling" in message(window):
        wait_ready(qtbot, window)
        qtbot.waitUntil(lambda: not window.assistant.suggestion.running)
        assert "Re-rolling" not in message(window), message(window)


def test_messages_about_a_suggestion_go_when_it_is_accepted_or_dismissed(qtbot, settings):
    window = build_window(qtbot, FakeEngine(steps=2, texts=[" alpha beta gamma."]), settings=settings)
    for finish in (Qt.Key.Key_Tab, Qt.Key.Key_Escape):
        set_text(window, "Evening fell.")
        qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        wait_ready(qtbot, window)
        qtbot.keyClick(window.editor, Qt.Key.Key_P, Qt.KeyboardModifier.AltModifier)
        assert "Pinned" in message(window)
        qtbot.keyClick(window.editor, finish)
        assert "Pinned" not in message(window), (finish, message(window))


# -- 7. the find fields keep a usable width ------------------------------------------------------------------


def test_find_and_replace_fields_keep_a_usable_width_with_the_alternatives_panel_open(qtbot, settings):
    window = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    assert (window.width(), window.height()) == (1000, 720), "the default window size"
    window.editing.actionShowAlternatives.trigger()
    qtbot.waitUntil(lambda: window.editing.panel.isVisible())
    window.actionReplace.trigger()
    bar = window.find_bar
    qtbot.waitUntil(lambda: bar.replace_edit.isVisible())
    fm = bar.find_edit.fontMetrics()
    for field in (bar.find_edit, bar.replace_edit):
        assert field.width() >= max(200, 25 * fm.averageCharWidth()), (field.objectName(), field.width())
        assert field.geometry().right() <= bar.width(), "inside the bar, not clipped"
    for button in (bar.replace_btn, bar.all_btn, bar.case, bar.whole):
        assert button.isVisible() and button.width() >= button.minimumSizeHint().width(), button.text()
    assert window.editing.panel.width() >= 150, "the panel is still usable too"


# -- 8. Save As starts in a sensible folder -----------------------------------------------------------------


def save_as_start(qtbot, window, monkeypatch, answer=""):
    """Run File ▸ Save As through the real dialog; return the folder it opened in (and answer `answer`)."""
    from PySide6.QtWidgets import QFileDialog

    seen = []

    def exec_(dialog):
        seen.append(dialog.directory().absolutePath())
        if not answer:
            return QFileDialog.DialogCode.Rejected
        dialog.selectFile(answer)
        return QFileDialog.DialogCode.Accepted

    monkeypatch.setattr(QFileDialog, "exec", exec_)
    window.services.documents.action_save_as.trigger()
    assert len(seen) == 1
    return seen[0]


def test_save_as_starts_in_documents_then_the_files_folder_then_the_last_used(
    qtbot, settings, tmp_path, monkeypatch
):
    from app.integration import install_services

    documents = tmp_path / "Documents"
    documents.mkdir()
    monkeypatch.setenv("LETTERPRESS_DOCUMENTS_DIR", str(documents))
    work = tmp_path / "started-here"
    work.mkdir()
    monkeypatch.chdir(work)
    window = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    install_services(window, settings, offer_recovery=False)
    docs = window.services.documents
    docs.ask_unsaved = lambda _name: "discard"
    set_text(window, "A new document.")
    assert save_as_start(qtbot, window, monkeypatch) == str(documents), "a new document: the documents folder"

    project = tmp_path / "project"
    project.mkdir()
    existing = project / "chapter.md"
    existing.write_text("Chapter one.", encoding="utf-8")
    assert docs.open(existing)
    assert save_as_start(qtbot, window, monkeypatch) == str(project), "an existing document: its folder"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert docs.new()
    set_text(window, "Another one.")
    save_as_start(qtbot, window, monkeypatch, answer=str(elsewhere / "notes.md"))
    assert (elsewhere / "notes.md").read_text(encoding="utf-8") == "Another one."
    assert docs.new()
    assert save_as_start(qtbot, window, monkeypatch) == str(elsewhere), "after a Save As: that folder"

    again = build_window(qtbot, FakeEngine(steps=2), settings=settings)  # a restart remembers it
    install_services(again, settings, offer_recovery=False)
    assert save_as_start(qtbot, again, monkeypatch) == str(elsewhere)
    assert str(work) not in {str(documents), str(project), str(elsewhere)}


# -- 9. the panel's open state survives a restart ------------------------------------------------------------


def test_the_alternatives_panel_and_the_diff_view_are_as_the_writer_left_them_after_a_restart(
    qtbot, settings
):
    first = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    assert not first.editing.panel.isVisible() and not first.editing.actionToggleDiffView.isChecked()
    first.editing.actionShowAlternatives.trigger()
    first.editing.actionToggleDiffView.trigger()
    assert first.editing.panel.isVisible()
    first.close()
    restarted = Settings(settings.folder)  # what a new start reads from disk
    second = build_window(qtbot, FakeEngine(steps=2), settings=restarted)
    assert second.editing.panel.isVisible(), "open again after the restart"
    assert second.editing.actionShowAlternatives.isChecked()
    assert second.editing.actionToggleDiffView.isChecked() and second.editing.diff_enabled
    second.editing.panel.close()  # the dock's own close button
    second.close()
    third = build_window(qtbot, FakeEngine(steps=2), settings=Settings(settings.folder))
    assert not third.editing.panel.isVisible(), "closed by the writer: closed after the next start"


# -- 6. Settings fits an 800-pixel screen and stays still when the key banner shows -------------------------


def test_settings_fits_an_800_pixel_high_screen_and_the_key_banner_moves_nothing(qtbot, settings):
    from PySide6.QtGui import QKeySequence
    from PySide6.QtWidgets import QDialogButtonBox, QKeySequenceEdit, QLabel

    from app.integration import install_services

    window = build_window(qtbot, FakeEngine(steps=2), settings=settings)
    install_services(window, settings, offer_recovery=False)
    screen = window.screen().availableGeometry()
    assert screen.height() == 800, "the offscreen screen is 800 px high, as a 1280×800 laptop's"
    window.services.action_settings.trigger()
    dlg = window.settings_dialog
    qtbot.waitExposed(dlg)
    assert dlg.frameGeometry().height() <= screen.height(), dlg.frameGeometry()
    assert dlg.frameGeometry().width() <= 1280
    buttons = dlg.findChild(QDialogButtonBox)
    watched = [buttons, dlg.scroll_area, *dlg.inputs.values()]

    def where():
        return [
            (w.objectName(), w.mapTo(dlg, w.rect().topLeft()).toTuple(), w.size().toTuple()) for w in watched
        ]

    qtbot.wait(50)  # the layout settles
    before, size = where(), dlg.size()
    banner = dlg.findChild(QLabel, "settingsProblems")
    assert not banner.isVisible()
    edit = dlg.findChild(QKeySequenceEdit, "setting:keys.accept")
    edit.setKeySequence(QKeySequence("Ctrl+R"))  # the key of Rewrite selection: the conflict banner shows
    qtbot.wait(10)
    assert banner.isVisible() and "already the key for Rewrite selection" in banner.text()
    assert where() == before and dlg.size() == size, "the banner has its own space: nothing moves"
    long = "Accept suggestion " + "is also a key another command wants to keep for itself, " * 8
    dlg._show_problems([long.strip()])
    qtbot.wait(10)
    assert where() == before and dlg.size() == size, "a long problem does not grow the dialog either"
    shown = banner.text()
    assert shown.endswith("…") and long.startswith(shown[:-1].rstrip()), "cut at a word, the rest in the tip"
    assert banner.toolTip() == long.strip()
    edit.setKeySequence(QKeySequence("Tab"))
    qtbot.wait(10)
    assert not banner.isVisible() and where() == before


# -- 4. nothing is cut mid-word ------------------------------------------------------------------------------

LONG_MODEL = "diffusiongemma 26B A4B instruct quantized nf4 mixed with a very long local folder name"


def whole_word_prefix(shown: str, full: str) -> bool:
    """`shown` is `full` itself, or whole words of it followed by "…"."""
    flat = " ".join(full.split())
    if shown == flat:
        return True
    if not shown.endswith("…"):
        return False
    head = shown[:-1].rstrip(" ,;:")
    return flat.startswith(head) and (len(head) == len(flat) or flat[len(head)] in " ,;:")


def test_long_preset_model_and_file_names_end_at_a_word_never_inside_one(qtbot, settings, tmp_path):
    from PySide6.QtWidgets import QLabel

    from app.assist.alternatives_panel import AlternativesPanel
    from app.integration import install_services
    from app.ui.status import ElidedLabel

    preset = "legal contract style for the quarterly board report"
    settings.set("rewrite.presets", {**settings["rewrite.presets"], preset: "Make it read like a contract."})
    window = build_window(qtbot, FakeEngine(steps=2, name=LONG_MODEL), settings=settings)
    install_services(window, settings, offer_recovery=False)
    name = tmp_path / ("the annual report of the committee on budgets and spending " * 2 + ".md")
    name.write_text("Chapter one.", encoding="utf-8")
    assert window.services.documents.open(name)
    window.show_message(f"Opened {name.name} from {tmp_path}, with every chapter and appendix it holds.")
    rewrite_with(qtbot, window, preset)
    qtbot.wait(20)
    model = window.modelLabel
    assert model.full_text() == f"Ready: {LONG_MODEL}" and model.width() <= 260
    assert whole_word_prefix(model.text(), model.full_text()) and model.text().endswith("…")
    assert model.full_text() in model.toolTip() and "fake" in model.toolTip(), "name and path in the tip"
    checked = 0
    for label in window.findChildren(QLabel):
        if not label.isVisible() or not label.text():
            continue
        if isinstance(label, ElidedLabel):
            assert whole_word_prefix(label.text(), label.full_text()), (label.objectName(), label.text())
            checked += 1
        elif not label.wordWrap():
            room = label.contentsRect().width()
            assert label.fontMetrics().horizontalAdvance(label.text()) <= room + 1, (label.objectName(), room)
    assert checked >= 3, "the message, the model and the dial's caption"
    caption = window.editing.dial.caption
    assert caption.full_text().startswith("Legal contract style") and caption.text().endswith("…")
    assert caption.full_text() in window.editing.dial.caption.toolTip()
    panel = AlternativesPanel()
    qtbot.addWidget(panel)
    sug = window.assistant.suggestion
    long_text = " ".join(["unquestionably"] * 40)
    sug.alternatives = [(type(sug.spans[0])(long_text, 0.9),)]
    sug.scores = []
    panel.refresh(sug)
    ((_index, row),) = panel.rows()
    shown = row.split(" · ", 1)[1]
    assert whole_word_prefix(shown, long_text) and shown.endswith("…"), shown
    assert panel.list.item(0).toolTip() == long_text


SETTINGS_ON_A_LAPTOP = r"""
import json, sys
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication, QKeySequenceEdit
app = QApplication(sys.argv[:1])
from app.config.settings import Settings
from app.ui.settings_dialog import SettingsDialog
dlg = SettingsDialog(Settings(sys.argv[1]))
dlg.show()
for _ in range(20):
    app.processEvents()
def where():
    return [w.mapTo(dlg, w.rect().topLeft()).toTuple() for w in (dlg.scroll_area, dlg.buttons)]
before = where()
dlg.findChild(QKeySequenceEdit, "setting:keys.accept").setKeySequence(QKeySequence("Ctrl+R"))
for _ in range(20):
    app.processEvents()
screen = dlg.screen().availableGeometry()
print(json.dumps({"screen": [screen.width(), screen.height()], "frame": dlg.frameGeometry().height(),
                  "moved": where() != before, "banner": dlg.problems.isVisible()}))
"""


def test_settings_on_a_1280_by_800_screen_fits_and_stays_still(tmp_path):
    """The same on a 1280×800 screen (the offscreen platform given that screen, in its own process)."""
    import json
    import os
    import subprocess
    import sys

    config = tmp_path / "screen.json"
    screen = {"name": "laptop", "x": 0, "y": 0, "width": 1280, "height": 800, "logicalDpi": 96, "dpr": 1}
    config.write_text(json.dumps({"screens": [screen]}), encoding="utf-8")
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}"}
    out = subprocess.run(
        [sys.executable, "-c", SETTINGS_ON_A_LAPTOP, str(tmp_path / "cfg")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["screen"] == [1280, 800]
    assert seen["frame"] <= 800 and seen["banner"] and not seen["moved"], seen
