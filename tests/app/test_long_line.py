"""Issue 22, long lines: a document that is one over-long line (no line break for hundreds of thousands of
characters) is saved byte for byte as the writer left it, through the real window, after typing and undo.

These guard any change to how such a line is shown (e.g. display-only breaks): the line must never be split on
disk. The size is above the 64 K characters where a line counts as over-long, but small enough to stay quick
here; the per-key cost at 5 MB is measured by `tests/helpers/longline_bench.py`, never asserted."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.helpers.gui import fake_window
from tests.helpers.longline_bench import one_line

pytestmark = pytest.mark.usefixtures("user_dirs")

SIZE = 300_000


@pytest.fixture
def win(qtbot):
    window = fake_window(qtbot)
    docs = window.services.documents
    docs.show_error = lambda title, text: pytest.fail(text)
    yield window, docs
    docs.editor.document().setModified(False)
    window.close()


def test_a_key_typed_mid_line_changes_exactly_that_character_and_undo_restores_the_bytes(
    win, qtbot, tmp_path
):
    window, docs = win
    original = ("é " + one_line(SIZE) + " ünïcode end\r\n").encode("utf-8")
    path = tmp_path / "long.txt"
    path.write_bytes(original)
    assert docs.open(path)
    middle = SIZE // 2
    cursor = window.editor.textCursor()
    cursor.setPosition(middle)
    window.editor.setTextCursor(cursor)
    qtbot.keyClick(window.editor, Qt.Key.Key_Q)
    assert docs.save()
    text = original.decode("utf-8")
    assert path.read_bytes() == (text[:middle] + "q" + text[middle:]).encode("utf-8")
    qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert docs.save()
    assert path.read_bytes() == original


def test_an_unedited_long_line_saves_as_it_was(win, tmp_path):
    window, docs = win
    original = one_line(SIZE).encode("utf-8")  # no final newline either
    path = tmp_path / "long.txt"
    path.write_bytes(original)
    assert docs.open(path)
    window.editor.document().setModified(True)
    assert docs.save()
    assert path.read_bytes() == original
