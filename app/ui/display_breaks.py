"""Display breaks: an over-long line is shown as blocks of about 4 K characters, and is still one line.

Qt lays out a whole block (one line of the file) again after every key, so a 5 MB line cost seconds per key
(docs/long-lines.md). A line longer than `LONG_LINE` is cut for the view only: a space about every `STEP`
characters is *replaced* by a block break whose following block carries `MARK` in its block format. The length
is unchanged, so every document position means the same character in the view and in the file. Everything
that reads the document's text for the writer (save, autosave, the engine, copy, find) goes through
`real_text` / `selected_text`, which read a marked break back as the space it replaced.

Why this is exact (each checked with PySide6 6.11, see docs/long-lines.md):
- the mark is in the block format, which the undo stack carries (undo of a deleted break brings it back);
- deleting a break merges into the *first* block's format, so no mark survives on the wrong break;
- Qt's own `insertBlock()` copies the current block's format (a writer's Enter in a marked block would copy
  the mark), but `insertBlock(format)` gives the given format to the new, second half. So every break the
  writer inserts goes through `insert_plain`, which passes a format without the mark: Enter, paste and drop,
  input-method commits (`app.ui.editor.Editor`), the assistant's accept, replace and replace all;
- deleting a break after an *empty* block keeps the *second* block's format (Qt removes the empty block's
  separator instead): `_Guard` puts the mark that block's surviving separator had back, in the same undo step;
- as a second net, each mark holds a unique id: of two blocks with the same id (a copy Qt made on a path not
  listed above) only the first is a display break, the copy is the writer's newline.
"""

from __future__ import annotations

import itertools
import re

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QTextBlock, QTextBlockFormat, QTextCursor, QTextDocument, QTextFormat

LONG_LINE = 65_536  # characters: a line longer than this is shown in display blocks
STEP = 4_096  # characters per display block (about; the cut is at a space)
MARK = int(QTextFormat.Property.UserProperty) + 0x4C50  # block format: "the break before me is a space"
_FLAG = "letterpressDisplayBreaks"  # document property: it has (or, through undo, may again have) breaks
_ids = itertools.count(1)


def has_breaks(doc: QTextDocument) -> bool:
    """Whether the document was ever given display breaks (undo can bring them back, so this never resets)."""
    return bool(doc.property(_FLAG))


def _marked(block: QTextBlock) -> int:
    value = block.blockFormat().property(MARK)
    return value if isinstance(value, int) and value > 0 else 0


def break_positions(doc: QTextDocument, start: int = 0, end: int | None = None) -> list[int]:
    """Positions of the display breaks (the separators that stand for a space) in [start, end)."""
    if not has_breaks(doc):
        return []
    seen: set[int] = set()
    found: list[int] = []
    block = doc.begin()
    while block.isValid():
        mark = _marked(block)
        if mark and block.position() > 0:
            pos = block.position() - 1
            if mark not in seen and start <= pos and (end is None or pos < end):
                found.append(pos)
            seen.add(mark)
        block = block.next()
    return found


def _soft_blocks(doc: QTextDocument, first: int = 1, last: int | None = None) -> set[int]:
    """Numbers of the blocks (from `first` to `last`) whose separator before them is a display break.

    Everything here counts blocks, never positions: a document position counts UTF-16 units, a Python string
    counts code points, and the two differ after any character outside the BMP (an emoji)."""
    seen: set[int] = set()
    soft: set[int] = set()
    block = doc.begin()
    while block.isValid():
        number = block.blockNumber()
        if last is not None and number > last:
            break
        mark = _marked(block)
        if mark:
            if mark not in seen and number >= first and number > 0:
                soft.add(number)
            seen.add(mark)
        block = block.next()
    return soft


def _join(pieces: list[str], first_block: int, soft: set[int], hard: str) -> str:
    """`pieces` (the text between separators, the first in block `first_block`) joined again: a space before a
    block in `soft`, `hard` before any other."""
    if not soft:
        return hard.join(pieces)
    out = [pieces[0]]
    for i, piece in enumerate(pieces[1:], start=first_block + 1):
        out.append(" " if i in soft else hard)
        out.append(piece)
    return "".join(out)


def real_text(doc: QTextDocument) -> str:
    """The document exactly as the writer typed it ("\\n" for their line breaks; display breaks: spaces)."""
    pieces = doc.toRawText().split("\u2029")
    if not has_breaks(doc):
        return "\n".join(pieces)
    return _join(pieces, 0, _soft_blocks(doc), "\n")


def selected_text(cursor: QTextCursor) -> str:
    """`cursor.selectedText()` (U+2029 for the writer's breaks) with display breaks read back as spaces."""
    text = cursor.selectedText()
    doc = cursor.document()
    if not text or not has_breaks(doc) or "\u2029" not in text:
        return text
    first = doc.findBlock(cursor.selectionStart()).blockNumber()
    last = doc.findBlock(cursor.selectionEnd()).blockNumber()
    return _join(text.split("\u2029"), first, _soft_blocks(doc, first + 1, last), "\u2029")


def to_units(text: str, offsets: list[int]) -> list[int]:
    """Code-point offsets into `text` (sorted) as document positions (UTF-16 units)."""
    out: list[int] = []
    units = prev = 0
    for off in offsets:
        units += len(text[prev:off].encode("utf-16-le")) // 2
        prev = off
        out.append(units)
    return out


def _clean(fmt: QTextBlockFormat) -> QTextBlockFormat:
    fmt = QTextBlockFormat(fmt)
    fmt.clearProperty(MARK)
    return fmt


def insert_plain(cursor: QTextCursor, text: str) -> None:
    """Insert `text` at `cursor` (replacing its selection) as the writer's own text: every line break in it
    starts a block *without* the display-break mark, also inside a marked block. One edit block."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2029", "\n").split("\n")
    cursor.beginEditBlock()
    try:
        _remove_selection(cursor)
        for i, line in enumerate(lines):
            if i:
                cursor.insertBlock(_clean(cursor.blockFormat()))
            if line:
                cursor.insertText(line)
    finally:
        cursor.endEditBlock()


def _remove_selection(cursor: QTextCursor) -> None:
    """Remove the selection; the block it started in keeps the mark of its own separator (Qt gives an emptied
    first block the next block's format, mark included)."""
    if not cursor.hasSelection():
        return
    doc = cursor.document()
    keep = _marked(doc.findBlock(cursor.selectionStart()))  # its separator survives the removal
    cursor.removeSelectedText()
    if has_breaks(doc) and _marked(cursor.block()) != keep:
        fmt = cursor.blockFormat()
        if keep:
            fmt.setProperty(MARK, keep)
        else:
            fmt.clearProperty(MARK)
        cursor.setBlockFormat(fmt)


def delete(cursor: QTextCursor, *, backward: bool, word: bool = False) -> None:
    """Backspace (`backward`) or Delete, a word at a time with `word`: the selection, else the character (or
    word) before or after the cursor, as one edit block, the marks kept right (see `_remove_selection`)."""
    cursor.beginEditBlock()
    try:
        if not cursor.hasSelection():
            if word:
                op = (
                    QTextCursor.MoveOperation.PreviousWord if backward else QTextCursor.MoveOperation.NextWord
                )
            else:
                op = (
                    QTextCursor.MoveOperation.PreviousCharacter
                    if backward
                    else QTextCursor.MoveOperation.NextCharacter
                )
            cursor.movePosition(op, QTextCursor.MoveMode.KeepAnchor)
        _remove_selection(cursor)
    finally:
        cursor.endEditBlock()


def _cuts(text: str, step: int) -> list[int]:
    """Offsets of spaces in `text`, about `step` apart, where a display break may stand."""
    cuts: list[int] = []
    last = 0
    while len(text) - last > step:
        at = text.rfind(" ", last + step // 2, last + step)
        if at < 0:
            at = text.find(" ", last + step)
            if at < 0:
                break
        cuts.append(at)
        last = at + 1
    return cuts


def add_breaks(doc: QTextDocument, *, long_line: int = LONG_LINE, step: int = STEP) -> int:
    """Cut every line longer than `long_line` into display blocks (at spaces); returns how many breaks were
    made. Meant right after the text is set (open, reload, restore; setPlainText clears the undo history): it
    leaves no undo step, and the caller clears the modified flag. A line with no space in it stays one block
    (slow, never wrong)."""
    doc.setProperty(_FLAG, False)  # the text was just set, the undo history with it: no old break can return
    guard = doc.findChild(_Guard)
    raw = doc.toRawText()
    lines = raw.split("\u2029")
    if not any(len(line) > long_line for line in lines):
        if guard is not None:
            guard.settle()  # forget the marks of the text that was there before
        return 0
    # Cut in Python (code points), set the cut text once, then mark blocks by number: one setPlainText is fast
    # (0.1 s at 5 MB) where 1,250 in-place splits of a 5 MB block took minutes. Qt must then hold exactly the
    # old text with those spaces as breaks, or the old text is put back unchanged.
    pieces: list[str] = []
    soft: list[int] = []  # block numbers that follow a display break
    for line in lines:
        start = 0
        for at in _cuts(line, step) if len(line) > long_line else []:
            pieces.append(line[start:at])
            soft.append(len(pieces))
            start = at + 1
        pieces.append(line[start:])
    expected = "\u2029".join(pieces)
    if guard is not None:
        guard.busy = True
    undo = doc.isUndoRedoEnabled()
    doc.setPlainText(expected)
    if doc.toRawText() != expected or doc.blockCount() != len(pieces):
        doc.setPlainText(raw)
        if guard is not None:
            guard.settle()
        return 0
    doc.setProperty(_FLAG, True)
    doc.setUndoRedoEnabled(False)
    cursor = QTextCursor(doc)
    cursor.beginEditBlock()
    made = 0
    try:
        for number in soft:
            block = doc.findBlockByNumber(number)
            fmt = _clean(block.blockFormat())
            fmt.setProperty(MARK, next(_ids))
            QTextCursor(block).setBlockFormat(fmt)
            made += 1
    finally:
        cursor.endEditBlock()
        doc.setUndoRedoEnabled(undo)
    if guard is None:
        guard = _Guard(doc)
    guard.settle()
    return made


class _Guard(QObject):
    """Keeps each block's mark that of the separator before it through Qt's deletions (an empty block merged
    with a marked one takes the mark). Changing the document inside `contentsChange` crashes Qt, so a change
    is only noted there; `settle_edits` (the editor calls it after every key, paste and input-method event,
    and a zero timer after any other edit) puts the mark back, joined to the same undo step."""

    def __init__(self, doc: QTextDocument) -> None:
        super().__init__(doc)
        self.doc = doc
        self.busy = False
        self.marks: dict[int, int] = {}
        self.pending: list[int] = []
        doc.contentsChange.connect(self._on_change)

    def settle(self) -> None:
        self.busy = False
        self.marks = {}
        block = self.doc.begin()
        while block.isValid():
            mark = _marked(block)
            if mark and block.position() > 0:
                self.marks[block.position() - 1] = mark
            block = block.next()

    def _on_change(self, pos: int, removed: int, added: int) -> None:
        if self.busy or not has_breaks(self.doc):
            return
        if not self.pending:
            QTimer.singleShot(0, self.apply)
        self.pending.append(pos)

    def apply(self) -> None:
        if not self.pending or self.busy or not has_breaks(self.doc):
            self.pending.clear()
            return
        first = min(self.pending)
        for pos in self.pending:
            block = self.doc.findBlock(pos)
            lead = block.position() - 1
            if not block.isValid() or lead < 0 or lead >= first:
                continue  # only a separator before every change is known to be the one it was
            want = self.marks.get(lead, 0)
            if _marked(block) == want:
                continue
            fmt = block.blockFormat()
            if want:
                fmt.setProperty(MARK, want)
            else:
                fmt.clearProperty(MARK)
            cursor = QTextCursor(block)
            self.busy = True
            try:
                cursor.joinPreviousEditBlock()
                cursor.setBlockFormat(fmt)
                cursor.endEditBlock()
            finally:
                self.busy = False
        self.pending.clear()
        self.settle()


def after_undo_redo(doc: QTextDocument) -> None:
    """Undo and redo restore the marks themselves: forget the changes they made instead of repairing them."""
    guard = doc.findChild(_Guard)
    if guard is not None:
        guard.pending.clear()
        guard.settle()


def settle_edits(doc: QTextDocument) -> None:
    """Apply the mark repairs noted since the last edit (see `_Guard`); cheap when there is nothing to do."""
    guard = doc.findChild(_Guard)
    if guard is not None:
        guard.apply()


def _pattern(needle: str, case_sensitive: bool, whole_word: bool) -> re.Pattern[str]:
    pattern = re.escape(needle)
    if whole_word:
        pattern = rf"(?<!\w){pattern}(?!\w)"
    return re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)


def find_all_real(
    doc: QTextDocument, needle: str, *, case_sensitive: bool = False, whole_word: bool = False
) -> list[tuple[int, int]]:
    """Every match of `needle` in the real text, in order (what replace all replaces)."""
    if not needle:
        return []
    rx = _pattern(needle, case_sensitive, whole_word)
    text = real_text(doc)
    spans = [(m.start(), m.end()) for m in rx.finditer(text)]
    units = to_units(text, [x for span in spans for x in span])
    return list(zip(units[0::2], units[1::2], strict=True))


def find_real(
    doc: QTextDocument,
    needle: str,
    start: int,
    *,
    backward: bool = False,
    case_sensitive: bool = False,
    whole_word: bool = False,
) -> tuple[int, int] | None:
    """The next match of `needle` in the real text from `start` (before it, `backward`): Qt's own find never
    matches across a block break, so a phrase cut by a display break would not be found."""
    if not needle:
        return None
    rx = _pattern(needle, case_sensitive, whole_word)
    text = real_text(doc)
    begin = _to_code_points(text, start)
    if not backward:
        m = rx.search(text, begin)
        best = (m.start(), m.end()) if m else None
    else:
        best = None
        for m in rx.finditer(text, 0, begin):
            best = (m.start(), m.end())
    if best is None:
        return None
    s, e = to_units(text, list(best))
    return s, e


def _to_code_points(text: str, units: int) -> int:
    """A document position (UTF-16 units) as an offset into `text` (code points)."""
    if text.isascii():
        return min(units, len(text))
    head = text.encode("utf-16-le")[: units * 2]
    return len(head.decode("utf-16-le", "surrogatepass"))
