"""Issue 22, the siblings: odd file names, files that change twice, leftovers that are not ours, FIFOs and
devices, damaged recovery copies. Every window behaviour drives the real window (`app.create_window`) with
temporary user folders; dialogs are replaced by answers the test chooses (recorded)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import app
from app.documents.controller import editor_text
from tests.helpers.gui import fake_window

pytestmark = pytest.mark.usefixtures("user_dirs")


class Answers:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.errors: list[str] = []


def _window(qtbot):
    window = fake_window(qtbot)
    docs = window.services.documents
    answers = Answers()
    docs.show_error = lambda title, text: answers.errors.append(text)
    docs.ask_unsaved = lambda name: answers.asked.append("unsaved") or "discard"
    docs.ask_already_open = lambda name, where: answers.asked.append("already open") or "cancel"
    return window, docs, answers


@pytest.fixture
def win(qtbot):
    window, docs, answers = _window(qtbot)
    yield window, docs, answers
    docs.editor.document().setModified(False)
    window.close()


def _type(qtbot, window, text: str) -> None:
    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(window.editor, text)


def _status(window) -> str:
    return window.statusBar().currentMessage()


# ------------------------------------------------------------------------------------------------------------
# A file that changes again while the question about it is open


def test_save_mine_anyway_asks_again_when_the_file_changed_while_the_question_was_open(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "shared.md"
    p.write_text("original\n", encoding="utf-8")
    assert docs.open(p)
    _type(qtbot, window, " mine")
    p.write_text("first change by the sync client\n", encoding="utf-8")
    replies = iter(["keep", "cancel"])

    def ask(name, saving):
        answers.asked.append(f"changed saving={saving}")
        if len(answers.asked) == 1:  # while this question is open, the sync client writes again
            p.write_text("second change, newer still\n", encoding="utf-8")
        return next(replies)

    docs.ask_external_change = ask
    assert not docs.save()
    assert answers.asked == ["changed saving=True", "changed saving=True"]
    assert (
        p.read_text(encoding="utf-8") == "second change, newer still\n"
    )  # the newer text was never overwritten
    assert window.isWindowModified()


def test_keep_my_version_in_compare_asks_again_when_the_file_changed_meanwhile(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "shared.md"
    p.write_text("line one\n", encoding="utf-8")
    assert docs.open(p)
    _type(qtbot, window, " edited")
    p.write_text("line one\ntheirs\n", encoding="utf-8")
    shown: list[str] = []
    docs.ask_external_change = lambda name, saving: answers.asked.append("changed") or "compare"

    def compare(name, mine, theirs):
        shown.append(theirs)
        if len(shown) == 1:
            p.write_text("line one\ntheirs, revised while the Compare view was open\n", encoding="utf-8")
            return "keep"
        return "cancel"

    docs.show_compare = compare
    assert not docs.save()
    assert shown == ["line one\ntheirs\n", "line one\ntheirs, revised while the Compare view was open\n"]
    assert p.read_text(encoding="utf-8").endswith("revised while the Compare view was open\n")


def test_keep_mine_from_the_watcher_asks_again_about_a_newer_version(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "watched.md"
    p.write_text("start\n", encoding="utf-8")
    assert docs.open(p)
    _type(qtbot, window, " mine")

    def ask(name, saving):
        answers.asked.append(f"changed saving={saving}")
        if len(answers.asked) == 1:
            p.write_text("changed again during the question\n", encoding="utf-8")
            return "keep"
        return "cancel"

    docs.ask_external_change = ask
    p.write_text("changed once\n", encoding="utf-8")
    docs.check_disk()
    qtbot.waitUntil(lambda: len(answers.asked) == 2, timeout=5000)
    assert answers.asked == ["changed saving=False", "changed saving=False"]


# ------------------------------------------------------------------------------------------------------------
# Leftovers that Letterpress did not provably write are never deleted


def _old(*files: Path) -> None:
    for f in files:
        os.utime(f, (time.time() - 3600, time.time() - 3600))


def test_another_programs_binary_tmp_file_is_never_deleted(win, tmp_path):
    from app.documents.recovery import find_recovered

    window, docs, _answers = win
    doc = tmp_path / "doc.txt"
    doc.write_text("my document\n", encoding="utf-8")
    binary = tmp_path / ".doc.txt.abcdefgh.tmp"
    blob = bytes(range(256)) * 64
    binary.write_bytes(blob)
    _old(binary)
    assert docs.open(doc)
    assert binary.read_bytes() == blob
    assert [d for d in find_recovered(window.services.recovery.folder) if d.kind == "interrupted save"] == []


def test_a_legacy_tmp_with_other_text_is_offered_once_and_left_in_place(qtbot, tmp_path):
    from app.documents.recovery import find_recovered

    doc = tmp_path / "doc.txt"
    doc.write_text("on disk\n", encoding="utf-8")
    legacy = tmp_path / ".doc.txt.k3j9x_2a.tmp"
    legacy.write_text("words of an older Letterpress, or of another editor\n", encoding="utf-8")
    ours = tmp_path / ".doc.txt.q1w2e3r4.lptmp"
    ours.write_text("words of an interrupted save\n", encoding="utf-8")
    _old(legacy, ours)
    for _ in range(2):  # opened twice: one copy of each, not two
        window, docs, _answers = _window(qtbot)
        assert docs.open(doc)
        folder = window.services.recovery.folder
        docs.editor.document().setModified(False)
        window.close()
        docs.claim.release()
    kept = sorted(d.text for d in find_recovered(folder) if d.kind == "interrupted save")
    assert kept == ["words of an interrupted save\n", "words of an older Letterpress, or of another editor\n"]
    assert legacy.exists() and not ours.exists()


# ------------------------------------------------------------------------------------------------------------
# FIFOs, devices, files that are not files


def test_opening_a_fifo_or_dev_zero_is_refused_with_a_sentence(win, tmp_path):
    _, docs, answers = win
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert not docs.open(fifo)
    assert "named pipe" in answers.errors[-1]
    if Path("/dev/zero").exists():
        assert not docs.open("/dev/zero")
        assert "device" in answers.errors[-1]


def test_the_open_file_replaced_by_a_fifo_neither_freezes_the_window_nor_is_saved_onto(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "doc.md"
    p.write_text("text\n", encoding="utf-8")
    assert docs.open(p)
    _type(qtbot, window, " more")
    p.unlink()
    os.mkfifo(p)
    docs.check_disk()  # would block forever reading the FIFO to hash it
    assert "can no longer be read" in _status(window)
    assert not docs.save()
    assert "can no longer be read" in answers.errors[-1]
    assert p.is_fifo() and window.isWindowModified()


def test_save_as_onto_a_fifo_is_refused(win, qtbot, tmp_path):
    window, docs, answers = win
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    _type(qtbot, window, "draft")
    docs.choose_save_path = lambda suggested: str(fifo)
    docs.ask_replace = lambda target: True
    assert not docs.save_as()
    assert "named pipe" in answers.errors[-1] and fifo.is_fifo()


def test_fifos_in_the_recovery_folder_do_not_hang_the_start(qtbot, tmp_path):
    folder = tmp_path / "data" / "recovery"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "0123456789abcdef0123456789abcdef.json")
    os.mkfifo(folder / "fedcba9876543210fedcba9876543210.saving.json")
    (folder / "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.json").write_text(
        json.dumps({"version": 1, "pid": 0, "path": None, "saved_at": time.time(), "text": "still offered"})
    )
    offered: list[str] = []
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    docs = window.services.documents
    docs.ask_unsaved = lambda name: "discard"
    window.services.recovery.ask = lambda doc, i, n: offered.append(doc.text) or "later"
    window.services.recovery.offer(lambda doc: False)
    assert offered == ["still offered"]
    window.close()


# ------------------------------------------------------------------------------------------------------------
# Damaged recovery copies never break the offer of the others


def test_damaged_recovery_copies_do_not_hide_the_good_ones(qtbot, tmp_path):
    folder = tmp_path / "data" / "recovery"
    folder.mkdir(parents=True)
    now = time.time()

    def plant(name: str, body: bytes) -> None:
        (folder / f"{name * 32}.json").write_bytes(body)

    good = {"version": 1, "pid": 0, "path": None, "kind": "autosave"}
    plant("a", json.dumps({**good, "saved_at": float("nan"), "text": "nan time"}).encode())
    plant("b", json.dumps({**good, "saved_at": 1e300, "text": "far future"}).encode())
    plant("c", json.dumps({**good, "saved_at": now, "path": 12345, "text": "number path"}).encode())
    plant("d", json.dumps({**good, "saved_at": now, "text": None}).encode())
    full = json.dumps({**good, "saved_at": now, "text": "cut short in the middle of a sentence"}).encode()
    plant("e", full[:-12])
    plant("f", json.dumps({**good, "saved_at": now, "text": "re-encoded as UTF-16"}).encode("utf-16"))
    plant("9", json.dumps({**good, "saved_at": now - 10, "text": "a good copy"}).encode())
    offered: list[tuple[str, str, str]] = []
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    window.services.documents.ask_unsaved = lambda name: "discard"

    def ask(doc, i, n):
        offered.append((doc.text, doc.name, doc.describe()))  # describe() must not raise either
        return "later"

    window.services.recovery.ask = ask
    window.services.recovery.offer(lambda doc: False)
    texts = sorted(t for t, _, _ in offered)
    assert texts == sorted(
        [
            "nan time",
            "far future",
            "number path",
            "cut short in the middle of ",
            "re-encoded as UTF-16",
            "a good copy",
        ]
    )
    assert all(name == "Untitled" for _, name, _ in offered)
    assert any("damaged" in d for t, _, d in offered if t.startswith("cut short"))
    assert (folder / f"{'d' * 32}.json").exists()  # a copy without text is kept, not deleted
    window.close()


def test_a_restored_copy_says_text_not_none(qtbot, tmp_path):
    from app.documents.recovery import read_copy

    file = tmp_path / "x.json"
    file.write_text(json.dumps({"version": 1, "path": None, "saved_at": 0, "text": None}))
    assert read_copy(file) is None  # never "None" as the restored text


# ------------------------------------------------------------------------------------------------------------
# Odd file names


def test_a_250_byte_file_name_can_be_saved(win, qtbot, tmp_path):
    window, docs, answers = win
    name = "a" * 247 + ".md"
    assert len(name.encode()) == 250
    _type(qtbot, window, "long name")
    docs.choose_save_path = lambda suggested: str(tmp_path / name)
    assert docs.save_as(), answers.errors
    assert (tmp_path / name).read_text(encoding="utf-8") == "long name"
    _type(qtbot, window, " again")
    assert docs.save(), answers.errors
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]


NON_UTF8 = os.fsdecode(b"r\xe9sum\xe9.txt")


@pytest.mark.skipif(os.name != "posix", reason="file names are bytes only on POSIX")
def test_a_non_utf8_file_name_is_autosaved_and_watched(win, qtbot, tmp_path):
    from app.documents.recovery import read_copy

    window, docs, _answers = win
    p = tmp_path / NON_UTF8
    p.write_bytes(b"Curriculum vitae\n")
    assert docs.open(p)
    _type(qtbot, window, " updated")
    rec = window.services.recovery
    rec.autosave_now()
    rec.flush()
    assert rec.failure == ""
    copy = read_copy(rec.file)
    assert copy is not None and copy.path == str(p) and copy.text.endswith(" updated")
    # Watched although the system watcher cannot take the name: a change by another program is noticed.
    docs.editor.document().setModified(False)
    p.write_bytes(b"Rewritten by another program\n")
    qtbot.waitUntil(lambda: editor_text(window.editor) == "Rewritten by another program\n", timeout=10_000)


def test_a_crash_during_the_in_place_rewrite_of_a_hard_linked_file_says_the_file_may_be_damaged(
    qtbot, tmp_path
):
    """The backup of an in-place rewrite is the complete old version; the file may be torn on every link."""
    folder = tmp_path / "data" / "recovery"
    folder.mkdir(parents=True)
    doc = tmp_path / "linked.md"
    complete = "The whole chapter, every paragraph of it.\n" * 20
    doc.write_text(complete[:100], encoding="utf-8")  # the rewrite stopped a hundred characters in
    os.link(doc, tmp_path / "other-name.md")
    backup = tmp_path / ".linked.md.abcd1234.lpbackup"
    backup.write_text(complete, encoding="utf-8")
    (folder / f"{'b' * 32}.saving.json").write_text(
        json.dumps({"temps": [{"temp": str(backup), "target": str(doc)}]}), encoding="utf-8"
    )
    offered: list[tuple[str, str]] = []
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    window.services.documents.ask_unsaved = lambda name: "discard"
    window.services.recovery.ask = lambda d, i, n: offered.append((d.text, d.describe())) or "later"
    window.services.recovery.offer(lambda d: False)
    assert [t for t, _ in offered] == [complete]
    assert "complete previous version" in offered[0][1] and "may be damaged" in offered[0][1]
    assert "may be incomplete" not in offered[0][1]
    window.close()
