"""Issue 22, long lines shown in display blocks: an over-long line is cut into ~4 K blocks for the view only,
and everything the writer's text goes to (the file, undo/redo, find/replace, the clipboard, the assistant)
sees the line exactly as typed. Through the real window; `tests/helpers/longline_bench.py` measures the speed.
"""

from __future__ import annotations

import random

import pytest
from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication

import app
from app.documents.controller import editor_text
from app.ui import display_breaks
from engine.fake import FakeEngine
from tests.helpers.gui import build_window, wait_ready
from tests.helpers.longline_bench import one_line

pytestmark = pytest.mark.usefixtures("user_dirs")

SIZE = 150_000  # above the 64 K where a line is over-long; small enough to stay quick
CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.fixture
def win(qtbot):
    window = app.create_window(["--fake-engine"])
    qtbot.addWidget(window)
    window.show()
    docs = window.services.documents
    docs.show_error = lambda title, text: pytest.fail(text)
    docs.ask_unsaved = lambda name: "discard"
    window.services.recovery.ask = lambda doc, i, n: "later"
    yield window, docs
    docs.editor.document().setModified(False)
    window.close()


def _open(win, tmp_path, text: str):
    window, docs = win
    path = tmp_path / "long.txt"
    path.write_bytes(text.encode("utf-8"))
    assert docs.open(path)
    doc = window.editor.document()
    assert doc.blockCount() > SIZE // 8_192, "the long line is shown in display blocks"
    assert not doc.isModified() and not doc.isUndoAvailable()
    return window, docs, path


def _breaks(window) -> list[int]:
    return display_breaks.break_positions(window.editor.document())


def _put(window, pos: int, anchor: int | None = None) -> None:
    cursor = window.editor.textCursor()
    cursor.setPosition(pos if anchor is None else anchor)
    if anchor is not None:
        cursor.setPosition(pos, QTextCursor.MoveMode.KeepAnchor)
    window.editor.setTextCursor(cursor)


def _saved(docs, path) -> str:
    assert docs.save()
    return path.read_bytes().decode("utf-8")


def test_opened_typed_saved_undone_and_redone_the_line_is_exact(win, qtbot, tmp_path):
    original = "é " + one_line(SIZE) + " end\r\n"
    window, docs, path = _open(win, tmp_path, original)
    assert editor_text(window.editor) == original.replace("\r\n", "\n")
    at = _breaks(window)[3]
    _put(window, at)
    qtbot.keyClicks(window.editor, "xy")
    _put(window, at + 3)  # just after the break
    qtbot.keyClick(window.editor, Qt.Key.Key_Q)
    typed = original[:at] + "xy" + original[at] + "q" + original[at + 1 :]
    assert _saved(docs, path) == typed
    for _ in "xyq":  # in a document with display breaks each typed key is its own undo step
        qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)
    assert _saved(docs, path) == original
    for _ in "xyq":
        qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL | Qt.KeyboardModifier.ShiftModifier)
    assert _saved(docs, path) == typed


@pytest.mark.parametrize("where", ["before", "after", "inside"])
def test_enter_at_a_display_break_is_the_writers_newline_also_after_the_break_is_deleted(
    win, qtbot, tmp_path, where
):
    original = one_line(SIZE)
    window, docs, path = _open(win, tmp_path, original)
    at = _breaks(window)[5]
    pos = {"before": at, "after": at + 1, "inside": at + 40}[where]
    _put(window, pos)
    qtbot.keyClick(window.editor, Qt.Key.Key_Return)
    with_newline = original[:pos] + "\n" + original[pos:]
    assert editor_text(window.editor) == with_newline
    assert _saved(docs, path) == with_newline
    # Deleting the display break next to it deletes its space, and the writer's newline stays a newline
    # (Qt's own Enter copied the break's mark onto the new line: this saved the newline as a space).
    gone = at + 1 if where == "before" else at
    _put(window, gone + 1)
    qtbot.keyClick(window.editor, Qt.Key.Key_Backspace)
    expected = with_newline[:gone] + with_newline[gone + 1 :]
    assert _saved(docs, path) == expected
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)
    assert _saved(docs, path) == with_newline
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)
    assert _saved(docs, path) == original


def test_find_and_replace_match_across_a_display_break(win, qtbot, tmp_path):
    original = one_line(SIZE)
    window, docs, path = _open(win, tmp_path, original)
    at = _breaks(window)[2]
    phrase = original[at - 6 : at + 7]  # the break's space is inside the phrase
    first = original.index(phrase)
    _put(window, 0)
    assert window.editor.find_text(phrase, case_sensitive=True)
    cursor = window.editor.textCursor()
    assert (cursor.selectionStart(), cursor.selectionEnd()) == (first, first + len(phrase))
    count = window.editor.replace_all(phrase, "<one\nline>", case_sensitive=True)
    assert count == original.count(phrase) and count > 1
    replaced = original.replace(phrase, "<one\nline>")
    assert _saved(docs, path) == replaced
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)  # replace all is one undo step
    assert _saved(docs, path) == original


def test_copy_of_a_selection_across_a_display_break_is_the_real_text_and_paste_keeps_it(win, qtbot, tmp_path):
    original = one_line(SIZE)
    window, docs, path = _open(win, tmp_path, original)
    at = _breaks(window)[1]
    _put(window, at + 30, anchor=at - 30)
    window.editor.copy()
    assert QApplication.clipboard().text() == original[at - 30 : at + 30]
    paste_at = _breaks(window)[4] + 10
    _put(window, paste_at)
    QApplication.clipboard().setText("two\nlines")
    window.editor.seal_undo_step()  # (as after an accept: the paste is then delivered inside an edit block)
    qtbot.keyClick(window.editor, Qt.Key.Key_V, CTRL)
    pasted = original[:paste_at] + "two\nlines" + original[paste_at:]
    assert _saved(docs, path) == pasted


def test_a_rewrite_of_a_selection_across_a_display_break_sees_and_replaces_the_real_text(qtbot):
    engine = FakeEngine(texts=[" Rewritten,\nin two lines."], steps=2)
    window = build_window(qtbot, engine)
    original = one_line(SIZE)
    doc = window.editor.document()
    window.editor.setPlainText(original)
    assert display_breaks.add_breaks(doc) > 10  # what opening the file does
    at = display_breaks.break_positions(doc)[2]
    s, e = original.rfind(" ", 0, at - 20), original.find(" ", at + 20)  # words around the break
    _put(window, e, anchor=s)
    window.actionRewrite.trigger()
    wait_ready(qtbot, window)
    seen = [r for r in engine.requests if hasattr(r, "selection")]
    assert seen and seen[-1].selection == original[s:e]  # a space where the break is, not a newline
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert editor_text(window.editor).startswith(original[:s] + " Rewritten,\nin two lines.")
    assert editor_text(window.editor) == original[:s] + " Rewritten,\nin two lines." + original[e:]
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)
    assert editor_text(window.editor) == original


def test_random_edits_around_display_breaks_keep_the_text_exact_through_undo_and_redo(win, qtbot, tmp_path):
    """Type, Enter, Backspace, Delete, paste and cut around display breaks; after every step the saved text
    is the model's, and undoing and redoing every step walks the same texts back and forth."""
    original = one_line(SIZE)
    window, docs, path = _open(win, tmp_path, original)
    rng = random.Random(22)
    model = original
    history = [model]
    editor = window.editor
    for _step in range(40):
        marks = _breaks(window)
        at = rng.choice(marks) + rng.choice([-2, -1, 0, 1, 2])
        at = max(0, min(len(model), at))
        editor.seal_undo_step()
        op = rng.choice(["type", "enter", "backspace", "delete", "paste", "cut"])
        if op == "type":
            _put(window, at)
            qtbot.keyClick(editor, Qt.Key.Key_K)
            model = model[:at] + "k" + model[at:]
        elif op == "enter":
            _put(window, at)
            qtbot.keyClick(editor, Qt.Key.Key_Return)
            model = model[:at] + "\n" + model[at:]
        elif op == "backspace" and at > 0:
            _put(window, at)
            qtbot.keyClick(editor, Qt.Key.Key_Backspace)
            model = model[: at - 1] + model[at:]
        elif op == "delete" and at < len(model):
            _put(window, at)
            qtbot.keyClick(editor, Qt.Key.Key_Delete)
            model = model[:at] + model[at + 1 :]
        elif op == "paste":
            _put(window, at)
            mime = QMimeData()
            mime.setText("p\nq")
            editor.insertFromMimeData(mime)
            model = model[:at] + "p\nq" + model[at:]
        elif op == "cut":
            end = min(len(model), at + rng.randint(1, 20))
            _put(window, end, anchor=at)
            qtbot.keyClick(editor, Qt.Key.Key_X, CTRL)
            assert QApplication.clipboard().text() == model[at:end]
            model = model[:at] + model[end:]
        else:
            continue
        assert editor_text(editor) == model, (op, at)
        history.append(model)
    assert _saved(docs, path) == model
    for expected in reversed(history[:-1]):
        editor.undo()
        assert editor_text(editor) == expected
    assert _saved(docs, path) == original
    for expected in history[1:]:
        editor.redo()
        assert editor_text(editor) == expected
    assert _saved(docs, path) == model


def test_a_short_file_opened_after_a_long_one_has_no_display_breaks(win, qtbot, tmp_path):
    window, docs, _path = _open(win, tmp_path, one_line(SIZE))
    short = tmp_path / "short.txt"
    short.write_bytes(b"one two\nthree")
    assert docs.open(short)
    doc = window.editor.document()
    assert not display_breaks.has_breaks(doc) and doc.blockCount() == 2
    _put(window, 3)
    qtbot.keyClick(window.editor, Qt.Key.Key_Return)
    qtbot.keyClicks(window.editor, "ab")
    assert _saved(docs, short) == "one\nab two\nthree"
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)  # Qt's own typing: one undo step for "ab"
    assert editor_text(window.editor) == "one\n two\nthree"


def test_a_long_line_with_emoji_is_cut_typed_found_and_replaced_exactly(win, qtbot, tmp_path):
    """A character outside the BMP is one code point in the file but two positions in the editor: a cut
    placed by the wrong count would turn a letter into a break (and save it as a space)."""
    original = "👋 " + one_line(SIZE // 2) + " 🎉 " + one_line(SIZE // 2) + " end"
    window, docs, path = _open(win, tmp_path, original)
    assert editor_text(window.editor) == original
    assert _saved(docs, path) == original
    marks = _breaks(window)
    late = next(m for m in marks if m > SIZE // 2 + 10)  # after both emoji: 2 positions more than offsets
    assert original[late - 2] == " "
    _put(window, late)
    qtbot.keyClick(window.editor, Qt.Key.Key_Return)
    with_newline = original[: late - 2] + "\n" + original[late - 2 :]
    assert _saved(docs, path) == with_newline
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, CTRL)
    phrase = original[late - 2 - 6 : late - 2 + 7]
    count = window.editor.replace_all(phrase, "<😀>", case_sensitive=True)
    assert count == original.count(phrase)
    assert _saved(docs, path) == original.replace(phrase, "<😀>")
    _put(window, 0)
    assert window.editor.find_text("🎉 " + original[original.index("🎉") + 2 : original.index("🎉") + 9])
    cursor = window.editor.textCursor()
    assert display_breaks.selected_text(cursor).startswith("🎉 ")
