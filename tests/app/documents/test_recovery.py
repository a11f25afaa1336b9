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

from app.documents.controller import DocumentController
from app.documents.recovery import RecoveryManager, find_recovered


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
    f.write_text(
        json.dumps({"version": 1, "pid": pid, "path": path, "saved_at": saved_at, "text": text}),
        encoding="utf-8",
    )
    return f


def test_unsaved_text_is_autosaved_and_removed_on_save(doc_ui, tmp_path, qtbot):
    _window, editor, ctrl, rec = doc_ui
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
    _window, editor, ctrl, rec = doc_ui
    rec.autosave_now()
    rec.flush()
    assert [
        f.name for f in rec.folder.glob("*.json")
    ] == []  # nothing unsaved, nothing written (but the lock)
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


def test_copies_of_running_sessions_are_not_offered(tmp_path):
    """Alive means: the session's lock is held. The PID in the copy is never trusted (here it is even
    ours)."""
    from app.platform.locks import FileLock

    folder = tmp_path / "recovery"
    _plant(folder, "running", "still open here", None, time.time(), _dead_pid())
    held = FileLock(folder / "running.lock")
    assert held.acquire()
    _plant(folder, "dead", "crashed", "/tmp/x.md", time.time(), os.getpid())
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    found = find_recovered(folder)
    assert [d.text for d in found] == ["crashed"]
    held.release()
    assert sorted(d.text for d in find_recovered(folder)) == ["crashed", "still open here"]
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
    from app.config.settings import Settings

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
    print(
        f"10 MB autosave: snapshot {snapshot_s * 1000:.0f} ms on the UI thread, write {write_s * 1000:.0f} ms"
    )


# ------------------------------------------------------------------------------------------------------------
# The real thing: a running app is killed with SIGKILL and the next start recovers the text.

ROOT = Path(__file__).resolve().parents[3]
CHILD = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from app import create_window
from app.documents.controller import editor_text

mode, args = sys.argv[1], sys.argv[2:]
w = create_window([*args, "--fake-engine"])  # (a bare --fake-engine would swallow a file name)
services = w.services
if mode == "write":
    w.show()
    def type_text():
        w.editor.moveCursor(w.editor.textCursor().MoveOperation.End)
        QTest.keyClicks(w.editor, " typed before the crash")
        w.editor.insertPlainText(" \u00a0한국어 👋")
        print("TYPED", flush=True)
    QTimer.singleShot(200, type_text)
    services.recovery.autosaved.connect(lambda f: print("AUTOSAVED", f, flush=True))
else:
    def ask(doc, i, n):
        print("OFFERED", doc.path, doc.saved_at, i, n, flush=True)
        return "restore"
    services.recovery.ask = ask
    def report():
        print("TEXT", repr(editor_text(w.editor)), w.isWindowModified(), services.documents.path, flush=True)
        QApplication.quit()
    QTimer.singleShot(1000, report)
QApplication.instance().exec()
"""


def _child_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    for name in ("CONFIG", "DATA", "LOG"):
        env[f"LETTERPRESS_{name}_DIR"] = str(tmp_path / name.lower())
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "settings.toml").write_text(
        "[documents]\nautosave_seconds = 1\n", encoding="utf-8"
    )
    return env


def _write_then_sigkill(argv: list, env: dict[str, str], timeout: float) -> subprocess.Popen:
    """Start the writing child, wait until it has typed and autosaved, then SIGKILL it (pipes closed): the
    crash both kill tests recover from."""
    import signal

    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = _lines_until_autosaved(proc, timeout=timeout)
        assert any(x.startswith("AUTOSAVED") for x in lines), lines
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
        proc.stderr.close()
    return proc


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGKILL"), reason="needs SIGKILL")
def test_text_survives_sigkill_and_is_restored_at_next_start(tmp_path):
    import signal

    env = _child_env(tmp_path)
    doc = tmp_path / "chapter.md"
    doc.write_text("Saved opening.", encoding="utf-8")
    proc = _write_then_sigkill([sys.executable, "-c", CHILD, "write", str(doc)], env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert doc.read_text(encoding="utf-8") == "Saved opening."  # the kill did not touch the document itself
    copies = list((tmp_path / "data" / "recovery").glob("*.json"))
    assert len(copies) == 1

    out = subprocess.run(
        [sys.executable, "-c", CHILD, "recover", str(doc)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    offered = [x for x in out.stdout.splitlines() if x.startswith("OFFERED")]
    assert len(offered) == 1 and str(doc) in offered[0], out.stdout + out.stderr
    text_line = next(x for x in out.stdout.splitlines() if x.startswith("TEXT"))
    expected = "Saved opening. typed before the crash \u00a0한국어 👋"
    assert text_line == f"TEXT {expected!r} True {doc}"
    # Restored but not saved: the copy is kept (now owned by the new session) until the writer saves.
    assert len(list((tmp_path / "data" / "recovery").glob("*.json"))) == 1


def _lines_until_autosaved(proc: subprocess.Popen, timeout: float) -> list[str]:
    """The child's lines until it has typed and autosaved, or `timeout` seconds: a child that never autosaves
    fails the test instead of blocking it on a read."""
    import queue
    import threading

    got: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [got.put(x) for x in proc.stdout], daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            lines.append(got.get(timeout=0.5).strip())
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        if lines[-1].startswith("AUTOSAVED") and "TYPED" in lines:
            break
    return lines


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="file names are bytes only on POSIX")
@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGKILL"), reason="needs SIGKILL")
def test_a_non_utf8_file_name_survives_sigkill_and_is_offered_at_next_start(tmp_path):
    """`r\\xe9sum\\xe9.txt` (Latin-1 bytes, not UTF-8): a real app types, autosaves, is killed with SIGKILL;
    the next start offers the copy under the very same name and restores the text."""
    import signal

    env = dict(_child_env(tmp_path), PYTHONIOENCODING="utf-8:backslashreplace")
    raw_name = os.path.join(os.fsencode(tmp_path), b"r\xe9sum\xe9.txt")
    doc = Path(os.fsdecode(raw_name))
    doc.write_bytes(b"Saved opening.")
    # (never autosaved before the fix: the helper's autosave assertion fails)
    proc = _write_then_sigkill(
        [sys.executable.encode(), b"-c", CHILD.encode(), b"write", raw_name], env, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL
    assert doc.read_bytes() == b"Saved opening."
    copies = list((tmp_path / "data" / "recovery").glob("*.json"))
    assert len(copies) == 1

    out = subprocess.run(
        [sys.executable.encode(), b"-c", CHILD.encode(), b"recover"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = str(doc).encode("utf-8", "backslashreplace").decode("utf-8")  # how the child prints the name
    offered = [x for x in out.stdout.splitlines() if x.startswith("OFFERED")]
    assert len(offered) == 1 and shown in offered[0], out.stdout + out.stderr[-3000:]
    text_line = next((x for x in out.stdout.splitlines() if x.startswith("TEXT")), out.stdout + out.stderr)
    expected = "Saved opening. typed before the crash \u00a0한국어 👋"
    assert text_line == f"TEXT {expected!r} True {shown}"
