"""One file, one editor and recovery that trusts locks, not PIDs: real second processes hold files, real
SIGKILLs interrupt saves at chosen points, and the next start (a real window) sees what is left.

Nothing here waits for a time shorter than the autosave interval: children report on stdout what they did
("HOLDING", "IN FSYNC", "AUTOSAVED"), and the test acts on those lines."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import app
from tests.helpers.gui import fake_window

pytestmark = [
    pytest.mark.usefixtures("user_dirs"),
    pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL"),
]

ROOT = Path(__file__).resolve().parents[2]
CHILD = r"""
import os, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from app import create_window
from app.platform import atomic

mode, doc = sys.argv[1], sys.argv[2]
w = create_window([doc, "--fake-engine"])
services = w.services
docs = services.documents
docs.ask_unsaved = lambda name: "discard"
services.recovery.ask = lambda d, i, n: "later"

def typed():
    w.editor.moveCursor(w.editor.textCursor().MoveOperation.End)
    QTest.keyClicks(w.editor, " more words")

def start():
    if docs.path is None:
        print("NOT OPENED", flush=True)
        return
    if mode == "hold":
        from app.documents.window_switch import server
        server().requested.connect(lambda p: print("SWITCH", p, flush=True))
        print("HOLDING", flush=True)
    elif mode == "hang-in-fsync":
        folder = os.path.dirname(os.path.realpath(doc))
        real_fsync = os.fsync
        def fsync(fd):
            where = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
            if os.path.dirname(where) == folder and where.endswith((".tmp", ".lptmp")):
                print("IN FSYNC", where, flush=True)
                time.sleep(600)
            real_fsync(fd)
        atomic.os.fsync = fsync
        typed()
        docs.save()
    elif mode == "autosave":
        services.recovery.autosaved.connect(lambda f: print("AUTOSAVED", f, flush=True))
        typed()

QTimer.singleShot(300, start)
QApplication.instance().exec()
"""


def _spawn(mode: str, doc: Path) -> subprocess.Popen:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(doc)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(proc: subprocess.Popen, prefix: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line.strip())
            if line.startswith(prefix):
                return line.strip()
        elif proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"child never said {prefix!r}: {seen} {proc.stderr.read()}")


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child (a crash: it cleans nothing up), reap it and close its pipes; nothing more for a
    child that is gone already."""
    proc.send_signal(signal.SIGKILL)  # does nothing once the child has been reaped
    proc.wait(30)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _window(qtbot):
    window = fake_window(qtbot)
    docs = window.services.documents
    docs.show_error = lambda title, text: window.errors.append(text)
    docs.choose_save_path = lambda suggested: ""
    window.errors = []
    return window, docs


def _close(window) -> None:
    window.services.documents.editor.document().setModified(False)
    window.close()


# ------------------------------------------------------------------------------------------------------------
# 3. One file, one editor


def test_a_second_window_in_this_process_offers_switch_or_read_only(qtbot, tmp_path):
    doc = tmp_path / "chapter.md"
    doc.write_text("first window's words\n", encoding="utf-8")
    w1, d1 = _window(qtbot)
    w2, d2 = _window(qtbot)
    assert d1.open(doc)
    raised = []
    d1.claim.raise_window = lambda: raised.append("w1")
    asked = []
    d2.ask_already_open = lambda name, where: asked.append((name, where)) or "switch"
    assert not d2.open(doc)
    assert asked == [("chapter.md", "another Letterpress window")] and raised == ["w1"]
    assert d2.path is None
    d2.ask_already_open = lambda name, where: "read-only"
    assert d2.open(doc)
    assert d2.read_only and w2.editor.isReadOnly() and "(read-only)" in w2.windowTitle()
    w2.editor.document().setModified(True)
    assert not d2.save()  # a read-only view saves only through Save As (cancelled here)
    assert doc.read_text(encoding="utf-8") == "first window's words\n"
    _close(w1)
    qtbot.waitUntil(lambda: d1.claim.lock is None, timeout=10_000)
    d2.ask_already_open = lambda name, where: pytest.fail("asked although the other window closed")
    assert d2.open(doc) and not d2.read_only and not w2.editor.isReadOnly()
    _close(w2)


def test_save_as_onto_a_file_another_window_edits_is_refused(qtbot, tmp_path):
    doc = tmp_path / "theirs.md"
    doc.write_text("theirs\n", encoding="utf-8")
    w1, d1 = _window(qtbot)
    w2, d2 = _window(qtbot)
    assert d1.open(doc)
    w2.editor.setPlainText("mine")
    d2.choose_save_path = lambda suggested: str(doc)
    asked = []
    d2.ask_replace = lambda target: asked.append(target) or True
    assert not d2.save_as()
    assert "open in another Letterpress window" in w2.errors[-1]
    assert asked == []  # no "Replace?" first: the answer could not be acted on
    assert doc.read_text(encoding="utf-8") == "theirs\n"
    _close(w1)
    _close(w2)


@pytest.mark.slow
def test_a_file_held_by_another_process_is_not_edited_twice_and_its_crash_frees_it(qtbot, tmp_path):
    doc = tmp_path / "shared.md"
    doc.write_text("the other program's text\n", encoding="utf-8")
    holder = _spawn("hold", doc)
    try:
        _wait_for(holder, "HOLDING")
        window, docs = _window(qtbot)
        asked = []
        docs.ask_already_open = lambda name, where: asked.append(where) or "switch"
        assert not docs.open(doc)
        assert "another Letterpress program" in asked[0]
        assert (
            _wait_for(holder, "SWITCH") == f"SWITCH {os.path.realpath(doc)}"
        )  # the holder raised its window
        docs.ask_already_open = lambda name, where: "read-only"
        assert docs.open(doc) and docs.read_only
        _kill(holder)  # a crash: nobody cleans up the lock file, the kernel drops the lock
        docs.ask_already_open = lambda name, where: pytest.fail("a dead process still blocks the file")
        assert docs.open(doc) and not docs.read_only
        window.editor.insertPlainText("now mine: ")
        assert docs.save()
        assert doc.read_text(encoding="utf-8") == "now mine: the other program's text\n"
        _close(window)
    finally:
        _kill(holder)


# ------------------------------------------------------------------------------------------------------------
# 4. Recovery trusts locks, not PIDs; interrupted saves are cleaned up


def _offered_at_start(qtbot) -> tuple[object, list]:
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    offered = []
    window.services.recovery.ask = lambda d, i, n: offered.append(d) or "later"
    window.services.documents.ask_unsaved = lambda name: "discard"
    done = []
    window.services.recovery.pending = _wrap(window.services.recovery.pending, done)
    qtbot.waitUntil(lambda: bool(done), timeout=10_000)
    return window, offered


def _wrap(fn, done):
    def wrapped():
        result = fn()
        done.append(True)
        return result

    return wrapped


@pytest.mark.slow
def test_recovery_is_offered_although_the_dead_session_s_pid_belongs_to_a_live_process(qtbot, tmp_path):
    """After a reboot or inside a PID namespace the crashed app's PID is someone else's: here, this test's."""
    (tmp_path / "config" / "settings.toml").write_text(
        "[documents]\nautosave_seconds = 1\n", encoding="utf-8"
    )
    doc = tmp_path / "novel.md"
    doc.write_text("Saved.", encoding="utf-8")
    child = _spawn("autosave", doc)
    try:
        copy = Path(_wait_for(child, "AUTOSAVED").split(" ", 1)[1])
    finally:
        _kill(child)
    record = json.loads(copy.read_text(encoding="utf-8"))
    record["pid"] = os.getpid()  # a live, unrelated process
    copy.write_text(json.dumps(record), encoding="utf-8")
    window, offered = _offered_at_start(qtbot)
    assert [d.text for d in offered] == ["Saved. more words"]
    _close(window)


def test_a_live_session_s_copy_is_not_offered_whatever_its_pid(qtbot, tmp_path):
    from app.platform.locks import FileLock

    folder = tmp_path / "data" / "recovery"
    folder.mkdir(parents=True)
    (folder / "alive.json").write_text(
        json.dumps(
            {"version": 1, "pid": 999_999_999, "path": None, "saved_at": 1.0, "text": "still being typed"}
        )
    )
    lock = FileLock(folder / "alive.lock")
    assert lock.acquire()
    window, offered = _offered_at_start(qtbot)
    assert offered == []
    lock.release()
    _close(window)


@pytest.mark.slow
def test_a_kill_during_the_fsync_of_a_save_leaves_nothing_behind_at_the_next_start(qtbot, tmp_path):
    doc = tmp_path / "essay.md"
    doc.write_text("Saved.", encoding="utf-8")
    child = _spawn("hang-in-fsync", doc)
    try:
        temp = Path(_wait_for(child, "IN FSYNC").split(" ", 2)[2])
    finally:
        _kill(child)
    assert temp.exists() and temp.name.startswith(
        ".essay.md."
    )  # the kill left the temp in the writer's folder
    assert doc.read_text(encoding="utf-8") == "Saved."
    window, offered = _offered_at_start(qtbot)
    assert not temp.exists()
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".")) == []
    interrupted = [d for d in offered if d.kind == "interrupted save"]
    assert [(d.text, d.path) for d in interrupted] == [("Saved. more words", str(doc))]
    assert "interrupted" in interrupted[0].describe()
    _close(window)


def test_a_leftover_temp_equal_to_the_document_is_just_removed(tmp_path):
    from app.documents.recovery import clean_interrupted_saves, find_recovered

    folder = tmp_path / "recovery"
    folder.mkdir()
    doc = tmp_path / "a.md"
    doc.write_text("same", encoding="utf-8")
    temp = tmp_path / ".a.md.x1.tmp"
    temp.write_text("same", encoding="utf-8")
    (folder / "gone.saving.json").write_text(json.dumps({"temps": [{"temp": str(temp), "target": str(doc)}]}))
    assert clean_interrupted_saves(folder) == []
    assert not temp.exists() and not (folder / "gone.saving.json").exists() and find_recovered(folder) == []


def test_a_running_session_s_temp_files_are_left_alone(tmp_path):
    from app.documents.recovery import clean_interrupted_saves
    from app.platform.locks import FileLock, is_locked

    folder = tmp_path / "recovery"
    folder.mkdir()
    temp = tmp_path / ".a.md.x1.tmp"
    temp.write_text("being written", encoding="utf-8")
    (folder / "busy.saving.json").write_text(json.dumps({"temps": [{"temp": str(temp), "target": "x"}]}))
    lock = FileLock(folder / "busy.lock")
    assert lock.acquire() and is_locked(folder / "busy.lock")
    assert clean_interrupted_saves(folder) == [] and temp.exists()
    lock.release()


def test_leftovers_no_journal_knows_are_tidied_when_their_document_is_opened(qtbot, tmp_path):
    """A temp from an older version or a lost journal: kept as recovery if it holds other text. The `.tmp`
    name
    is also another program's, so it is removed only when it holds exactly the document (issue 22)."""
    from app.documents.recovery import find_recovered

    doc = tmp_path / "old.md"
    doc.write_text("on disk\n", encoding="utf-8")
    other = tmp_path / ".old.md.k3j9x_2a.tmp"
    other.write_text("newer words that never landed\n", encoding="utf-8")
    same = tmp_path / ".old.md.abcdefgh.tmp"
    same.write_text("on disk\n", encoding="utf-8")
    fresh = tmp_path / ".old.md.zzzzzzzz.tmp"  # maybe a save in progress right now: left alone
    fresh.write_text("being written", encoding="utf-8")
    unrelated = tmp_path / ".old.md.swp"  # not ours
    unrelated.write_text("vim", encoding="utf-8")
    for f in (other, same):
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    window, docs = _window(qtbot)
    assert docs.open(doc)
    assert other.exists() and not same.exists() and fresh.exists() and unrelated.exists()
    kept = [d for d in find_recovered(window.services.recovery.folder) if d.kind == "interrupted save"]
    assert [(d.text, d.path) for d in kept] == [("newer words that never landed\n", os.path.realpath(doc))]
    assert "interrupted" in window.statusBar().currentMessage()
    _close(window)


def test_two_names_of_one_hard_linked_file_are_one_document(qtbot, tmp_path):
    """A file with several hard links is one file under several names (saves update it in place, so every name
    sees the new text): a second window opening it by another name must get the same question."""
    doc = tmp_path / "chapter.md"
    doc.write_text("one file\n", encoding="utf-8")
    os.link(doc, tmp_path / "chapter-link.md")
    w1, d1 = _window(qtbot)
    w2, d2 = _window(qtbot)
    assert d1.open(doc)
    asked = []
    d2.ask_already_open = lambda name, where: asked.append(name) or "cancel"
    assert not d2.open(tmp_path / "chapter-link.md")
    assert asked == ["chapter-link.md"] and d2.path is None
    _close(w1)
    _close(w2)


def test_declining_to_replace_lets_go_of_the_file_at_once(qtbot, tmp_path):
    """Save As takes the file's lock before asking "Replace?"; a No must give it back, or the file would look
    open in this window to every other one."""
    doc = tmp_path / "existing.md"
    doc.write_text("kept\n", encoding="utf-8")
    w1, d1 = _window(qtbot)
    w2, d2 = _window(qtbot)
    w1.editor.setPlainText("mine")
    d1.choose_save_path = lambda suggested: str(doc)
    d1.ask_replace = lambda target: False
    assert not d1.save_as()
    assert doc.read_text(encoding="utf-8") == "kept\n" and d1.claim.lock is None
    d2.ask_already_open = lambda name, where: pytest.fail("the declined Save As still holds the file")
    assert d2.open(doc) and not d2.read_only
    w1.editor.document().setModified(False)
    _close(w1)
    _close(w2)
