"""Find and replace over an editor's document: Qt's own search, or, in a document with display breaks (an
over-long line shown broken, `app.ui.display_breaks`), a search over the writer's text, where a phrase may
span a break. `Editor.find_text`, `replace_selection` and `replace_all` are this class's."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextDocument
from PySide6.QtWidgets import QPlainTextEdit

from app.ui import display_breaks as breaks


class TextSearch:
    """The search of one editor: it selects what it finds in the editor and replaces in one undo step."""

    def __init__(self, editor: QPlainTextEdit) -> None:
        self.editor = editor

    @staticmethod
    def _flags(
        *, backward: bool = False, case_sensitive: bool = False, whole_word: bool = False
    ) -> QTextDocument.FindFlag:
        flags = QTextDocument.FindFlag(0)
        if backward:
            flags |= QTextDocument.FindFlag.FindBackward
        if case_sensitive:
            flags |= QTextDocument.FindFlag.FindCaseSensitively
        if whole_word:
            flags |= QTextDocument.FindFlag.FindWholeWords
        return flags

    def find_text(
        self,
        text: str,
        *,
        backward: bool = False,
        case_sensitive: bool = False,
        wrap: bool = True,
        whole_word: bool = False,
    ) -> bool:
        """Select the next match after the cursor (wrapping around once); False when there is none."""
        if not text:
            return False
        if breaks.has_breaks(self.editor.document()):
            return self._find_real(
                text, backward=backward, case_sensitive=case_sensitive, wrap=wrap, whole_word=whole_word
            )
        flags = self._flags(backward=backward, case_sensitive=case_sensitive, whole_word=whole_word)
        if self.editor.find(text, flags):
            return True
        if not wrap:
            return False
        saved = self.editor.textCursor()
        cursor = QTextCursor(self.editor.document())
        cursor.movePosition(QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start)
        self.editor.setTextCursor(cursor)
        if self.editor.find(text, flags):
            return True
        self.editor.setTextCursor(saved)
        return False

    def _find_real(
        self, text: str, *, backward: bool, case_sensitive: bool, wrap: bool, whole_word: bool
    ) -> bool:
        """`find_text` over the writer's text, for a document with display breaks (a phrase may span one)."""
        doc, cursor = self.editor.document(), self.editor.textCursor()
        opts = {"backward": backward, "case_sensitive": case_sensitive, "whole_word": whole_word}
        start = cursor.selectionStart() if backward else cursor.selectionEnd()
        found = breaks.find_real(doc, text, start, **opts)
        if found is None and wrap:
            found = breaks.find_real(doc, text, doc.characterCount() - 1 if backward else 0, **opts)
        if found is None:
            return False
        cursor.setPosition(found[0])
        cursor.setPosition(found[1], QTextCursor.MoveMode.KeepAnchor)
        self.editor.setTextCursor(cursor)
        return True

    def _is_match(self, cursor: QTextCursor, text: str, *, case_sensitive: bool, whole_word: bool) -> bool:
        """Whether the selection of `cursor` is exactly a match the same search would find."""
        if not cursor.hasSelection():
            return False
        if breaks.has_breaks(self.editor.document()):
            at = cursor.selectionStart()
            hit = breaks.find_real(
                self.editor.document(), text, at, case_sensitive=case_sensitive, whole_word=whole_word
            )
            return hit == (at, cursor.selectionEnd())
        found = self.editor.document().find(
            text, cursor.selectionStart(), self._flags(case_sensitive=case_sensitive, whole_word=whole_word)
        )
        return (
            not found.isNull()
            and found.selectionStart() == cursor.selectionStart()
            and found.selectionEnd() == cursor.selectionEnd()
        )

    def replace_selection(
        self, text: str, replacement: str, *, case_sensitive: bool = False, whole_word: bool = False
    ) -> bool:
        """Replace the selected match (if the selection is one) and find the next; one undo step per
        replace."""
        cursor = self.editor.textCursor()
        if self._is_match(cursor, text, case_sensitive=case_sensitive, whole_word=whole_word):
            breaks.insert_plain(cursor, replacement)
        return self.find_text(text, case_sensitive=case_sensitive, whole_word=whole_word)

    def replace_all(
        self, text: str, replacement: str, *, case_sensitive: bool = False, whole_word: bool = False
    ) -> int:
        """Replace every match as one undo step; returns how many were replaced."""
        if not text:
            return 0
        flags = self._flags(case_sensitive=case_sensitive, whole_word=whole_word)
        doc = self.editor.document()
        count = 0
        edit = QTextCursor(doc)
        if breaks.has_breaks(doc):  # over the writer's text, last match first (earlier positions stay put)
            spans = breaks.find_all_real(doc, text, case_sensitive=case_sensitive, whole_word=whole_word)
            edit.beginEditBlock()
            for s, e in reversed(spans):
                edit.setPosition(s)
                edit.setPosition(e, QTextCursor.MoveMode.KeepAnchor)
                breaks.insert_plain(edit, replacement)
            edit.endEditBlock()
            return len(spans)
        edit.beginEditBlock()
        found = doc.find(text, 0, flags)
        while not found.isNull():
            found.insertText(replacement)
            count += 1
            found = doc.find(text, found.position(), flags)
        edit.endEditBlock()
        return count
