"""Autosave and recovery: unsaved text reaches the recovery folder, survives a kill and comes back once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMainWindow, QPlainTextEdit

from app.documents import DocumentController
from app.recovery import RecoveryManager, find_recovered


@pytest.fixture
def doc_ui(qtbot, tmp_path):
    window = QMainWindow()
    editor = QPlainTextEdit()
    window.setCentralWidget(editor)
    qtbot.addWidget(window)
    ctrl = DocumentController(window, editor, recent_path=tmp_path / "recent.json")
    ctrl.show_error = lambda title, text: None
    ctrl.ask_unsaved = lambda name: "discard"
    rec = RecoveryManager(tmp_path / "recovery", ctrl.recovery_snapshot, interval_s=0.2, parent=window)
    rec.connect_document(ctrl)
    yield window, editor, ctrl, rec
    rec.shutdown(keep=True)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant(folder: Path, name: str, text: str, path: str | None, saved_at: float, pid: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / f"{name}.json"
    f.write_text(json.dumps({"version": 1, "pid": pid, "path": path, "saved_at": saved_at, "text": text}),
                 encoding="utf-8")
    return f


def test_unsaved_text_is_autosaved_and_removed_on_save(doc_ui, tmp_path, qtbot):
    window, editor, ctrl, rec = doc_ui
    target = tmp_path / "essay.md"
    target.write_text("", encoding="utf-8")
    ctrl.open(target)
    qtbot.keyClicks(editor, "Words that must not be lost ")
    editor.insertPlainText("한국어 👋")  # QTest cannot type non-ASCII keys
    with qtbot.waitSignal(rec.autosaved, timeout=5000):
        pass
    data = json.loads(rec.file.read_text(encoding="utf-8"))
    assert data["text"] == "Words that must not be lost 한국어 👋"
    assert data["path"] == str(target) and data["pid"] == os.getpid()
    assert ctrl.save()
    rec.flush()
    assert not rec.file.exists()


def test_discarding_removes_the_copy_and_clean_state_writes_nothing(doc_ui, qtbot):
    window, editor, ctrl, rec = doc_ui
    rec.autosave_now()
    rec.flush()
    assert not rec.folder.exists() or not any(rec.folder.iterdir())  # nothing unsaved, nothing written
    qtbot.keyClicks(editor, "scratch")
    rec.autosave_now()
    rec.flush()
    assert rec.file.exists()
    ctrl.new()  # asks, the fixture answers "discard"
    rec.flush()
    assert not rec.file.exists()


def test_undo_back_to_the_saved_text_removes_the_copy(doc_ui, qtbot):
    _, editor, _, rec = doc_ui
    qtbot.keyClicks(editor, "x")
    rec.autosave_now()
    rec.flush()
    assert rec.file.exists()
    editor.undo()
    rec.autosave_now()
    rec.flush()
    assert not rec.file.exists()


def test_copies_of_running_processes_are_not_offered(tmp_path):
    folder = tmp_path / "recovery"
    _plant(folder, "mine", "still open here", None, time.time(), os.getpid())
    _plant(folder, "dead", "crashed", "/tmp/x.md", time.time(), _dead_pid())
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    found = find_recovered(folder)
    assert [d.text for d in found] == ["crashed"]
    assert "/tmp/x.md" in found[0].describe() and "autosaved" in found[0].describe()


def test_offer_restores_discards_or_keeps_each_copy(doc_ui, tmp_path):
    window, editor, ctrl, rec = doc_ui
    dead = _dead_pid()
    a = _plant(rec.folder, "a", "first lost text", str(tmp_path / "a.md"), 100.0, dead)
    b = _plant(rec.folder, "b", "second lost text", None, 200.0, dead)
    c = _plant(rec.folder, "c", "third lost text", None, 300.0, dead)
    answers = iter(["restore", "discard", "later"])
    asked = []
    rec.ask = lambda doc, i, n: asked.append((doc.text, i, n)) or next(answers)

    def restore(doc):
        ctrl.restore(doc.text, doc.path)
        return True

    restored = rec.offer(restore)
    rec.flush()
    assert [d.text for d in restored] == ["first lost text"]
    assert asked == [("first lost text", 1, 3), ("second lost text", 2, 3), ("third lost text", 3, 3)]
    assert editor.toPlainText() == "first lost text" and ctrl.path == tmp_path / "a.md"
    assert window.isWindowModified()  # restored text is unsaved work until the writer saves it
    assert not a.exists() and not b.exists() and c.exists()
    assert json.loads(rec.file.read_text(encoding="utf-8"))["pid"] == os.getpid()  # adopted by this session
    assert ctrl.save()
    rec.flush()
    assert (tmp_path / "a.md").read_text(encoding="utf-8") == "first lost text"
    assert not rec.file.exists()


def test_interval_follows_settings(doc_ui, tmp_path):
    from app.settings import Settings

    *_, rec = doc_ui
    s = Settings(tmp_path / "cfg")
    rec.connect_settings(s)
    assert rec._timer.interval() == 5000
    s.set("documents.autosave_seconds", 2)
    assert rec._timer.interval() == 2000


def test_autosave_of_a_big_document_does_not_block_typing(doc_ui, qtbot):
    """The 10 MB copy is written on a background thread; the UI thread only takes a snapshot."""
    _, editor, _, rec = doc_ui
    editor.setPlainText("lorem ipsum dolor sit amet\n" * 400_000)  # ~10 MB
    editor.document().setModified(True)
    t0 = time.perf_counter()
    rec.autosave_now()
    snapshot_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rec.flush(60)
    write_s = time.perf_counter() - t0
    assert json.loads(rec.file.read_text(encoding="utf-8"))["text"] == editor.toPlainText()
    print(f"10 MB autosave: snapshot {snapshot_s * 1000:.0f} ms on the UI thread, write {write_s * 1000:.0f} ms")
