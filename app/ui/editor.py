"""The text editor widget: word wrap, a readable font and margins, find/replace (`app.ui.find`), zoom, a word
count signal.

It knows nothing of the engine. Two small hooks serve the assistant without coupling: `priority_actions`
(enabled actions whose shortcuts win over the editor's own key handling, e.g. Tab while a suggestion is
visible) and `rect_for_position`, which overlays use to find where a document position is drawn.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QEvent, QMimeData, QPoint, QRect, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QAction,
    QClipboard,
    QFont,
    QFontDatabase,
    QGuiApplication,
    QInputMethodEvent,
    QKeyEvent,
    QKeySequence,
    QPainter,
    QPaintEvent,
    QTextBlock,
    QTextCursor,
    QTextDocument,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextDocumentLayout,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QWidget,
)

from app.config.commands import SAME_PRESS, press
from app.ui import display_breaks as breaks
from app.ui.find import TextSearch
from app.ui.widgets import named

_WORD = re.compile(r"\w+(?:['’-]\w+)*", re.UNICODE)
DEFAULT_POINT_SIZE = 12
LARGE_DOCUMENT = 200_000  # characters


def count_words(text: str) -> int:
    return len(_WORD.findall(text))


class _ReservingLayout(QPlainTextDocumentLayout):
    """The plain-text layout, plus optional empty space below one block, so an overlay can be drawn there
    without covering the writer's text and without changing the document (no undo entry, no modification)."""

    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self.reserved: tuple[int, float] | None = None  # (block number, pixels)

    def blockBoundingRect(self, block: QTextBlock) -> QRectF:  # noqa: N802 - Qt virtual
        rect = super().blockBoundingRect(block)
        reserved = self.reserved
        if (
            reserved is not None
            and block.isValid()
            and block.blockNumber() == reserved[0]
            and rect.height() > 0
        ):
            rect.setHeight(rect.height() + reserved[1])
        return rect


_clipboard_watched = False


def own_clipboard_text(mode: QClipboard.Mode = QClipboard.Mode.Clipboard) -> None:
    """Replace text this process put on the clipboard as a QMimeData made in Python by the same text as Qt
    makes it (`QClipboard.setText`).

    Why: Qt's clipboard store deletes the data it holds when the process exits, after Python has finalized;
    for data made in Python, PySide's wrapper then calls into the dead interpreter and the app died with
    SIGSEGV on quit after a copy or cut from a document with display breaks (the only copy made in Python,
    `Editor.createMimeDataFromSelection`). The writer's text stays on the clipboard; our object is deleted
    now, while Python runs."""
    clipboard = QGuiApplication.clipboard()
    if clipboard is None or (mode == QClipboard.Mode.Selection and not clipboard.supportsSelection()):
        return
    data = clipboard.mimeData(mode)
    if data is not None and shiboken6.isValid(data) and shiboken6.createdByPython(data):
        clipboard.setText(data.text(), mode)


def _watch_clipboard() -> None:
    """Swap Python-made clipboard data for Qt's (see `own_clipboard_text`) whenever it changes; once per
    process."""
    global _clipboard_watched
    clipboard = QGuiApplication.clipboard()
    if _clipboard_watched or clipboard is None:
        return
    _clipboard_watched = True
    # Deferred to the next turn of the event loop: never inside Qt's own emission, which still holds the data.
    clipboard.dataChanged.connect(lambda: QTimer.singleShot(0, own_clipboard_text))
    clipboard.selectionChanged.connect(
        lambda: QTimer.singleShot(0, lambda: own_clipboard_text(QClipboard.Mode.Selection))
    )


class Editor(QPlainTextEdit):
    """A plain-text/Markdown editor for prose."""

    wordCountChanged = Signal(int)
    keyUnavailable = Signal(
        QAction
    )  # an assistant key pressed while its action is disabled (nothing was typed)
    zoomChanged = Signal(int)  # zoom steps relative to the default size

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("editor")
        document = QTextDocument(self)
        document.setDocumentLayout(_ReservingLayout(document))
        self.setDocument(document)  # before any signal hookup, so the view follows this layout
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.setTabChangesFocus(False)
        self.document().setDocumentMargin(24)
        document.clearUndoRedoStacks()  # the margin is a frame-format edit; it is not the writer's to undo
        self.setFont(default_font())
        self.setCenterOnScroll(False)
        self.priority_actions: list[QAction] = []
        self.overlay_painters: list[Callable[[QPainter], None]] = []
        self.in_undo_redo = False  # True while undo()/redo() change the document (listeners can tell why)
        self._sealed = False  # the next typed or pasted text starts its own undo step (see seal_undo_step)
        self._zoom = 0
        self._words = 0
        self._count_timer = QTimer(self, singleShot=True, interval=250)
        self._count_timer.timeout.connect(self._recount)
        self.textChanged.connect(self._schedule_count)
        self._search = TextSearch(self)

    # -- hooks -----------------------------------------------------------------------------------------------

    def rect_for_position(self, position: int) -> QRect:
        """The cursor rectangle (viewport coordinates) of a document position."""
        cursor = QTextCursor(self.document())
        cursor.setPosition(max(0, min(position, self.document().characterCount() - 1)))
        return self.cursorRect(cursor)

    def reserve_below(self, position: int | None, pixels: float = 0.0) -> None:
        """Leave `pixels` of empty space below the paragraph holding `position` (None: no space anywhere)."""
        layout = self.document().documentLayout()
        if not isinstance(layout, _ReservingLayout):
            return
        wanted = None
        if position is not None and pixels > 0:
            wanted = (self.document().findBlock(position).blockNumber(), float(round(pixels)))
        if wanted != layout.reserved:
            layout.reserved = wanted
            self.viewport().update()

    def paragraph_end(self, position: int) -> int:
        """The position at the end of the paragraph holding `position`."""
        block = self.document().findBlock(position)
        return block.position() + max(0, block.length() - 1)

    def paintEvent(self, e: QPaintEvent) -> None:
        super().paintEvent(e)
        if self.overlay_painters:
            painter = QPainter(self.viewport())
            try:
                for paint in self.overlay_painters:
                    paint(painter)
            finally:
                painter.end()

    # -- undo / redo -----------------------------------------------------------------------------------------

    def undo(self) -> None:
        """Undo, leaving the caret at the end of the restored text (Qt leaves it where the edit block's cursor
        was created, which for programmatic edits is the start of the document)."""
        self._undo_redo(super().undo)

    def redo(self) -> None:
        """Redo, leaving the caret at the end of the re-inserted text."""
        self._undo_redo(super().redo)

    def _undo_redo(self, step: Callable[[], None]) -> None:
        changes: list[tuple[int, int, int]] = []
        record = lambda pos, removed, added: changes.append((pos, removed, added))  # noqa: E731
        doc = self.document()
        breaks.settle_edits(doc)  # a repair still due belongs to the step about to be undone
        doc.contentsChange.connect(record)
        self.in_undo_redo = True
        try:
            step()
        finally:
            self.in_undo_redo = False
            doc.contentsChange.disconnect(record)
            breaks.after_undo_redo(doc)
        if changes:
            pos, _removed, added = changes[-1]
            cursor = QTextCursor(doc)
            cursor.setPosition(max(0, min(pos + added, doc.characterCount() - 1)))
            self.setTextCursor(cursor)
            self.ensureCursorVisible()

    def seal_undo_step(self) -> None:
        """Make the next text the writer types or pastes its own undo step.

        Qt merges a typed insertion into the previous edit block when it continues that block's last
        insertion, so after a programmatic edit (an accepted suggestion) "type a letter, Ctrl+Z" would take
        back the letter and the whole edit with it. Wrapping that first input in its own edit block stops the
        merge; the characters typed after it still group with it as usual."""
        self._sealed = True

    def _input_step(self, deliver: Callable[[], None]) -> None:
        try:
            self._deliver(deliver)
        finally:
            breaks.settle_edits(self.document())  # display-break marks put right, in the same undo step

    def _deliver(self, deliver: Callable[[], None]) -> None:
        if not self._sealed or breaks.has_breaks(self.document()):
            # With display breaks, typing, pasting and deleting are edit blocks of their own already
            # (`display_breaks`), and Qt's own key handling inside an outer edit block crashed there
            # (segfault, PySide6 6.11: Ctrl+X, Backspace after Enter in a display block).
            self._sealed = self._sealed and not breaks.has_breaks(self.document())
            deliver()
            return
        self._sealed = False
        cursor = self.textCursor()
        cursor.beginEditBlock()
        try:
            deliver()
        finally:
            cursor.endEditBlock()

    def inputMethodEvent(self, e: QInputMethodEvent) -> None:  # noqa: N802 - Qt virtual
        commit = e.commitString()
        if commit and breaks.has_breaks(self.document()) and _has_break(commit) and not e.preeditString():
            self._input_step(lambda: self._insert_plain(commit))
            e.accept()
            return
        if commit:
            self._input_step(lambda: super(Editor, self).inputMethodEvent(e))
            return
        super().inputMethodEvent(e)
        breaks.settle_edits(self.document())

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 - Qt virtual
        if breaks.has_breaks(self.document()) and source.hasText():
            # Qt's own paste would copy a display-break mark onto every pasted line break (long-lines.md).
            text = source.text()
            self._input_step(lambda: self._insert_plain(text))
            return
        self._input_step(lambda: super(Editor, self).insertFromMimeData(source))

    def createMimeDataFromSelection(self) -> QMimeData:  # noqa: N802 - Qt virtual
        """Copy, cut and drag carry the writer's text: a display break in the selection is its space."""
        if not breaks.has_breaks(self.document()):
            return super().createMimeDataFromSelection()
        data = QMimeData()
        data.setText(breaks.selected_text(self.textCursor()).replace("\u2029", "\n"))
        _watch_clipboard()  # the clipboard gets a copy made in C++ of what this puts there
        return data

    def _insert_plain(self, text: str) -> None:
        if self.isReadOnly():
            return
        cursor = self.textCursor()
        breaks.insert_plain(cursor, text)
        self.setTextCursor(cursor)
        self.ensureCursorVisible()

    def createStandardContextMenu(self, position: QPoint | None = None) -> QMenu:  # noqa: N802 - Qt's name
        """The standard menu, with its Undo/Redo going through undo()/redo() (the caret lands as with the
        keys)."""
        menu = (
            super().createStandardContextMenu()
            if position is None
            else super().createStandardContextMenu(position)
        )
        for action in menu.actions():
            step = {"edit-undo": self.undo, "edit-redo": self.redo}.get(action.objectName())
            if step is not None:
                action.triggered.disconnect()
                action.triggered.connect(lambda _checked=False, step=step: step())
        return menu

    def keyPressEvent(self, e: QKeyEvent) -> None:
        aliased = self._aliased_action(e)
        if aliased is not None:
            e.accept()
            aliased.trigger()
            return
        # The text control's own Ctrl+Z/Ctrl+Shift+Z bypass undo()/redo(); route them through, so the caret
        # lands where the writer expects whichever way undo is asked for.
        if e.matches(QKeySequence.StandardKey.Undo):
            if self.isUndoRedoEnabled() and not self.isReadOnly():
                self.undo()
            e.accept()
            return
        if e.matches(QKeySequence.StandardKey.Redo) or _is_redo_key(e):
            if self.isUndoRedoEnabled() and not self.isReadOnly():
                self.redo()
            e.accept()
            return
        if e.text():
            action = self._disabled_assistant_key(e)
            if action is not None:
                e.accept()
                self.keyUnavailable.emit(action)
                return
            if _is_plain_enter(e) and breaks.has_breaks(self.document()) and not self.isReadOnly():
                # Qt's Enter copies the block's format, display-break mark included, onto the new line: the
                # writer's newline would be saved as a space. Insert it with a clean format instead.
                e.accept()
                self._input_step(lambda: self._insert_plain("\n"))
                return
            if breaks.has_breaks(self.document()) and not self.isReadOnly() and self._break_safe_key(e):
                e.accept()
                return
            self._input_step(lambda: super(Editor, self).keyPressEvent(e))
            return
        super().keyPressEvent(e)
        breaks.settle_edits(self.document())

    def _break_safe_key(self, e: QKeyEvent) -> bool:
        """In a document with display breaks, deletions and typing go through
        `display_breaks` (Qt's own merge of an emptied block takes the next block's mark, and its Backspace
        inside an edit block crashes there); True when the key was handled."""
        cursor = self.textCursor()
        word = bool(e.modifiers() & Qt.KeyboardModifier.ControlModifier)
        if e.key() in (Qt.Key.Key_Backspace, Qt.Key.Key_Delete):
            self._input_step(
                lambda: breaks.delete(cursor, backward=e.key() == Qt.Key.Key_Backspace, word=word)
            )
        elif (e.text().isprintable() or e.text() == "\t") and not word:
            # Typed text too (each key its own undo step here): Qt's own key handling inside the edit block
            # that seals an undo step crashed in a document with display breaks (PySide6 6.11).
            self._input_step(lambda: breaks.insert_plain(cursor, e.text()))
        else:
            return False
        self.setTextCursor(cursor)
        self.ensureCursorVisible()
        return True

    def _disabled_assistant_key(self, e: QKeyEvent) -> QAction | None:
        """The disabled priority action bound to this Alt/Ctrl key, if any. Without it Qt types the letter
        (Alt+R typed "r" into the document when there was no suggestion to re-roll). Plain keys (Tab, letters
        a writer bound) and AltGr characters (no Alt/Ctrl modifier on X11) still type as usual."""
        mods = e.modifiers()
        if not mods & (Qt.KeyboardModifier.AltModifier | Qt.KeyboardModifier.ControlModifier):
            return None
        if not e.text().isprintable():
            return None
        pressed = QKeySequence(e.keyCombination())
        for action in self.priority_actions:
            if not action.isEnabled() and any(
                s.matches(pressed) == QKeySequence.SequenceMatch.ExactMatch for s in action.shortcuts()
            ):
                return action
        return None

    def _aliased_action(self, e: QKeyEvent) -> QAction | None:
        """The enabled priority action bound to another spelling of this press (Backtab for the Shift+Tab
        the action binds), if any. Only one spelling is bound (binding all of them made X11 call Shift+Tab
        ambiguous, and Qt then triggered nothing); the editor claims the press and triggers it itself, so it
        fires exactly once whichever spelling the platform reports."""
        spelled = QKeySequence(e.keyCombination()).toString(QKeySequence.SequenceFormat.PortableText)
        if spelled not in SAME_PRESS:
            return None
        wanted = QKeySequence.fromString(press(spelled), QKeySequence.SequenceFormat.PortableText)
        for action in self.priority_actions:
            if action.isEnabled() and any(
                s.matches(wanted) == QKeySequence.SequenceMatch.ExactMatch for s in action.shortcuts()
            ):
                return action
        return None

    def event(self, e: QEvent) -> bool:
        # Text widgets claim Tab, Ctrl+Right etc. before shortcuts run; let enabled priority actions have
        # them.
        if e.type() == QEvent.Type.ShortcutOverride and isinstance(e, QKeyEvent):
            if self._aliased_action(e) is not None:
                e.accept()  # keyPressEvent triggers it: no shortcut may fire it a second time
                return True
            pressed = QKeySequence(e.keyCombination())
            for action in self.priority_actions:
                if action.isEnabled() and any(
                    s.matches(pressed) == QKeySequence.SequenceMatch.ExactMatch for s in action.shortcuts()
                ):
                    e.ignore()
                    return True
        return super().event(e)

    # -- words -----------------------------------------------------------------------------------------------

    @property
    def word_count(self) -> int:
        return self._words

    def _schedule_count(self) -> None:
        # Counting a 10 MB document takes a while; in big documents count less often and with a cheaper rule.
        big = self.document().characterCount() > LARGE_DOCUMENT
        self._count_timer.start(1500 if big else 250)

    def _recount(self) -> None:
        text = self.toPlainText()
        words = count_words(text) if len(text) <= LARGE_DOCUMENT else len(text.split())
        if words != self._words:
            self._words = words
            self.wordCountChanged.emit(words)

    # -- zoom ------------------------------------------------------------------------------------------------

    @property
    def zoom(self) -> int:
        return self._zoom

    def zoom_in(self) -> None:
        self._set_zoom(self._zoom + 1)

    def zoom_out(self) -> None:
        self._set_zoom(self._zoom - 1)

    def zoom_reset(self) -> None:
        self._set_zoom(0)

    def _set_zoom(self, steps: int) -> None:
        steps = max(-6, min(20, steps))
        delta = steps - self._zoom
        if delta > 0:
            self.zoomIn(delta)
        elif delta < 0:
            self.zoomOut(-delta)
        if delta:
            self._zoom = steps
            self.zoomChanged.emit(steps)

    def wheelEvent(self, e: QWheelEvent) -> None:
        if e.modifiers() & Qt.KeyboardModifier.ControlModifier:
            (self.zoom_in if e.angleDelta().y() > 0 else self.zoom_out)()
            e.accept()
            return
        super().wheelEvent(e)

    # -- find / replace (app.ui.find: the search over this editor's document) -------------------------------

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
        return self._search.find_text(
            text, backward=backward, case_sensitive=case_sensitive, wrap=wrap, whole_word=whole_word
        )

    def replace_selection(
        self, text: str, replacement: str, *, case_sensitive: bool = False, whole_word: bool = False
    ) -> bool:
        """Replace the selected match (if the selection is one) and find the next; one undo step per
        replace."""
        return self._search.replace_selection(
            text, replacement, case_sensitive=case_sensitive, whole_word=whole_word
        )

    def replace_all(
        self, text: str, replacement: str, *, case_sensitive: bool = False, whole_word: bool = False
    ) -> int:
        """Replace every match as one undo step; returns how many were replaced."""
        return self._search.replace_all(
            text, replacement, case_sensitive=case_sensitive, whole_word=whole_word
        )


def _is_plain_enter(e: QKeyEvent) -> bool:
    """Enter or Return as Qt's text control would turn into a new block (Shift+Enter is an in-line break)."""
    mods = e.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
    return e.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and mods == Qt.KeyboardModifier.NoModifier


def _has_break(text: str) -> bool:
    return any(c in text for c in "\n\r\u2029")


def default_font() -> QFont:
    """A readable proportional text font at a comfortable size."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.GeneralFont)
    font.setPointSize(DEFAULT_POINT_SIZE)
    font.setStyleHint(QFont.StyleHint.SansSerif)
    return font


FIELD_MIN_CHARS = 25  # the find and replace fields keep room for this many average characters
FIELD_MIN_PX = 200


class FindBar(QWidget):
    """Find / replace strip shown under the editor (Ctrl+F, Ctrl+H); Esc hides it.

    "Match case" and "Whole word" apply to find, replace and replace all; the result line says how many were
    replaced (or that nothing matched)."""

    def __init__(self, editor: Editor, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("findBar")
        self.editor = editor
        self.find_edit = named(QLineEdit(self), "findEdit")
        self.find_edit.setPlaceholderText("Find")
        self.replace_edit = named(QLineEdit(self), "replaceEdit")
        self.replace_edit.setPlaceholderText("Replace with")
        self.case = named(QCheckBox("Match case", self), "findMatchCase")
        self.whole = named(QCheckBox("Whole word", self), "findWholeWord")
        self.result = named(QLabel(self), "findResult")
        prev_btn = QPushButton("Previous", self)
        next_btn = QPushButton("Next", self)
        self.replace_btn = named(QPushButton("Replace", self), "findReplace")
        self.all_btn = named(QPushButton("Replace all", self), "findReplaceAll")
        close = QToolButton(self)
        close.setText("×")
        close.setAutoRaise(True)
        # Two rows, find above replace: one row of ten widgets left each field ~60 px wide beside the
        # Alternatives panel. Each field keeps room for about 25 characters (at least FIELD_MIN_PX).
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 4, 8, 4)
        grid.setVerticalSpacing(2)
        room = max(FIELD_MIN_PX, self.fontMetrics().averageCharWidth() * FIELD_MIN_CHARS)
        for edit in (self.find_edit, self.replace_edit):
            edit.setMinimumWidth(room)
        for col, w in enumerate((self.find_edit, prev_btn, next_btn, self.case, self.whole)):
            grid.addWidget(w, 0, col)
        grid.addWidget(self.result, 0, 5)
        grid.addWidget(close, 0, 6)
        grid.addWidget(self.replace_edit, 1, 0)
        grid.addWidget(self.replace_btn, 1, 1)
        grid.addWidget(self.all_btn, 1, 2)
        grid.setColumnStretch(0, 3)
        grid.setColumnStretch(5, 1)
        self.result.setMinimumWidth(0)
        self.find_edit.returnPressed.connect(self.find_next)
        self.find_edit.textChanged.connect(lambda _t: self.result.clear())
        next_btn.clicked.connect(self.find_next)
        prev_btn.clicked.connect(self.find_previous)
        self.replace_btn.clicked.connect(self._replace)
        self.all_btn.clicked.connect(self._replace_all)
        close.clicked.connect(self.close_bar)
        self.hide()

    def open(self, *, replace: bool) -> None:
        selected = breaks.selected_text(self.editor.textCursor())
        if selected and "\u2029" not in selected:
            self.find_edit.setText(selected)
        for w in (self.replace_edit, self.replace_btn, self.all_btn):
            w.setVisible(replace)
        self.result.clear()
        self.show()
        self.find_edit.setFocus()
        self.find_edit.selectAll()

    def close_bar(self) -> None:
        self.hide()
        self.editor.setFocus()

    def keyPressEvent(self, e: QKeyEvent) -> None:
        if e.key() == Qt.Key.Key_Escape:
            self.close_bar()
            return
        super().keyPressEvent(e)

    def _options(self) -> dict[str, bool]:
        return {"case_sensitive": self.case.isChecked(), "whole_word": self.whole.isChecked()}

    def find_next(self) -> bool:
        return self._report(self.editor.find_text(self.find_edit.text(), **self._options()))

    def find_previous(self) -> bool:
        return self._report(self.editor.find_text(self.find_edit.text(), backward=True, **self._options()))

    def _replace(self) -> None:
        self._report(
            self.editor.replace_selection(self.find_edit.text(), self.replace_edit.text(), **self._options())
        )

    def replace_all(self) -> int:
        """Replace every match; the result line says how many."""
        n = self.editor.replace_all(self.find_edit.text(), self.replace_edit.text(), **self._options())
        self.result.setText("No matches" if n == 0 else f"{n} replaced")
        self.find_edit.setToolTip(self.result.text())
        return n

    _replace_all = replace_all

    def _report(self, found: bool) -> bool:
        self.find_edit.setStyleSheet(
            "" if found or not self.find_edit.text() else "background: #f4c7c3; color: black;"
        )
        if not found and self.find_edit.text():
            self.result.setText("No matches")
        return found


def _is_redo_key(e: QKeyEvent) -> bool:
    """Ctrl+Y and Ctrl+Shift+Z redo on Linux and Windows too (Qt's Linux binding is Ctrl+Shift+Z only)."""
    import sys

    from app.ui.help import redo_keys

    if sys.platform == "darwin":
        return False
    pressed = QKeySequence(e.keyCombination())
    return any(pressed.matches(k) == QKeySequence.SequenceMatch.ExactMatch for k in redo_keys())
