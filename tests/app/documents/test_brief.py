"""The document brief (issue 17): edited from Assist ▸ Document brief…, carried by every request, kept beside
the recovery data (never in the document) and back after a restart; and the whole document sent as context."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QMainWindow, QPlainTextEdit

import app
from app import integration
from app.documents.brief import BriefController, BriefStore, path_key, untitled_key
from app.documents.controller import DocumentController
from tests.helpers.gui import ghost_state

pytestmark = pytest.mark.usefixtures("user_dirs")


def _open_window(qtbot, *files: str):
    window = app.create_window(["--fake-engine", "steps=2,delay=0.01", *files])
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.model_state == "ready", timeout=10_000)
    if files:
        qtbot.waitUntil(lambda: window.services.documents.path is not None, timeout=10_000)
    return window


def _spy_requests(window) -> list:
    sent: list = []
    original = window.host.submit

    def submit(request):
        sent.append(request)
        return original(request)

    window.host.submit = submit
    return sent


def _set_brief(window, text: str) -> None:
    window.findChild(type(window.actionDraft), "actionDocumentBrief").trigger()
    dialog = window.brief_dialog
    assert dialog.objectName() == "briefDialog"
    dialog.edit.setPlainText(text)
    dialog.accept()


def _close(window) -> None:
    window.editor.document().setModified(False)
    window.close()


def _briefs_dir() -> Path:
    return Path(os.environ["LETTERPRESS_DATA_DIR"]) / "briefs"


def test_the_brief_is_in_every_request_and_survives_a_restart(qtbot, tmp_path) -> None:
    doc = tmp_path / "chapter.md"
    doc.write_text("The harbour was quiet.", encoding="utf-8")
    window = _open_window(qtbot, str(doc))
    assert "Document brief" in window.palette_commands() or any(
        "Document brief" in name for name in window.palette_commands()
    )
    _set_brief(window, "Audience: children. The captain is Mara.")
    sent = _spy_requests(window)
    window.editor.moveCursor(QTextCursor.MoveOperation.End)  # a draft continues the text before the cursor
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    window.assistant.dismiss()
    window.editor.selectAll()
    window.actionRewrite.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    assert [r.brief for r in sent] == ["Audience: children. The captain is Mara."] * 2
    assert {r.document for r in sent} == {path_key(doc)}
    _close(window)

    assert doc.read_text(encoding="utf-8") == "The harbour was quiet."  # never written into the document
    stored = json.loads((_briefs_dir() / f"{path_key(doc)}.json").read_text(encoding="utf-8"))
    assert stored["brief"] == "Audience: children. The captain is Mara." and stored["path"] == str(doc)

    again = _open_window(qtbot, str(doc))  # a restart: a new window, the same data folder
    assert again.brief.text == "Audience: children. The captain is Mara."
    sent = _spy_requests(again)
    again.editor.moveCursor(QTextCursor.MoveOperation.End)
    again.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(again) == "ready", timeout=10_000)
    assert sent[0].brief == "Audience: children. The captain is Mara."
    _close(again)


def test_the_brief_survives_a_real_restart_of_the_process(tmp_path) -> None:
    """Two separate processes: the second one reads the brief the first one saved."""
    doc = tmp_path / "notes.md"
    doc.write_text("Notes.", encoding="utf-8")
    child = (
        "import sys, app\n"
        "from PySide6.QtWidgets import QApplication\n"
        "qa = QApplication.instance() or QApplication([])\n"
        "w = app.create_window(['--fake-engine', sys.argv[2]])\n"
        "qa.processEvents()\n"
        "if sys.argv[1] == 'write':\n"
        "    w.brief.set_text('Use British spelling.')\n"
        "print('BRIEF', repr(w.brief.text))\n"
        "w.editor.document().setModified(False); w.close()\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(Path(__file__).resolve().parents[3]))
    outs = []
    for mode in ("write", "read"):
        out = subprocess.run(
            [sys.executable, "-c", child, mode, str(doc)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        outs.append(
            next((x for x in out.stdout.splitlines() if x.startswith("BRIEF")), out.stdout + out.stderr)
        )
    assert outs == ["BRIEF 'Use British spelling.'"] * 2


def test_requests_carry_the_whole_document_as_context(qtbot) -> None:
    window = _open_window(qtbot)
    text = "".join(f"Paragraph {i}: the boats rested on the grey water.\n" for i in range(800))  # ~42K chars
    window.editor.setPlainText(text)
    cursor = window.editor.textCursor()
    cursor.setPosition(len(text) // 2)
    window.editor.setTextCursor(cursor)
    sent = _spy_requests(window)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_state(window) == "ready", timeout=10_000)
    assert sent[0].before == text[: len(text) // 2] and sent[0].after == text[len(text) // 2 :]
    assert sent[0].brief == "" and sent[0].document.startswith("untitled-")
    _close(window)


@pytest.fixture
def doc_ui(qtbot, tmp_path):
    window = QMainWindow()
    editor = QPlainTextEdit()
    window.setCentralWidget(editor)
    qtbot.addWidget(window)
    ctrl = DocumentController(window, editor, recent_path=tmp_path / "recent.json")
    ctrl.show_error = lambda title, text: None
    ctrl.ask_unsaved = lambda name: "discard"
    store = BriefStore(tmp_path / "briefs")
    brief = BriefController(store, "session1", ctrl, parent=window)
    return ctrl, brief, store


def test_save_as_carries_an_untitled_brief_and_open_loads_each_documents_own(doc_ui, tmp_path) -> None:
    ctrl, brief, store = doc_ui
    ctrl.editor.setPlainText("Draft text.")
    brief.set_text("Formal register.")
    assert store.load(untitled_key("session1")) == "Formal register."
    target = tmp_path / "report.md"
    ctrl.choose_save_path = lambda suggested: str(target)
    assert ctrl.save()
    assert brief.key == path_key(target) and brief.text == "Formal register."
    assert store.load(path_key(target)) == "Formal register."
    assert not store.file(untitled_key("session1")).exists()

    other = tmp_path / "other.md"
    other.write_text("Other.", encoding="utf-8")
    assert ctrl.open(other)
    assert brief.text == ""  # another document, its own (empty) brief
    assert ctrl.open(target)
    assert brief.text == "Formal register."
    assert ctrl.new()
    assert brief.text == "" and brief.key == untitled_key("session1")


def test_discarding_an_untitled_document_drops_its_brief(doc_ui) -> None:
    ctrl, brief, store = doc_ui
    ctrl.editor.setPlainText("Scratch.")
    brief.set_text("Short sentences.")
    assert store.file(brief.key).exists()
    assert ctrl.new()  # ask_unsaved answers "discard"
    assert not store.file(untitled_key("session1")).exists() and brief.text == ""


def test_an_untitled_documents_brief_comes_back_with_its_recovered_copy(qtbot, tmp_path) -> None:
    window = _open_window(qtbot)
    services = window.services
    recovery = services.recovery.folder
    recovery.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (recovery / "crashed.json").write_text(
        json.dumps({"version": 1, "pid": dead.pid, "path": None, "saved_at": 1.0, "text": "Unsaved story."}),
        encoding="utf-8",
    )
    BriefStore(_briefs_dir()).save(untitled_key("crashed"), "Told in the first person.")
    services.recovery.ask = lambda doc, i, n: "restore"
    restored = integration.offer(services, window)
    assert [d.text for d in restored] == ["Unsaved story."]
    assert window.editor.toPlainText() == "Unsaved story."
    assert window.brief.text == "Told in the first person."
    assert BriefStore(_briefs_dir()).load(window.brief.key) == "Told in the first person."
    _close(window)


def test_orphaned_untitled_briefs_are_forgotten(tmp_path) -> None:
    store = BriefStore(tmp_path / "briefs")
    (tmp_path / "recovery").mkdir()
    (tmp_path / "recovery" / "alive.json").write_text("{}", encoding="utf-8")
    for session in ("alive", "gone", "running", "mine"):
        store.save(untitled_key(session), "x")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = store.file(untitled_key("gone"))
    gone.write_text(
        gone.read_text(encoding="utf-8").replace(f'"pid": {os.getpid()}', f'"pid": {dead.pid}'),
        encoding="utf-8",
    )
    store.save(path_key(tmp_path / "a.md"), "kept")
    store.forget_orphans(tmp_path / "recovery", keep=untitled_key("mine"))
    # "running": no recovery copy yet, but its window (this process) is alive: kept.
    assert sorted(p.stem for p in (tmp_path / "briefs").glob("*.json")) == sorted(
        [untitled_key("alive"), untitled_key("running"), untitled_key("mine"), path_key(tmp_path / "a.md")]
    )


def test_an_unreadable_brief_reads_as_none(tmp_path) -> None:
    store = BriefStore(tmp_path)
    store.file("path-x").write_text("{not json", encoding="utf-8")
    assert store.load("path-x") == ""


def test_a_brief_whose_window_holds_its_session_lock_is_kept_whatever_its_pid(tmp_path) -> None:
    """Inside a PID namespace the window's PID means nothing here; its recovery session lock does."""
    from app.platform.locks import FileLock

    store = BriefStore(tmp_path / "briefs")
    (tmp_path / "recovery").mkdir()
    store.save(untitled_key("sandboxed"), "x")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    f = store.file(untitled_key("sandboxed"))
    f.write_text(
        f.read_text(encoding="utf-8").replace(f'"pid": {os.getpid()}', f'"pid": {dead.pid}'), encoding="utf-8"
    )
    lock = FileLock(tmp_path / "recovery" / "sandboxed.lock")
    assert lock.acquire()
    store.forget_orphans(tmp_path / "recovery", keep=untitled_key("mine"))
    assert f.exists()
    lock.release()
    store.forget_orphans(tmp_path / "recovery", keep=untitled_key("mine"))
    assert not f.exists()
