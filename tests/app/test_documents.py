"""Documents: strict decoding, atomic saves that never damage the original, prompts before losing work."""

from __future__ import annotations

import codecs
import errno
import os
import stat
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMainWindow, QMenu, QPlainTextEdit

from app.documents.controller import (
    DocumentController,
    DocumentError,
    RecentFiles,
    TextFile,
    decode_text,
    editor_text,
    read_text_file,
    write_text_file,
)
from app.platform import atomic

MIXED = "Hello — 안녕하세요, 你好, こんにちは 👋🏽 שלום עולם مرحبا\u00a0!\n\tTabbed line\u2028soft break\n"


# ------------------------------------------------------------------------------------------------------------
# Reading


def test_utf8_round_trips_byte_for_byte(tmp_path):
    p = tmp_path / "a.md"
    p.write_bytes(MIXED.encode("utf-8"))
    doc = read_text_file(p)
    assert doc.text == MIXED and doc.encoding == "utf-8"
    write_text_file(p, doc)
    assert p.read_bytes() == MIXED.encode("utf-8")


@pytest.mark.parametrize(
    "raw, encoding",
    [
        ("\ufeffBOM text\n".encode("utf-8"), "utf-8-sig"),
        (codecs.BOM_UTF16_LE + "UTF-16 text é\n".encode("utf-16-le"), "utf-16-le"),
    ],
)
def test_byte_order_marks_are_detected_and_kept(tmp_path, raw, encoding):
    p = tmp_path / "bom.txt"
    p.write_bytes(raw)
    doc = read_text_file(p)
    assert doc.encoding == encoding and not doc.text.startswith("\ufeff")
    write_text_file(p, doc)
    assert p.read_bytes() == raw


def test_windows_newlines_are_kept_on_save(tmp_path):
    p = tmp_path / "crlf.txt"
    p.write_bytes(b"one\r\ntwo\r\n")
    doc = read_text_file(p)
    assert doc.text == "one\ntwo\n" and doc.newline == "\r\n"
    write_text_file(p, TextFile(doc.text + "three\n", doc.encoding, doc.newline))
    assert p.read_bytes() == b"one\r\ntwo\r\nthree\r\n"


def test_legacy_encoding_is_refused_with_advice(tmp_path):
    p = tmp_path / "latin.txt"
    p.write_bytes("Café crème".encode("cp1252"))
    with pytest.raises(DocumentError) as err:
        read_text_file(p)
    assert "UTF-8" in err.value.message and "save it as UTF-8" in err.value.message


@pytest.mark.parametrize("data", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", bytes(range(32)) * 10])
def test_binary_is_refused(tmp_path, data):
    p = tmp_path / "image.md"
    p.write_bytes(data)
    with pytest.raises(DocumentError, match="not a text file"):
        read_text_file(p)


def test_missing_file_and_folder_are_refused_clearly(tmp_path):
    with pytest.raises(DocumentError, match="does not exist"):
        read_text_file(tmp_path / "gone.md")
    with pytest.raises(DocumentError, match="folder"):
        read_text_file(tmp_path)


def test_empty_file_is_an_empty_document():
    assert decode_text(b"") == TextFile("", "utf-8", "\n")


# ------------------------------------------------------------------------------------------------------------
# Atomic save


def test_failure_mid_write_leaves_the_original_intact(tmp_path, monkeypatch):
    p = tmp_path / "novel.md"
    p.write_text("the original chapter\n", encoding="utf-8")

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full_disk)
    with pytest.raises(DocumentError) as err:
        write_text_file(p, TextFile("a new version that never lands\n"))
    assert "disk is full" in err.value.message and "unchanged" in err.value.message
    assert p.read_text(encoding="utf-8") == "the original chapter\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["novel.md"]  # no temp file left behind


def test_failure_at_rename_leaves_the_original_intact(tmp_path, monkeypatch):
    p = tmp_path / "novel.md"
    p.write_text("v1", encoding="utf-8")
    monkeypatch.setattr(
        atomic.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error"))
    )
    with pytest.raises(DocumentError, match="not saved"):
        write_text_file(p, TextFile("v2"))
    assert p.read_text(encoding="utf-8") == "v1"
    assert [x.name for x in tmp_path.iterdir()] == ["novel.md"]


def test_save_into_a_deleted_folder_says_so(tmp_path):
    with pytest.raises(DocumentError, match="no longer exists"):
        write_text_file(tmp_path / "gone" / "a.md", TextFile("x"))


def test_read_only_file_is_not_overwritten(tmp_path):
    p = tmp_path / "ro.md"
    p.write_text("locked", encoding="utf-8")
    p.chmod(stat.S_IRUSR)
    try:
        with pytest.raises(DocumentError, match=r"read-only.*Save As"):
            write_text_file(p, TextFile("changed"))
        assert p.read_text(encoding="utf-8") == "locked"
    finally:
        p.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_save_keeps_file_permissions(tmp_path):
    p = tmp_path / "a.md"
    p.write_text("x", encoding="utf-8")
    p.chmod(0o640)
    write_text_file(p, TextFile("y"))
    assert stat.S_IMODE(p.stat().st_mode) == 0o640


def test_recent_files_newest_first_without_duplicates(tmp_path):
    r = RecentFiles(tmp_path / "recent.json", limit=3)
    for name in ["a", "b", "a", "c", "d"]:
        r.add(tmp_path / name)
    assert [p.name for p in r.load()] == ["d", "c", "a"]
    (tmp_path / "recent.json").write_text("{broken", encoding="utf-8")
    assert r.load() == []


# ------------------------------------------------------------------------------------------------------------
# The controller behind the File menu


@pytest.fixture
def ui(qtbot, tmp_path):
    window = QMainWindow()
    window.menuBar().addMenu("&File").setObjectName("menuFile")
    editor = QPlainTextEdit()
    window.setCentralWidget(editor)
    qtbot.addWidget(window)
    ctrl = DocumentController(window, editor, recent_path=tmp_path / "recent.json")
    errors: list[str] = []
    ctrl.show_error = lambda title, text: errors.append(text)
    prompts: list[str] = []
    ctrl.ask_unsaved = lambda name: prompts.append(name) or "discard"  # also answers qtbot's closing
    ctrl.prompts = prompts  # type: ignore[attr-defined]
    ctrl.errors = errors  # type: ignore[attr-defined]
    return window, editor, ctrl


def test_file_menu_has_the_standard_actions(ui):
    window, _, ctrl = ui
    menu = window.findChild(QMenu, "menuFile")
    names = [a.objectName() for a in menu.actions() if a.objectName()]
    assert (
        names[:4] == ["actionNew", "actionOpen", "actionSave", "actionSaveAs"] and names[-1] == "actionQuit"
    )
    assert ctrl.action_save.shortcut().toString() == "Ctrl+S"
    assert ctrl.action_save_as.shortcut().toString() == "Ctrl+Shift+S"


def test_open_edit_save_and_modified_marker(ui, tmp_path, qtbot):
    window, editor, ctrl = ui
    p = tmp_path / "story.md"
    p.write_text(MIXED, encoding="utf-8")
    assert ctrl.open(p)
    assert editor_text(editor) == MIXED  # no-break space and line separator survive the editor
    assert window.windowTitle().startswith("story.md") and not window.isWindowModified()
    editor.moveCursor(editor.textCursor().MoveOperation.End)
    qtbot.keyClicks(editor, "more")
    assert window.isWindowModified()
    assert ctrl.save()
    assert p.read_text(encoding="utf-8") == MIXED + "more"
    assert not window.isWindowModified()
    assert ctrl.recent.load()[0] == p.resolve()


def test_failed_open_keeps_the_current_document(ui, tmp_path):
    _, editor, ctrl = ui
    editor.setPlainText("my work")
    (tmp_path / "bin.md").write_bytes(b"\x00\x01\x02")
    assert not ctrl.open(tmp_path / "bin.md")
    assert editor.toPlainText() == "my work"
    assert "not a text file" in ctrl.errors[0]


def test_failed_save_keeps_text_and_modified_state(ui, tmp_path, monkeypatch):
    window, editor, ctrl = ui
    p = tmp_path / "a.md"
    p.write_text("old", encoding="utf-8")
    ctrl.open(p)
    editor.setPlainText("new words")
    editor.document().setModified(True)
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    assert not ctrl.save()
    assert "disk is full" in ctrl.errors[0]
    assert window.isWindowModified() and editor.toPlainText() == "new words"
    assert p.read_text(encoding="utf-8") == "old"


def test_read_only_file_save_offers_save_as(ui, tmp_path):
    _, editor, ctrl = ui
    p = tmp_path / "ro.md"
    p.write_text("locked", encoding="utf-8")
    p.chmod(stat.S_IRUSR)
    try:
        ctrl.open(p)
        editor.insertPlainText("edit ")
        assert not ctrl.save()
        assert "read-only" in ctrl.errors[-1]
        ctrl.choose_save_path = lambda suggested: str(tmp_path / "copy")
        assert ctrl.save_as()
        assert (tmp_path / "copy.md").read_text(encoding="utf-8") == "edit locked"
        assert ctrl.path == tmp_path / "copy.md" and p.read_text(encoding="utf-8") == "locked"
    finally:
        p.chmod(0o600)


@pytest.mark.parametrize(
    "answer, closes, saved", [("save", True, True), ("discard", True, False), ("cancel", False, False)]
)
def test_closing_unsaved_work_asks_first(ui, tmp_path, answer, closes, saved, qtbot):
    window, editor, ctrl = ui
    window.show()
    p = tmp_path / "draft.md"
    p.write_text("", encoding="utf-8")
    ctrl.open(p)
    qtbot.keyClicks(editor, "unsaved words")
    asked = []
    ctrl.ask_unsaved = lambda name: asked.append(name) or answer
    discarded = []
    ctrl.discarded.connect(lambda: discarded.append(True))
    assert window.close() is closes
    assert asked == ["draft.md"]
    assert (p.read_text(encoding="utf-8") == "unsaved words") is saved
    assert discarded == ([True] if answer == "discard" else [])
    if not closes:
        assert window.isVisible() and editor.toPlainText() == "unsaved words"


def test_saved_work_closes_without_a_prompt(ui, qtbot):
    window, _, _ = ui
    window.show()
    assert window.close()


def test_new_asks_then_clears_and_untitled_save_asks_for_a_name(ui, tmp_path, qtbot):
    window, editor, ctrl = ui
    qtbot.keyClicks(editor, "scratch")
    ctrl.ask_unsaved = lambda name: "discard"
    assert ctrl.new()
    assert editor.toPlainText() == "" and window.windowTitle().startswith("Untitled")
    assert not editor.document().isUndoAvailable()  # undo never reaches into the previous document
    qtbot.keyClicks(editor, "fresh")
    ctrl.choose_save_path = lambda suggested: ""  # cancelled dialog
    assert not ctrl.save()
    ctrl.choose_save_path = lambda suggested: str(tmp_path / "fresh.txt")
    assert ctrl.save()
    assert (tmp_path / "fresh.txt").read_text(encoding="utf-8") == "fresh"


def test_recent_menu_reopens_and_forgets_missing_files(ui, tmp_path):
    _, editor, ctrl = ui
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("A", encoding="utf-8")
    b.write_text("B", encoding="utf-8")
    ctrl.open(a)
    ctrl.open(b)
    assert ctrl.prompts == []  # nothing was unsaved, so nothing was asked
    entries = [x for x in ctrl.recent_menu.actions() if x.toolTip().endswith(".md")]
    assert [x.text() for x in entries] == ["b.md", "a.md"]
    entries[1].trigger()
    assert editor.toPlainText() == "A"
    os.remove(b)
    assert not ctrl.open(b)
    assert Path(b).resolve() not in ctrl.recent.load()
