"""One suggestion on screen, from its request to its accept.

`Suggestion`: its region (two live cursors that move with edits elsewhere), its alternatives (each an engine
row's words), how far its request has run, and what was accepted of it; with what an engine step, a finished
result and a partial accept change in it. `TextAround`: the plain text of a range, the context a request
carries, the probe that tells whether an edit touched the region. `write_accept`: the one edit an accept
makes, the region replaced by the accepted prefix joined to the writer's text (`join`), as exactly one undo
step; the document only ever holds the original, or the original's region replaced by a prefix of the
alternative: never both side by side. And the text helpers around it: the next word an accept takes
(`next_word`), plain text from a selection (`plain`).

How an accepted suggestion meets the writer's text (`join`): whitespace at both ends of the region, fixed on
our side. A model's rewrite or infill usually starts with a space (the tokenizer's word boundary), a draft may
start with a word right after the writer's last word, and a rewrite of a selection that ended a paragraph may
come back without the paragraph break. `join` decides what the region holds for an accepted prefix, so the
document reads as if a person had typed it: no doubled spaces, no glued words, no lost paragraph break, no
space left before a newline. It only ever shapes the suggestion's own text; the writer's characters outside
the region are never touched. `join`, `needs_space` and `units` are pure functions of strings (no Qt), so the
rules are tested directly and the window tests check their effect.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from PySide6.QtCore import QTextBoundaryFinder
from PySide6.QtGui import QTextCursor, QTextDocument

from app.assist.ghost import Layout
from app.ui.display_breaks import insert_plain, selected_text
from app.ui.editor import Editor
from engine.api import Request, Result, Span, StepEvent

Kind = Literal["draft", "rewrite", "infill"]
_WORD = re.compile(r"\s*\S+")


@dataclass
class Suggestion:
    request_id: int
    kind: Kind
    layout: Layout
    start: QTextCursor
    end: QTextCursor
    probe: str
    last: tuple[int, int]
    submitted: float
    alternatives: list[tuple[Span, ...]] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # the engine row of each alternative (its identity)
    row_spans: dict[int, tuple[Span, ...]] = field(default_factory=dict)  # every row's latest step
    index: int = 0
    running: bool = True
    step: int = 0
    max_steps: int = 0
    error: str = ""
    first_visible: float | None = None
    wanted: int = 0  # alternatives asked for (the badge's count never exceeds it)
    original: str = ""  # what the region held when the request was made
    accepted: str = ""  # the prefix of the alternative accepted so far (the region now holds it, joined)
    trail: int = 0  # UTF-16 units of join whitespace after the accepted text, inside the region

    def full(self) -> tuple[int, int]:
        """The document range this suggestion owns: the original, or what was accepted in its place."""
        return self.start.position(), self.end.position()

    request: Request | None = None  # what produced it (re-roll and strength changes start from it)
    scores: list[float] = field(default_factory=list)  # finished alternatives' mean confidence

    def region(self) -> tuple[int, int]:
        """Where the ghost is drawn: the original (struck through), or right after the accepted words."""
        if self.accepted:
            anchor = max(self.start.position(), self.end.position() - self.trail)
            return anchor, anchor
        return self.full()

    @property
    def spans(self) -> tuple[Span, ...]:
        return self.alternatives[self.index] if self.alternatives else ()

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @classmethod
    def over(
        cls,
        doc: QTextDocument,
        s: int,
        e: int,
        request: Request,
        kind: Kind,
        layout: Layout,
        probe: str,
        original: str,
    ) -> Suggestion:
        """A new suggestion for `request` over `doc`'s range s..e (which held `original`), timed from now."""
        start, end = QTextCursor(doc), QTextCursor(doc)
        start.setPosition(s)
        end.setPosition(e)
        start.setKeepPositionOnInsert(False)  # typing just before the region stays before it
        end.setKeepPositionOnInsert(True)  # typing just after the region stays after it
        return cls(
            request.request_id,
            kind,
            layout,
            start,
            end,
            probe,
            (s, e),
            time.perf_counter(),
            wanted=max(1, request.settings.candidates),
            original=original,
            request=request,
        )

    def badge(self, hints: list[str]) -> str:
        """The line beside the ghost: the step while it runs, which alternative of how many, the `hints`
        ("Tab accept") once it settled; nothing for an error."""
        count = len(self.alternatives)
        if self.error:
            return ""
        if self.running:
            badge = f"step {self.step}/{self.max_steps}" if self.max_steps else "starting…"
            return badge + (f" · {self.index + 1}/{count}" if count > 1 else "")
        return " · ".join(([f"{self.index + 1}/{count}"] if count > 1 else []) + hints)

    # -- what the engine's events and an accept change ------------------------------------------------------

    def take_step(self, event: StepEvent, now: float) -> None:
        """A denoising step of this suggestion's request: every row's latest words, the alternatives worth
        cycling through (as the finished result will offer them), the step count, the first visible time."""
        self.row_spans = {c.row: c.spans for c in event.candidates}
        offered = _offered([(c.row, c.spans) for c in event.candidates], self.wanted)
        self.rows, self.alternatives = [row for row, _ in offered], [spans for _, spans in offered]
        self.index = min(self.index, len(self.alternatives) - 1)
        self.step, self.max_steps = event.step, event.max_steps
        if self.first_visible is None and self.text.strip():
            self.first_visible = now - self.submitted

    def finish(self, result: Result) -> bool:
        """The request finished: its candidates become the alternatives; False when none has text."""
        self.running = False
        finals: list[tuple[Span, ...]] = []
        rows: list[int] = []
        scores: list[float] = []
        # The engine may return its rows reordered (an infill best first) or fewer (duplicates dropped): each
        # candidate names the row it finished in, so that row's words, confidences and pins survive. The
        # result's text is what is accepted: a row whose last step says otherwise shows the result's text.
        for cand in result.candidates:
            if not cand.text.strip():
                continue
            shown = self.row_spans.get(cand.row)
            if shown is None or "".join(s.text for s in shown) != cand.text:
                shown = (Span(cand.text, cand.confidence),)
            finals.append(shown)
            rows.append(cand.row)
            scores.append(cand.confidence)
        if not finals:
            return False
        self.alternatives, self.rows = finals, rows
        self.scores = scores
        self.index = min(self.index, len(finals) - 1)
        return True

    def keep_rest(self, chunk: str, accepted: str, trail: int) -> None:
        """After a partial accept of `chunk`: the rest of this alternative stays as ghost text right after the
        accepted words (`accepted` so far, `trail` units of join whitespace after them)."""
        self.rows = self.rows[self.index : self.index + 1]
        self.alternatives = [_drop_prefix(self.spans, len(chunk))]
        self.scores = []
        self.index = 0
        self.accepted = accepted
        self.trail = trail
        self.layout = "inline"


def _offered(rows: list[tuple[int, tuple[Span, ...]]], wanted: int) -> list[tuple[int, tuple[Span, ...]]]:
    """The rows (engine row, spans) worth cycling through while denoising, as the finished result will offer
    them: rows with text, no repeats, at most `wanted` (an infill searches more lengths than it returns)."""
    seen: set[str] = set()
    kept: list[tuple[int, tuple[Span, ...]]] = []
    for row, spans in rows:
        text = "".join(s.text for s in spans)
        if text.strip() and text not in seen:
            seen.add(text)
            kept.append((row, spans))
    return (kept or rows[:1])[: max(1, wanted)]


def next_word(text: str) -> str:
    """The next word of `text` with the whitespace before it: up to the next space in spaced scripts ("night."
    stays whole), but at a Unicode word boundary inside Chinese or Japanese, which have no spaces (the space
    rule took the whole suggestion at once); there a word is what Ctrl+Right moves the caret over in the
    editor, and closing punctuation goes with it."""
    match = _WORD.match(text)
    if match is None:
        return text
    chunk = match.group(0)
    body = chunk.lstrip()
    lead = len(chunk) - len(body)
    if not any(ch.isalpha() and unicodedata.east_asian_width(ch) in ("W", "F") for ch in body):
        return chunk
    finder = QTextBoundaryFinder(QTextBoundaryFinder.BoundaryType.Word, body)
    offsets: list[int] = []  # UTF-16 unit -> code point index (the finder counts in UTF-16 units)
    for i, ch in enumerate(body):
        offsets.extend([i] * (2 if ord(ch) > 0xFFFF else 1))
    offsets.append(len(body))
    end = 0
    while not any(ch.isalnum() for ch in body[:end]):
        unit = finder.toNextBoundary()
        if unit < 0 or unit >= len(offsets) - 1:
            return chunk
        end = offsets[unit]
    while end < len(body) and not body[end].isalnum() and not body[end].isspace():
        end += 1
    return chunk[: lead + end]


def _drop_prefix(spans: tuple[Span, ...], n: int) -> tuple[Span, ...]:
    out: list[Span] = []
    for span in spans:
        if n >= len(span.text):
            n -= len(span.text)
            continue
        out.append(Span(span.text[n:], span.confidence, span.pinned) if n else span)
        n = 0
    return tuple(out)


def plain(selected: str) -> str:
    """QTextCursor.selectedText() uses U+2029/U+2028 for line breaks; the engine wants "\n"."""
    text = selected.replace("\u2029", "\n").replace("\u2028", "\n")
    # A window edge may cut a surrogate pair in half; drop the orphan rather than send invalid text.
    if text and "\ud800" <= text[0] <= "\udfff":
        text = text[1:]
    if text and "\ud800" <= text[-1] <= "\udfff":
        text = text[:-1]
    return text


# -- the text around a suggestion, and its accept ----------------------------------------------------------

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


AcceptPart = Literal["all", "word", "line"]


def accept_chunk(text: str, part: AcceptPart, line_length: Callable[[], int]) -> tuple[str, bool]:
    """What an accept of `part` takes of the ghost `text` (`line_length()`: the ghost's first visual line),
    and whether that is all of it."""
    if part == "all":
        chunk = text
    elif part == "word":
        chunk = next_word(text)
    else:
        chunk = text[: line_length()] or text
    complete = chunk == text
    if not complete and chunk.rstrip(" \t").strip():
        # A visual line ends with the space where it wrapped (the real engine's words keep their trailing
        # space): that space stays with the ghost, so it never doubles the writer's own space after the
        # region.
        chunk = chunk.rstrip(" \t")
    return chunk, complete


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


# -- how accepted text joins the writer's text (pure functions of strings) --------------------------------

H_SPACE = " \t"
# After these, a following word needs a space ("night." + "She" -> "night. She").
_CLOSERS = frozenset(".,;:!?)]}”’…")
_SPACE_BEFORE_NEWLINE = re.compile(r"[ \t]+\n")


@dataclass(frozen=True)
class Joined:
    """What the region holds: `lead` + `core` + `trail`; a remaining ghost continues right after `core`."""

    lead: str
    core: str
    trail: str

    @property
    def text(self) -> str:
        return self.lead + self.core + self.trail


def _wordlike(ch: str) -> bool:
    """A letter or digit of a script that separates words with spaces (not CJK, whose words are not
    spaced)."""
    return bool(ch) and ch.isalnum() and unicodedata.east_asian_width(ch) not in ("W", "F")


def needs_space(left: str, right: str) -> bool:
    """True when writing `right` directly after `left` would glue two words together."""
    return bool(left) and bool(right) and _wordlike(right) and (_wordlike(left) or left in _CLOSERS)


def _split_lead(text: str) -> tuple[str, str]:
    body = text.lstrip()
    return text[: len(text) - len(body)], body


def _split_trail(text: str) -> tuple[str, str]:
    body = text.rstrip()
    return body, text[len(body) :]


def join(left: str, text: str, right: str, *, original: str = "", complete: bool = True) -> Joined:
    """The region's text for the accepted `text`, between the writer's `left` and `right` characters.

    `left`/`right`: the document's character just before / just after the region ("" at a document edge).
    `original`: what the region held before (the selection a rewrite or infill replaces; "" for a draft),
    whose paragraph breaks at either end are kept. `complete`: `text` is the whole suggestion (its end meets
    `right`); otherwise a ghost still continues after it and only a separator is added so nothing reads glued
    meanwhile.
    """
    o_lead, o_rest = _split_lead(original)
    o_trail = _split_trail(o_rest)[1] if o_rest else ""
    # On the blank line between two paragraphs the text is a paragraph of its own: it was glued to both.
    own_line = left == "\n" and right == "\n" and not original.strip()
    # Leading end.
    ws, body = _split_lead(text)
    if ("\n" in o_lead and "\n" not in ws) or (
        not ws and o_lead
    ):  # the selection began with a paragraph break: keep it
        ws = o_lead
    if not left or left.isspace():  # a space after a space (or at the very start) doubles or dangles
        ws = ws.lstrip(H_SPACE)
    elif not ws and body and needs_space(left, body[0]):
        ws = " "
    ws = _SPACE_BEFORE_NEWLINE.sub("\n", ws)
    if own_line and body and "\n" not in ws:
        ws = "\n"
    if not body:  # all whitespace so far: only what separates is kept
        return Joined(ws if complete or "\n" in ws else "", "", "")
    if not complete:
        trail = ""
        if "\n" in o_trail and not body.endswith("\n"):
            trail = o_trail  # the paragraph break after the selection stays while the rest is still ghost
        elif o_trail and right and not right.isspace():
            trail = o_trail
        elif needs_space(body[-1], right):
            trail = " "
        return Joined(ws, body, _SPACE_BEFORE_NEWLINE.sub("\n", trail) if right else trail.rstrip(H_SPACE))
    # Trailing end of a complete suggestion.
    body, tws = _split_trail(body)
    if ("\n" in o_trail and "\n" not in tws) or (not tws and o_trail and right):
        tws = o_trail
    if not right or right.isspace():
        tws = tws.rstrip(H_SPACE)
    elif not tws and needs_space(body[-1], right):
        tws = " "
    if own_line and "\n" not in tws:
        tws = "\n"
    return Joined(ws, body, _SPACE_BEFORE_NEWLINE.sub("\n", tws))


def units(text: str) -> int:
    """Length in UTF-16 code units, the unit of Qt's document positions."""
    return len(text.encode("utf-16-le")) // 2
