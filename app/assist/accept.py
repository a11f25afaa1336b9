"""Reading and writing the document around a suggestion: the plain text of a range, the context a request
carries, the probe that tells whether an edit touched the region (`TextAround`); and the one edit an accept
makes (`write_accept`): the region replaced by the accepted prefix joined to the writer's text
(`app.assist.joins`), as exactly one undo step. The document only ever holds the original, or the original's
region replaced by a prefix of the alternative: never both side by side."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

from PySide6.QtGui import QTextCursor

from app.assist.joins import Joined, join, units
from app.assist.suggestion import Suggestion, plain
from app.ui.display_breaks import insert_plain, selected_text
from app.ui.editor import Editor
from engine.api import Span

PROBE_CHARS = 32


class TextAround:
    """The plain text of one editor's document around a region (UTF-16 positions, as Qt counts them)."""

    def __init__(self, editor: Editor) -> None:
        self.editor = editor

    def text(self, s: int, e: int) -> str:
        cursor = QTextCursor(self.editor.document())
        cursor.setPosition(s)
        cursor.setPosition(e, QTextCursor.MoveMode.KeepAnchor)
        return plain(selected_text(cursor))

    def context(self, s: int, e: int) -> tuple[str, str]:
        """The whole document before and after the region: the engine sizes it in tokens to the model's
        context (keeping the document's beginning and the text nearest the region) and its notice says what
        was left out."""
        last = self.editor.document().characterCount() - 1
        return self.text(0, s), self.text(e, last)

    def probe(self, s: int, e: int) -> str:
        """The region with a few characters either side: an edit that changes it touched the suggestion."""
        last = self.editor.document().characterCount() - 1
        return self.text(max(0, s - PROBE_CHARS), min(last, e + PROBE_CHARS))

    def char_before(self, pos: int) -> str:
        return self.text(max(0, pos - 2), pos)[-1:] if pos > 0 else ""

    def char_after(self, pos: int) -> str:
        last = self.editor.document().characterCount() - 1
        return self.text(pos, min(last, pos + 2))[:1] if pos < last else ""


class Mute:
    """A flag held while the assistant makes its own edit (its contents-change slot lets that through)."""

    def __init__(self) -> None:
        self.on = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.on = True
        try:
            yield
        finally:
            self.on = False


def write_accept(
    around: TextAround,
    sug: Suggestion,
    chunk: str,
    *,
    complete: bool,
    muted: Callable[[], contextlib.AbstractContextManager[None]],
) -> tuple[str, Joined]:
    """Put the accepted text (what was accepted before, then `chunk`) in the suggestion's region as one undo
    step, the caret after it; `muted()` is held around the edit (the assistant's own, not the writer's).
    Returns the accepted text and how it was joined."""
    editor = around.editor
    accepted = sug.accepted + chunk
    s, e = sug.full()
    joined = join(
        around.char_before(s), accepted, around.char_after(e), original=sug.original, complete=complete
    )
    new = joined.text
    old = around.text(s, e)
    keep_head = keep_tail = 0
    if sug.accepted:  # the region is already ours: change only what differs (the new words, the join)
        while keep_head < min(len(old), len(new)) and old[keep_head] == new[keep_head]:
            keep_head += 1
        limit = min(len(old), len(new)) - keep_head
        while keep_tail < limit and old[-1 - keep_tail] == new[-1 - keep_tail]:
            keep_tail += 1
    head_u, tail_u = units(old[:keep_head]), units(old[len(old) - keep_tail :])
    cursor = QTextCursor(editor.document())
    with muted():
        cursor.beginEditBlock()
        cursor.setPosition(s + head_u)
        cursor.setPosition(e - tail_u, QTextCursor.MoveMode.KeepAnchor)
        insert_plain(cursor, new[keep_head : len(new) - keep_tail])
        cursor.endEditBlock()
    # what the writer types next is its own undo step, not part of this accept
    editor.seal_undo_step()
    sug.start.setPosition(s)
    sug.end.setPosition(s + units(new))
    caret = QTextCursor(editor.document())
    caret.setPosition(s + units(joined.lead + joined.core))
    editor.setTextCursor(caret)
    return accepted, joined


def drawn_spans(around: TextAround, sug: Suggestion) -> tuple[Span, ...]:
    """The spans as Tab would insert them at the region's leading edge: an inline ghost right after a word
    or a full stop gets the joining space Tab adds ("ships." + "rey" is drawn "ships. rey", not glued),
    and loses a leading space Tab would drop after the writer's own space."""
    spans = sug.spans
    if sug.layout != "inline" or sug.accepted or not spans:
        return spans
    s, e = sug.full()
    lead = join(around.char_before(s), sug.text, around.char_after(e), original=sug.original).lead
    first = next((i for i, sp in enumerate(spans) if sp.text), None)
    if first is None:
        return spans
    own = spans[first].text[: len(spans[first].text) - len(spans[first].text.lstrip())]
    if own == lead:
        return spans
    fixed = dataclasses.replace(spans[first], text=lead + spans[first].text[len(own) :])
    return (*spans[:first], fixed, *spans[first + 1 :])
