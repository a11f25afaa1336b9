"""Faults and bad input: in every case the window stays usable, the document is unchanged unless the writer
accepted a suggestion, and the message says what to do."""

from __future__ import annotations

import shutil
import stat

import pytest
from PySide6.QtCore import Qt

from engine.api import GenerationError, OutOfMemoryError
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, ghost_state, set_text

MIXED = "서울의 아침. 東京の夜。 北京的春天。 Emoji 👩🏽‍💻🎉 and שלום עולם / مرحبا بالعالم.\n"


pytestmark = pytest.mark.usefixtures("user_dirs")


def with_services(window, settings):
    from app.integration import install_services

    services = install_services(window, settings, offer_recovery=False)
    services.documents.show_error = lambda title, text: services.errors.append(text)  # type: ignore[attr-defined]
    services.documents.ask_unsaved = lambda name: "discard"
    services.errors = []  # type: ignore[attr-defined]
    return services


def finish(qtbot, window, timeout=10_000):
    qtbot.waitUntil(lambda: ghost_state(window) in ("ready", "error", "idle"), timeout=timeout)


def still_usable(qtbot, window, text_before: str) -> None:
    """The writer can keep typing and the document holds exactly what they typed."""
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(window.editor, " ok")
    assert window.editor.toPlainText() == text_before + " ok"


@pytest.mark.parametrize(
    "error, words",
    [
        (
            OutOfMemoryError(
                "The GPU ran out of memory for this request. Try fewer alternatives or a shorter "
                "selection; the model stays loaded."
            ),
            ["out of memory", "fewer alternatives"],
        ),
        (GenerationError("Generation failed unexpectedly (IndexError: boom). Try again."), ["Try again"]),
        (RuntimeError("a bug deep in the engine"), ["Try again"]),  # not an EngineError: the host wraps it
    ],
)
def test_engine_failure_mid_request_leaves_the_document_alone(qtbot, error, words):
    window = build_window(qtbot, FakeEngine(steps=8, step_delay=0.01, fail_at_step=4, error=error))
    set_text(window, "A calm sentence.")
    qtbot.keyClick(window.editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: ghost_state(window) == "error", timeout=10_000)
    message = window.statusBar().currentMessage()
    for w in words:
        assert w in message
    assert window.editor.toPlainText() == "A calm sentence."
    assert not window.actionAcceptSuggestion.isEnabled()
    still_usable(qtbot, window, "A calm sentence.")


def test_a_request_after_a_failure_works(qtbot):
    engine = FakeEngine(
        texts=[" Then it worked."],
        steps=4,
        fail_at_step=2,
        error=OutOfMemoryError("The GPU ran out of memory for this request."),
    )
    window = build_window(qtbot, engine)
    set_text(window, "Try.")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "error", timeout=10_000)
    engine.fail_at_step = None
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    window.actionAcceptSuggestion.trigger()
    assert window.editor.toPlainText() == "Try. Then it worked."


def test_cancelling_a_load_leaves_the_window_usable(qtbot):
    engine = FakeEngine(load_steps=1000, load_delay=0.05)  # 50 s unless cancelled
    window = build_window(qtbot, FakeEngine())
    window.host.engine = engine  # the next load goes to the slow engine
    window.load_model("fake")
    qtbot.waitUntil(lambda: window.model_state == "loading" and window.loadBar.value() >= 0, timeout=30_000)
    set_text(window, "Typing while it loads.")
    window.actionCancelLoad.trigger()
    qtbot.waitUntil(lambda: window.model_state != "loading", timeout=30_000)
    assert "cancel" in (window.modelLabel.toolTip() + window.statusBar().currentMessage()).lower()
    assert window.editor.toPlainText() == "Typing while it loads."
    still_usable(qtbot, window, "Typing while it loads.")


def test_empty_selection_for_rewrite_says_what_to_do(qtbot):
    window = build_window(qtbot, FakeEngine())
    set_text(window, "Nothing selected here.", select=(5, 5))
    window.actionRewrite.trigger()
    assert "Select the text" in window.statusBar().currentMessage()
    assert ghost_state(window) == "idle" and window.editor.toPlainText() == "Nothing selected here."
    set_text(window, "Only   spaces selected.", select=(4, 7))
    window.actionRewrite.trigger()
    assert "Select the text" in window.statusBar().currentMessage()
    assert window.editor.toPlainText() == "Only   spaces selected."


def test_korean_cjk_emoji_and_rtl_text_survive_suggestions_undo_and_save(qtbot, tmp_path, settings):
    suggestion = " 다음 문장。 新しい文 🎉 ועוד משפט"
    window = build_window(qtbot, FakeEngine(texts=[suggestion], steps=4), settings=settings)
    services = with_services(window, settings)
    path = tmp_path / "mixed.md"
    path.write_text(MIXED, encoding="utf-8")
    assert services.documents.open(path)
    # Rewrite the Hebrew words (positions in Qt count UTF-16 code units: find them through the editor itself).
    assert window.editor.find("שלום עולם")
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    assert window.editor.toPlainText() == MIXED  # nothing inserted before accepting
    window.actionAcceptSuggestion.trigger()
    accepted = window.editor.toPlainText()
    # The suggestion's leading space meets the writer's space before the selection: joined without doubling.
    assert accepted == MIXED.replace("שלום עולם", suggestion.lstrip())
    window.editor.undo()
    assert window.editor.toPlainText() == MIXED  # byte for byte
    window.editor.redo()
    assert services.documents.save()
    assert path.read_text(encoding="utf-8") == accepted


def test_ten_megabyte_document_opens_edits_saves_and_drafts(qtbot, tmp_path, settings):
    window = build_window(qtbot, FakeEngine(texts=[" The end."], steps=3), settings=settings)
    services = with_services(window, settings)
    paragraph = "Ein langer Absatz über das Meer, 바다, 海 — and the harbour at dawn. " * 20 + "\n\n"
    big = paragraph * (10_000_000 // len(paragraph.encode("utf-8")) + 1)
    path = tmp_path / "big.md"
    path.write_text(big, encoding="utf-8")
    assert path.stat().st_size > 10_000_000
    assert services.documents.open(path)
    assert window.editor.document().characterCount() - 1 == len(big)
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(window.editor, "Last words")
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=30_000)
    window.actionAcceptSuggestion.trigger()
    assert services.documents.save()
    assert path.read_text(encoding="utf-8") == big + "Last words The end."
    services.recovery.autosave_now()  # saved: nothing left to recover
    services.recovery.flush(60)
    assert not services.recovery.file.exists()


def test_read_only_file_cannot_be_overwritten_and_save_as_is_offered(qtbot, tmp_path, settings):
    window = build_window(qtbot, FakeEngine(), settings=settings)
    services = with_services(window, settings)
    path = tmp_path / "locked.md"
    path.write_text("Locked text.", encoding="utf-8")
    path.chmod(stat.S_IRUSR)
    try:
        assert services.documents.open(path)
        window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
        qtbot.keyClicks(window.editor, " More.")
        qtbot.keyClick(window.editor, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
        assert "read-only" in services.errors[-1] and "Save As" in services.errors[-1]
        assert path.read_text(encoding="utf-8") == "Locked text."
        assert window.editor.toPlainText() == "Locked text. More." and window.isWindowModified()
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)


# ------------------------------------------------------------------------------------------------------------
# With the real engine on a tiny checkpoint


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.helpers.checkpoints import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory, name="model")


def real_window(qtbot, model_dir, settings, monkeypatch):
    """The real window and engine on `model_dir`, with a fixed sampling seed: with a random one, a random tiny
    model writes nothing at all about once in 80 drafts ("The model returned no text"), which these tests do
    not test."""
    import engine.plan
    from app.assist.engine_host import EngineHost
    from app.main_window import MainWindow

    monkeypatch.setattr(
        engine.plan, "secrets", type("FixedSeed", (), {"randbelow": staticmethod(lambda n: 7)})
    )

    settings.update({"denoise.steps": 4, "denoise.alternatives": 1, "draft.length": 16})
    host = EngineHost()
    host.start()
    window = MainWindow(host, settings=settings, model_dir=str(model_dir), device="cpu")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.model_state in ("ready", "error"), timeout=120_000)
    assert window.model_state == "ready", window.modelLabel.toolTip()
    return window


@pytest.mark.slow
def test_model_folder_deleted_while_loaded(qtbot, tmp_path, tiny_model, settings, monkeypatch):
    folder = tmp_path / "copy"
    shutil.copytree(tiny_model, folder)
    window = real_window(qtbot, folder, settings, monkeypatch)
    shutil.rmtree(folder)
    set_text(window, "The model is already in memory.")
    window.actionDraft.trigger()
    finish(qtbot, window, 120_000)
    assert ghost_state(window) == "ready"  # the loaded weights do not need the folder any more
    window.actionDismissSuggestion.trigger()
    window.load_model(str(folder))  # reloading it cannot work, says why, and keeps the model in memory
    qtbot.waitUntil(lambda: window.model_state != "loading", timeout=60_000)
    assert window.model_state == "ready"
    message = window.modelNotice.text()  # the whole sentence, above the page (issue 27)
    assert "does not exist" in message and "Choose" in message and "Still using" in message
    assert "Still using" in window.statusBar().currentMessage()
    assert window.editor.toPlainText() == "The model is already in memory."
    still_usable(qtbot, window, "The model is already in memory.")


@pytest.mark.slow
def test_selection_in_a_document_longer_than_the_context(qtbot, tiny_model, settings, monkeypatch):
    window = real_window(qtbot, tiny_model, settings, monkeypatch)
    sentence = "The harbour was quiet and the boats rested on the grey water. "
    doc = sentence * 1500 + "Rewrite this short sentence please." + " " + sentence * 1500
    set_text(window, doc)
    start = doc.index("Rewrite this")
    set_text(window, doc, select=(start, start + len("Rewrite this short sentence please.")))
    messages: list[str] = []
    window.assistant.message.connect(messages.append)
    window.actionRewrite.trigger()
    finish(qtbot, window, 120_000)
    assert ghost_state(window) == "ready", window.statusBar().currentMessage()
    assert any("longer than the model" in m for m in messages), messages  # the trim is said
    assert window.editor.toPlainText() == doc
    # Select everything: far longer than the model's context, and there is nothing around it to trim.
    set_text(window, doc, select=(0, len(doc)))
    window.actionRewrite.trigger()
    finish(qtbot, window, 120_000)
    message = window.statusBar().currentMessage()
    assert ghost_state(window) == "error"
    assert any(w in message for w in ("shorter", "less")), message  # it says what to do
    assert window.editor.toPlainText() == doc
