"""One suggestion on screen: its region (two live cursors that move with edits elsewhere), its alternatives
(each an engine row's words), how far its request has run, and what was accepted of it; with what an engine
step, a finished result and a partial accept change in it. And the text helpers around it: the next word an
accept takes (`next_word`), plain text from a selection (`plain`)."""

from __future__ import annotations

import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

from PySide6.QtCore import QTextBoundaryFinder
from PySide6.QtGui import QTextCursor, QTextDocument

from app.assist.ghost import Layout
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
