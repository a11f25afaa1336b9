"""Issue 22: the autosave loss window, session locks removed while a window runs, lock folders that cannot be
written, saves that must keep a file's owner (read-only folder), and a log that is private and names no
document."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.engine_cli import without_root_override
from tests.helpers.gui import fake_window

pytestmark = pytest.mark.usefixtures("user_dirs")
ROOT = Path(__file__).resolve().parents[2]


def _window(qtbot):
    window = fake_window(qtbot)
    return window, window.services.documents


def _type(qtbot, window, text: str) -> None:
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(window.editor, text)


def test_text_is_autosaved_soon_after_typing_stops_not_only_every_interval(qtbot, tmp_path):
    from app.documents.recovery import IDLE_MS, read_copy

    window, docs = _window(qtbot)
    rec = window.services.recovery
    rec.set_interval(600)  # the backstop timer alone would take ten minutes
    p = tmp_path / "draft.md"
    p.write_text("start\n", encoding="utf-8")
    assert docs.open(p)
    with qtbot.waitSignal(rec.autosaved, timeout=5000):
        typed_at = time.monotonic()
        _type(qtbot, window, " the last words before a crash")
    latency = time.monotonic() - typed_at
    rec.flush()
    copy = read_copy(rec.file)
    assert copy is not None and copy.text.endswith(" the last words before a crash")
    print(f"autosave after the last key: {latency * 1000:.0f} ms (idle wait {IDLE_MS} ms)")
    docs.editor.document().setModified(False)
    window.close()


def test_a_removed_session_lock_is_taken_again_and_a_second_start_offers_nothing(qtbot, tmp_path):
    from app.documents.recovery import RecoveryManager

    window, docs = _window(qtbot)
    rec = window.services.recovery
    _type(qtbot, window, "unsaved words of a running window")
    rec.autosave_now()
    rec.flush()
    (rec.folder / f"{rec.session}.lock").unlink()  # a clean-up tool, or a person
    second = RecoveryManager(rec.folder, lambda: None, interval_s=600)
    try:
        offered = second.pending()
        assert [d.text for d in offered] == ["unsaved words of a running window"]  # the window has not ticked
        rec.autosave_now()  # its next tick notices and takes its lock again
        rec.flush()
        assert second.pending() == []
        second.ask = lambda doc, i, n: "discard"  # a discard answered before that tick must not delete it now
        for doc in offered:
            assert not second.offer(lambda d: False)
            assert doc.file.exists() or rec.file.exists()
        assert rec.file.exists()
    finally:
        second.shutdown(keep=True)
    docs.editor.document().setModified(False)
    window.close()


def test_an_unwritable_lock_folder_is_said_not_silent(qtbot, tmp_path):
    window, docs = _window(qtbot)
    folder = docs.claim.folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the lock folder should be", encoding="utf-8")
    p = tmp_path / "doc.md"
    p.write_text("x\n", encoding="utf-8")
    assert docs.open(p)
    assert "not protected against a second window" in window.statusBar().currentMessage()
    window.close()


def test_the_log_is_private_and_names_no_document(qtbot, tmp_path):
    from app.platform.privacy import LOG_FILE, setup_logging

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / LOG_FILE).write_text("", encoding="utf-8")
    os.chmod(logs / LOG_FILE, 0o644)
    path = setup_logging(logs)
    assert path is not None and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    window, docs = _window(qtbot)
    secret = tmp_path / "Letter to my landlord.md"
    secret.write_text("Dear sir\n", encoding="utf-8")
    assert docs.open(secret)
    docs.show_error = lambda title, text: None
    os.chmod(secret, 0o444)  # read-only: the save fails and is logged
    _type(qtbot, window, " and more")
    assert not docs.save()
    logging.getLogger("app").warning("a path that names a document: /home/x/Unsent.md")
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = path.read_text(encoding="utf-8")
    assert "save failed" in text
    assert "landlord" not in text and "Unsent" not in text
    docs.editor.document().setModified(False)
    window.close()


# The start of a child process's script: the fake-engine window, errors recorded, no question waits on a box.
CHILD_WINDOW = r"""
import os, sys
from app import create_window
w = create_window(["--fake-engine"])
docs = w.services.documents
errors = []
docs.show_error = lambda title, text: errors.append(text)
docs.ask_unsaved = lambda name: "discard"
w.services.recovery.ask = lambda d, i, n: "later"
"""

CHILD = (
    CHILD_WINDOW
    + r"""
docs.choose_save_path = lambda suggested: ""
if not docs.open(sys.argv[1]):
    print(f"NOT OPENED {errors}", flush=True)
    sys.exit(1)
docs.editor.moveCursor(docs.editor.textCursor().MoveOperation.End)
docs.editor.insertPlainText(" saved by a writer who may write the file but not its folder")
print("SAVED" if docs.save() else f"FAILED {errors}", flush=True)
docs.editor.document().setModified(False)
"""
)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_writable_file_in_a_read_only_folder_is_saved_in_place(tmp_path):
    prefix = without_root_override()
    folder = tmp_path / "shared"
    folder.mkdir()
    doc = folder / "minutes.md"
    doc.write_text("Minutes.", encoding="utf-8")
    os.chmod(doc, 0o666)
    inode = doc.stat().st_ino
    os.chmod(folder, 0o555)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    try:
        out = subprocess.run(
            [*prefix, sys.executable, "-c", CHILD, str(doc)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.chmod(folder, 0o755)
    assert "SAVED" in out.stdout, out.stdout + out.stderr[-2000:]
    assert doc.read_text(encoding="utf-8").endswith("may write the file but not its folder")
    assert doc.stat().st_ino == inode and stat.S_IMODE(doc.stat().st_mode) == 0o666


@pytest.mark.parametrize("change", ["link made", "link removed"])
def test_a_hard_link_made_or_removed_after_open_still_meets_the_first_windows_lock(qtbot, tmp_path, change):
    doc = tmp_path / "shared.md"
    doc.write_text("one file\n", encoding="utf-8")
    other = tmp_path / "other-name.md"
    if change == "link removed":
        os.link(doc, other)
    first, first_docs = _window(qtbot)
    assert first_docs.open(doc)
    if change == "link made":
        os.link(doc, other)
        names = [doc, other]
    else:
        other.unlink()
        names = [doc]
    asked: list[str] = []
    second, second_docs = _window(qtbot)
    second_docs.ask_already_open = lambda name, where: asked.append(name) or "cancel"
    for name in names:
        assert not second_docs.open(name)
    assert asked == [n.name for n in names]
    _type(qtbot, first, " edited")
    assert first_docs.save()  # a save may give the file a new inode: the lock follows it
    assert not second_docs.open(doc)
    assert len(asked) == len(names) + 1
    for window, docs in ((first, first_docs), (second, second_docs)):
        docs.editor.document().setModified(False)
        window.close()
        docs.claim.release()


UNREADABLE_CHILD = (
    CHILD_WINDOW
    + r"""
assert docs.open(sys.argv[1])
docs.editor.insertPlainText("unsaved ")
os.chmod(sys.argv[1], 0)  # made unreadable by another program (or a permissions tool)
docs.check_disk()
print("STATUS", w.statusBar().currentMessage(), flush=True)
print("SAVED" if docs.save() else f"NOT SAVED {errors}", flush=True)
docs.editor.document().setModified(False)
"""
)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_file_made_unreadable_is_not_reported_as_deleted(tmp_path):
    prefix = without_root_override()
    doc = tmp_path / "private.md"
    doc.write_text("Mine.", encoding="utf-8")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [*prefix, sys.executable, "-c", UNREADABLE_CHILD, str(doc)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    os.chmod(doc, 0o644)
    status = next((line for line in out.stdout.splitlines() if line.startswith("STATUS")), "")
    assert "can no longer be read" in status and "deleted" not in status, out.stdout + out.stderr[-2000:]
    assert "NOT SAVED" in out.stdout and doc.read_text(encoding="utf-8") == "Mine."
