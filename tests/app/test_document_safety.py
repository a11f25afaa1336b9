"""Documents in the situations where editors lose words: Save As names, changes made by other programs, a
second window on one file, links, exact line endings and encodings, file modes. Every test drives the real
window (`app.create_window`) with temporary user folders; dialogs are replaced by answers the test chooses."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import pytest
from PySide6.QtWidgets import QLabel, QPlainTextEdit

import app
from app.documents.controller import editor_text
from tests.helpers.gui import fake_window

pytestmark = pytest.mark.usefixtures("user_dirs")


class Answers:
    """What the writer answers to each question the window asks; every question is recorded."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.replace = False
        self.save_path = ""
        self.errors: list[str] = []


def _window(qtbot, argv: list[str] | None = None):
    window = fake_window(qtbot, argv or [])
    docs = window.services.documents
    answers = Answers()
    docs.show_error = lambda title, text: answers.errors.append(text)
    docs.ask_unsaved = lambda name: answers.asked.append(("unsaved", name)) or "discard"
    docs.ask_replace = lambda target: answers.asked.append(("replace", str(target))) or answers.replace
    docs.choose_save_path = lambda suggested: (
        answers.asked.append(("save as", suggested)) or answers.save_path
    )
    window.answers = answers
    return window, docs, answers


@pytest.fixture
def win(qtbot):
    window, docs, answers = _window(qtbot)
    yield window, docs, answers
    docs.editor.document().setModified(False)
    window.close()


def _type(qtbot, window, text: str) -> None:
    """Type at the end of the document (Return for each newline: QTest has no key for "\\n")."""
    from PySide6.QtCore import Qt

    window.editor.moveCursor(window.editor.textCursor().MoveOperation.End)
    for i, part in enumerate(text.split("\n")):
        if i:
            qtbot.keyClick(window.editor, Qt.Key.Key_Return)
        if part:
            qtbot.keyClicks(window.editor, part)


# ------------------------------------------------------------------------------------------------------------
# 1. Save As never replaces a file the writer did not choose


def test_save_as_asks_before_replacing_the_file_the_extension_points_to(win, qtbot, tmp_path):
    window, docs, answers = win
    existing = tmp_path / "notes.md"
    existing.write_text("the notes I keep\n", encoding="utf-8")
    _type(qtbot, window, "a new draft")
    answers.save_path = str(tmp_path / "notes")  # the dialog checked "notes"; ".md" is added afterwards
    answers.replace = False
    assert not docs.save_as()
    assert ("replace", str(existing)) in answers.asked
    assert existing.read_text(encoding="utf-8") == "the notes I keep\n"
    assert window.isWindowModified() and docs.path is None
    answers.replace = True
    assert docs.save_as()
    assert existing.read_text(encoding="utf-8") == "a new draft" and docs.path == existing


def test_save_as_to_a_new_name_asks_nothing_and_saving_again_asks_nothing(win, qtbot, tmp_path):
    window, docs, answers = win
    _type(qtbot, window, "fresh")
    answers.save_path = str(tmp_path / "fresh")
    assert docs.save_as()
    assert (tmp_path / "fresh.md").read_text(encoding="utf-8") == "fresh"
    answers.save_path = str(tmp_path / "fresh.md")  # Save As onto the document's own file is no replacement
    _type(qtbot, window, " again")
    assert docs.save_as()
    assert [kind for kind, _ in answers.asked] == ["save as", "save as"]


def test_the_save_dialog_adds_the_extension_before_it_checks(win):
    """The real dialog (not replaced): its default suffix is md and its own overwrite check is off."""
    from PySide6.QtWidgets import QFileDialog

    _window, docs, _ = win
    seen = {}

    def fake_exec(self):
        seen["suffix"] = self.defaultSuffix()
        seen["no confirm"] = self.testOption(QFileDialog.Option.DontConfirmOverwrite)
        return QFileDialog.DialogCode.Rejected

    original = QFileDialog.exec
    QFileDialog.exec = fake_exec
    try:
        from app.documents.dialogs import choose_save_path

        assert choose_save_path(docs.window, "Untitled.md") == ""
    finally:
        QFileDialog.exec = original
    assert seen == {"suffix": "md", "no confirm": True}


# ------------------------------------------------------------------------------------------------------------
# 7. Round trips are exact


ROUND_TRIPS = {
    "mixed CRLF and LF": b"one\r\ntwo\nthree\r\nfour",
    "LF with one stray CR": b"first\nsecond\rstill second?\nthird\n",
    "old Mac CR only": b"a\rb\rc\r",
    "line and paragraph separators": "soft\u2028break\u2029next paragraph\nend\n".encode("utf-8"),
    "UTF-16BE with BOM": codecs.BOM_UTF16_BE + "Grüße\r\nСлава\n👋\n".encode("utf-16-be"),
    "UTF-16LE with BOM": codecs.BOM_UTF16_LE + "Grüße\n".encode("utf-16-le"),
    "UTF-32BE with BOM": codecs.BOM_UTF32_BE + "日本語\r\n".encode("utf-32-be"),
    "UTF-32LE with BOM": codecs.BOM_UTF32_LE + "日本語\n".encode("utf-32-le"),
    "UTF-8 with BOM": codecs.BOM_UTF8 + b"bom\r\n",
    "vertical tabs and form feeds": b"a\vb\vc\v\fpage two\f\n",
    "BOM-like character inside": "x\ufeffy\n".encode("utf-8"),
    "no final newline": b"last line",
    "empty": b"",
}


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_open_and_save_without_an_edit_is_byte_identical(win, tmp_path, name):
    _, docs, answers = win
    data = ROUND_TRIPS[name]
    p = tmp_path / "doc.txt"
    p.write_bytes(data)
    assert docs.open(p), answers.errors
    assert docs.save()
    assert p.read_bytes() == data


def test_after_an_edit_untouched_lines_keep_their_endings_and_new_lines_take_the_dominant_one(win, tmp_path):
    from PySide6.QtGui import QTextCursor

    window, docs, _ = win
    p = tmp_path / "mixed.txt"
    p.write_bytes(b"one\r\ntwo\nthree\r\nfour\r\nfive\r")
    assert docs.open(p)
    doc = window.editor.document()
    c = QTextCursor(doc.findBlockByNumber(1))
    c.movePosition(QTextCursor.MoveOperation.EndOfBlock)
    c.insertText("!")  # "two" edited in place: keeps its LF
    c = QTextCursor(doc.findBlockByNumber(2))
    c.movePosition(QTextCursor.MoveOperation.EndOfBlock)
    c.insertText("\nnew line")  # a new line: CRLF, the file's dominant ending
    assert docs.save()
    assert p.read_bytes() == b"one\r\ntwo!\nthree\r\nnew line\r\nfour\r\nfive\r"
    c = QTextCursor(doc.findBlockByNumber(0))
    c.insertText("0 ")
    assert docs.save()  # a second save keeps the endings of the first
    assert p.read_bytes() == b"0 one\r\ntwo!\nthree\r\nnew line\r\nfour\r\nfive\r"


def test_a_lone_cr_is_not_taken_as_the_file_s_newline(tmp_path):
    from app.documents.controller import read_text_file

    p = tmp_path / "stray.txt"
    p.write_bytes(b"a\nb\rc\nd\n")
    assert read_text_file(p).newline == "\n"


# ------------------------------------------------------------------------------------------------------------
# 6. Links are respected; new files get the umask's mode, existing ones keep theirs


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
def test_saving_through_a_symlink_writes_the_target_and_keeps_the_link(win, qtbot, tmp_path):
    window, docs, _ = win
    real_dir = tmp_path / "synced"
    real_dir.mkdir()
    target = real_dir / "book.md"
    target.write_text("chapter one\n", encoding="utf-8")
    link = tmp_path / "book-link.md"
    link.symlink_to(target)
    assert docs.open(link)
    _type(qtbot, window, "chapter two\n")
    assert docs.save()
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text(encoding="utf-8") == "chapter one\nchapter two\n"
    assert sorted(x.name for x in real_dir.iterdir()) == ["book.md"]  # the temp file lived next to the target
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".")) == []


@pytest.mark.skipif(not hasattr(os, "link"), reason="hard links")
def test_a_hard_linked_file_is_updated_in_place_so_every_name_sees_the_new_text(win, qtbot, tmp_path):
    window, docs, _ = win
    a = tmp_path / "a.md"
    a.write_text("shared\n", encoding="utf-8")
    b = tmp_path / "b.md"
    os.link(a, b)
    inode = a.stat().st_ino
    assert docs.open(a)
    _type(qtbot, window, "more")
    assert docs.save()
    assert b.read_text(encoding="utf-8") == "shared\nmore" and a.stat().st_ino == inode
    assert a.stat().st_nlink == 2
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.endswith(".md") or x.name.startswith(".")) == [
        "a.md",
        "b.md",
    ]  # the backup copy is gone once the new text is in place


def test_a_failed_in_place_write_puts_the_old_text_back(win, qtbot, tmp_path, monkeypatch):
    from app.platform import atomic

    window, docs, answers = win
    a = tmp_path / "a.md"
    a.write_text("precious\n", encoding="utf-8")
    os.link(a, tmp_path / "b.md")
    assert docs.open(a)
    _type(qtbot, window, "new")
    calls = []
    real_rewrite = atomic._rewrite

    def failing_once(target, data):
        calls.append(data)
        if len(calls) == 1:
            with open(target, "r+b") as fh:
                fh.write(b"half")  # a partial write, then the disk fills up
            raise OSError(28, "No space left on device")
        real_rewrite(target, data)

    monkeypatch.setattr(atomic, "_rewrite", failing_once)
    assert not docs.save()
    assert "disk is full" in answers.errors[-1]
    assert (tmp_path / "b.md").read_text(encoding="utf-8") == "precious\n"
    assert window.isWindowModified()
    assert not [x for x in tmp_path.iterdir() if x.name.endswith(".backup")]


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_new_documents_get_the_umask_default_mode_and_existing_ones_keep_theirs(win, qtbot, tmp_path):
    window, docs, answers = win
    old = os.umask(0o022)
    try:
        _type(qtbot, window, "new file")
        answers.save_path = str(tmp_path / "new.md")
        assert docs.save_as()
        assert stat.S_IMODE((tmp_path / "new.md").stat().st_mode) == 0o644
        kept = tmp_path / "kept.md"
        kept.write_text("x", encoding="utf-8")
        kept.chmod(0o604)
        assert docs.open(kept)
        _type(qtbot, window, "y")
        assert docs.save()
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604
    finally:
        os.umask(old)


# ------------------------------------------------------------------------------------------------------------
# 5. Autosave failures are visible and persistent


def test_a_failing_autosave_shows_a_lasting_warning_and_save_still_works(win, qtbot, tmp_path, monkeypatch):
    import errno

    from app.documents import recovery as recovery_module

    window, docs, answers = win
    rec = window.services.recovery
    real_write = recovery_module.atomic_write_bytes

    def full_disk(path, data, **kw):
        if Path(path).parent == rec.folder:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, data, **kw)

    monkeypatch.setattr(recovery_module, "atomic_write_bytes", full_disk)
    warning = window.findChild(QLabel, "autosaveWarning")
    _type(qtbot, window, "words at risk")
    rec.autosave_now()
    qtbot.waitUntil(lambda: not warning.isHidden(), timeout=10_000)
    assert "disk is full" in warning.text() and "save your document elsewhere" in warning.text()
    window.statusBar().showMessage("something else", 100)  # other messages do not hide it
    rec.autosave_now()  # tried again (same text) and still failing: still shown
    rec.flush()
    qtbot.wait(10)
    assert not warning.isHidden()
    answers.save_path = str(tmp_path / "kept.md")
    assert docs.save_as()  # Save writes the document itself, elsewhere: it still works
    assert (tmp_path / "kept.md").read_text(encoding="utf-8") == "words at risk"
    assert not warning.isHidden()  # autosave has not worked yet
    monkeypatch.setattr(recovery_module, "atomic_write_bytes", real_write)
    _type(qtbot, window, " and more")
    rec.autosave_now()
    qtbot.waitUntil(warning.isHidden, timeout=10_000)
    assert rec.failure == ""


# ------------------------------------------------------------------------------------------------------------
# 2. External changes are noticed


def _open_and_edit(qtbot, window, docs, p: Path, typed: str = " mine") -> None:
    assert docs.open(p)
    _type(qtbot, window, typed)


def _asker(answers: Answers, answer: str):
    return lambda name, saving: answers.asked.append(("changed", f"{name} saving={saving}")) or answer


def test_a_change_on_disk_is_never_overwritten_silently_by_save(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "shared.md"
    p.write_text("original\n", encoding="utf-8")
    _open_and_edit(qtbot, window, docs, p)
    p.write_text("written by the sync client\n", encoding="utf-8")  # same moment as far as mtime can tell
    docs.ask_external_change = _asker(answers, "cancel")
    assert not docs.save()
    assert answers.asked[-1] == ("changed", "shared.md saving=True")
    assert p.read_text(encoding="utf-8") == "written by the sync client\n" and window.isWindowModified()
    docs.ask_external_change = _asker(answers, "keep")
    assert docs.save()  # "save mine anyway"
    assert p.read_text(encoding="utf-8") == "original\n mine"
    docs.ask_external_change = lambda *a: pytest.fail("asked again although nothing changed since the save")
    _type(qtbot, window, "!")
    assert docs.save()


def test_compare_shows_both_versions_and_reload_keeps_the_unsaved_edits_as_a_recovery_copy(
    win, qtbot, tmp_path
):
    from app.documents.recovery import find_recovered

    window, docs, answers = win
    p = tmp_path / "shared.md"
    p.write_text("line one\n", encoding="utf-8")
    _open_and_edit(qtbot, window, docs, p, " and my edit")
    p.write_text("line one\ntheir new line\n", encoding="utf-8")
    docs.ask_external_change = _asker(answers, "compare")
    compared = []
    docs.show_compare = lambda name, mine, theirs: compared.append((name, mine, theirs)) or "reload"
    assert not docs.save()
    assert compared == [("shared.md", "line one\n and my edit", "line one\ntheir new line\n")]
    assert editor_text(window.editor) == "line one\ntheir new line\n" and not window.isWindowModified()
    kept = [d for d in find_recovered(window.services.recovery.folder) if d.kind == "kept before reload"]
    assert [(d.text, d.path) for d in kept] == [("line one\n and my edit", str(p))]


def test_the_compare_dialog_shows_a_diff_and_returns_the_choice(win):
    from PySide6.QtWidgets import QPushButton

    from app.documents.external_change import CompareDialog

    window, _, _ = win
    dialog = CompareDialog(window, "a.md", "same\nmine\n", "same\ntheirs\n")
    view = dialog.findChild(QPlainTextEdit, "compareView").toPlainText()
    assert "-theirs" in view and "+mine" in view and " same" in view
    keep = next(b for b in dialog.findChildren(QPushButton) if b.text() == "Keep my version")
    keep.click()
    assert dialog.choice == "keep"


def test_the_watcher_reloads_an_unmodified_document_and_asks_when_there_are_edits(win, qtbot, tmp_path):
    window, docs, answers = win
    p = tmp_path / "live.md"
    p.write_text("v1\n", encoding="utf-8")
    assert docs.open(p)
    with qtbot.waitSignal(docs.externalChange, timeout=10_000) as got:
        p.write_text("v2 from git\n", encoding="utf-8")
    assert got.args == ["reloaded"] and editor_text(window.editor) == "v2 from git\n"
    _type(qtbot, window, "typed")
    docs.ask_external_change = _asker(answers, "keep")
    with qtbot.waitSignal(docs.externalChange, timeout=10_000) as got:
        tmp = tmp_path / "other-editor.tmp"
        tmp.write_text("v3 from another editor\n", encoding="utf-8")
        os.replace(tmp, p)  # an atomic replace, like most editors save
    assert got.args == ["kept"] and answers.asked[-1] == ("changed", "live.md saving=False")
    assert editor_text(window.editor) == "v2 from git\ntyped"
    docs.ask_external_change = lambda *a: pytest.fail("asked twice about the same change")
    assert docs.save() and p.read_text(encoding="utf-8") == "v2 from git\ntyped"


def test_a_deleted_file_is_reported_and_save_recreates_it(win, qtbot, tmp_path):
    window, docs, _ = win
    p = tmp_path / "gone.md"
    p.write_text("still wanted\n", encoding="utf-8")
    assert docs.open(p)
    with qtbot.waitSignal(docs.externalChange, timeout=10_000) as got:
        p.unlink()
    assert got.args == ["deleted"]
    assert window.isWindowModified()  # closing now asks before the only copy goes
    assert (
        "deleted" in window.statusBar().currentMessage()
        and "Save recreates" in window.statusBar().currentMessage()
    )
    assert docs.save()
    assert p.read_text(encoding="utf-8") == "still wanted\n"


def test_a_touch_without_a_content_change_asks_nothing(win, qtbot, tmp_path):
    window, docs, _ = win
    p = tmp_path / "touched.md"
    p.write_text("same bytes\n", encoding="utf-8")
    _open_and_edit(qtbot, window, docs, p)
    os.utime(p, ns=(1, 1))
    docs.ask_external_change = lambda *a: pytest.fail("a touch is not a change")
    assert docs.save()


def test_a_change_the_writer_already_answered_is_not_asked_again_on_every_folder_event(win, qtbot, tmp_path):
    """The watcher also fires for any new file in the folder (swap files, sync clients, git). A change the
    writer cancelled, or one that could not be reloaded, must not pop its question up again for each of them,
    while a new change is still asked about and Save still refuses to overwrite either silently."""
    window, docs, answers = win
    p = tmp_path / "watched.md"
    p.write_text("v1\n", encoding="utf-8")
    _open_and_edit(qtbot, window, docs, p)
    docs.ask_external_change = _asker(answers, "cancel")
    p.write_text("v2 from a sync client\n", encoding="utf-8")
    docs.check_disk()  # what the watcher does when it sees the change
    assert answers.asked[-1] == ("changed", "watched.md saving=False")
    asked = len(answers.asked)
    (tmp_path / ".watched.md.swp").write_text("x", encoding="utf-8")
    docs.check_disk()  # another file appeared in the folder: nothing new about the document
    assert len(answers.asked) == asked
    p.write_text("v3 from a sync client\n", encoding="utf-8")
    docs.check_disk()
    assert len(answers.asked) == asked + 1  # a new change is asked about
    assert not docs.save()  # cancel: the save is not done either
    assert answers.asked[-1] == ("changed", "watched.md saving=True")
    assert p.read_text(encoding="utf-8") == "v3 from a sync client\n"

    # An unmodified document whose file became unreadable is reported once, not on every folder event.
    docs.editor.document().setModified(False)
    p.write_text("clean\n", encoding="utf-8")
    docs.check_disk()
    assert editor_text(window.editor) == "clean\n"
    p.write_bytes(b"bin\x00ary\n")
    docs.check_disk()
    assert len(answers.errors) == 1 and "binary" in answers.errors[0]
    (tmp_path / "another-new-file").write_text("y", encoding="utf-8")
    docs.check_disk()
    assert len(answers.errors) == 1
    asked = len(answers.asked)
    assert not docs.save()  # still never overwritten without asking
    assert len(answers.asked) == asked + 1 and p.read_bytes() == b"bin\x00ary\n"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file to another owner needs root"
)
def test_saving_keeps_the_file_s_owner_and_group(win, qtbot, tmp_path):
    """The atomic save writes a new file and renames it over the old one; that new file must get the old owner
    and group back (sudo editing a user's file, a shared project folder's group), as it gets the old mode."""
    window, docs, answers = win
    p = tmp_path / "someone-else-s.md"
    p.write_text("theirs\n", encoding="utf-8")
    os.chown(p, 1234, 4321)
    p.chmod(0o640)
    assert docs.open(p)
    _type(qtbot, window, "edited")
    assert docs.save(), answers.errors
    st = p.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 4321, 0o640)
    assert p.read_text(encoding="utf-8") == "theirs\nedited"


QT_ALTERED = {
    # Qt's text document uses U+FDD0/U+FDD1 as frame markers (they become line breaks) and drops a leading
    # U+FEFF: what the editor holds is not what the file says, so a save without an edit must not use it.
    "frame-marker noncharacters": "a\ufdd0b\ufdd1c\r\n".encode("utf-8"),
    "a second BOM after the BOM": codecs.BOM_UTF8 + "\ufeffx\n".encode("utf-8"),
    "UTF-16 text starting with U+FEFF": codecs.BOM_UTF16_LE + "\ufeffy".encode("utf-16-le"),
}


@pytest.mark.parametrize("name", QT_ALTERED)
def test_characters_the_editor_cannot_hold_survive_a_save_without_an_edit_and_the_writer_is_told(
    win, qtbot, tmp_path, name
):
    window, docs, answers = win
    data = QT_ALTERED[name]
    p = tmp_path / "odd.txt"
    p.write_bytes(data)
    with qtbot.waitSignal(docs.message, timeout=5000, check_params_cb=lambda m: "cannot show" in m) as got:
        assert docs.open(p), answers.errors
    assert "odd.txt" in got.args[0]
    assert docs.save()
    assert p.read_bytes() == data
    _type(qtbot, window, "!")  # after an edit the editor's version is what is saved (the writer was told)
    assert docs.save()
    assert p.read_bytes().endswith("!".encode(docs.encoding.removesuffix("-sig")))


def test_recovered_text_is_what_a_save_without_an_edit_writes(win, tmp_path):
    """Guard for the rule above: only the file's own text may be swapped back in; recovered text is the
    writer's."""
    _window, docs, answers = win
    p = tmp_path / "crashed.md"
    p.write_bytes(b"on disk\r\n")
    docs.restore("on disk\nrecovered words", str(p))
    assert docs.save(), answers.errors
    assert p.read_bytes() == b"on disk\r\nrecovered words"


def test_a_link_whose_target_folder_is_missing_says_which_folder(win, qtbot, tmp_path):
    """Saving writes the link's target: a failure must name the target's folder, not say that the folder the
    writer is looking at (which exists) "no longer exists"."""
    window, docs, answers = win
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "gone" / "target.md")
    _type(qtbot, window, "words")
    answers.save_path = str(link)
    assert not docs.save_as()
    assert answers.errors and str(tmp_path / "gone") in answers.errors[-1]
    assert f"the folder {tmp_path} " not in answers.errors[-1]
    assert link.is_symlink() and editor_text(window.editor) == "words"


def test_a_file_changed_on_disk_after_its_crash_copy_was_made_is_not_overwritten_silently(
    win, qtbot, tmp_path
):
    """The app crashed with unsaved edits; then another program (a sync client, another editor) changed the
    file. Restoring the crash copy and saving must ask first, like any other change made on disk."""
    _window, docs, answers = win
    p = tmp_path / "synced.md"
    p.write_text("edited elsewhere after the crash\n", encoding="utf-8")
    copy_time = p.stat().st_mtime - 60  # the autosave was written a minute before the file changed
    messages: list[str] = []
    docs.message.connect(messages.append)
    docs.restore("my recovered words\n", str(p), saved_at=copy_time)
    assert any("changed on disk after" in m for m in messages)
    docs.ask_external_change = _asker(answers, "cancel")
    assert not docs.save()
    assert answers.asked[-1] == ("changed", "synced.md saving=True")
    assert p.read_text(encoding="utf-8") == "edited elsewhere after the crash\n"
    docs.ask_external_change = _asker(answers, "keep")
    assert docs.save() and p.read_text(encoding="utf-8") == "my recovered words\n"

    # A copy newer than the file (the usual case: saved, typed on, crashed) asks nothing.
    q = tmp_path / "plain.md"
    q.write_text("saved before the crash\n", encoding="utf-8")
    docs.ask_external_change = lambda *a: pytest.fail("nothing changed on disk after the copy")
    docs.restore("saved before the crash\ntyped after\n", str(q), saved_at=q.stat().st_mtime + 5)
    assert docs.save() and q.read_text(encoding="utf-8") == "saved before the crash\ntyped after\n"


def test_the_start_up_offer_keeps_the_changed_on_disk_warning_in_view(qtbot, tmp_path):
    """Through the real start-up offer: a crash copy older than the file is restored with the warning visible
    (not replaced by "Restored unsaved text"), and Save asks."""
    import json
    import time

    from app.config.settings import recovery_dir

    p = tmp_path / "later.md"
    p.write_text("changed after the crash\n", encoding="utf-8")
    folder = recovery_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deadbeefdeadbeefdeadbeefdeadbeef.json").write_text(
        json.dumps(
            {
                "version": 1,
                "pid": 999999,
                "path": str(p),
                "saved_at": time.time() - 3600,
                "kind": "autosave",
                "text": "my words before the crash\n",
            }
        ),
        encoding="utf-8",
    )
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    docs = window.services.documents
    window.services.recovery.ask = lambda doc, i, n: "restore"
    shown: list[str] = []
    window.statusBar().messageChanged.connect(lambda m: shown.append(m))
    qtbot.waitUntil(lambda: docs.is_modified(), timeout=10_000)
    assert editor_text(window.editor) == "my words before the crash\n"
    assert any("Restored unsaved text" in m and "changed on disk after" in m for m in shown), shown
    asked: list[bool] = []
    docs.ask_external_change = lambda name, saving: asked.append(saving) or "cancel"
    assert not docs.save() and asked == [True]
    assert p.read_text(encoding="utf-8") == "changed after the crash\n"
    docs.editor.document().setModified(False)
    window.close()
