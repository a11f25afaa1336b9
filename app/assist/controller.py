"""The assistant: the only module that knows both the engine API and the widgets.

It turns the selection/cursor into an immutable request with a new id, sends it to the engine host (latest
request wins), drops events of requests it no longer cares about, feeds the ghost painter, and applies accepts
(all, next word, next line) as exactly one undo step each.

The suggestion's region is held by two live `QTextCursor`s, so it moves with edits made elsewhere. An edit
that touches the region (typing at a draft's anchor, changing the selected text of a rewrite, undoing a
partial accept) cancels and removes the suggestion; the writer's text is never overwritten.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from PySide6.QtCore import QObject, QTextBoundaryFinder, Signal, Slot
from PySide6.QtGui import QTextCursor

from app.assist.engine_host import EngineHost
from app.assist.ghost import GhostContent, GhostPainter, Layout
from app.assist.joins import join, units
from app.assist.request_defaults import RequestDefaults
from app.config.commands import default_key
from app.platform.privacy import DocumentText
from app.ui.display_breaks import insert_plain, selected_text
from app.ui.editor import Editor
from engine.api import (
    REWRITE_PRESETS,
    DenoiseSettings,
    DraftRequest,
    EngineError,
    InfillRequest,
    Request,
    Result,
    RewriteRequest,
    Span,
    Stats,
    StepEvent,
)

log = logging.getLogger(__name__)

GhostState = Literal["idle", "denoising", "ready", "error"]
Kind = Literal["draft", "rewrite", "infill"]
PROBE_CHARS = 32
_WORD = re.compile(r"\s*\S+")


@dataclass
class _Suggestion:
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


class Assistant(QObject):
    """Drives draft / rewrite / infill for one editor and one engine host."""

    changed = Signal()  # state, visibility or alternatives changed (enable/disable actions)
    stateChanged = Signal(str)
    finishedStats = Signal(object, float)  # Stats, seconds from request to first visible draft
    message = Signal(str)  # a line for the status bar
    activityChanged = Signal(str)  # what runs now ("Rewriting: …"), "" when nothing runs

    def __init__(
        self,
        editor: Editor,
        host: EngineHost,
        settings: Any | None = None,
        *,
        defaults: RequestDefaults | None = None,
    ) -> None:
        super().__init__(editor)
        self.editor = editor
        self.host = host
        self.settings = settings
        self.ghost = GhostPainter(editor)
        self.stale_events = 0
        self._sug: _Suggestion | None = None
        self._state: GhostState = "idle"
        self._muted = False
        self.activity = ""
        # The brief, document identity and strength per instruction every request carries, given by the window
        # (the brief and the strength dial plug their sources into it).
        self.defaults = defaults if defaults is not None else RequestDefaults()
        # Views drawn over the ghost content (app.assist.editing: pins, word diff); see `add_view_hook`.
        self.view_hooks: list[Callable[[_Suggestion, GhostContent], GhostContent]] = []
        self._publish()
        host.stepped.connect(self._on_step)
        host.finished.connect(self._on_finished)
        host.failed.connect(self._on_failed)
        editor.document().contentsChange.connect(self._on_contents_change)

    def add_view_hook(self, hook: Callable[[_Suggestion, GhostContent], GhostContent]) -> None:
        """Draw `hook(suggestion, content)` over every ghost shown from now on (in the order added)."""
        self.view_hooks.append(hook)

    # -- what the window asks --------------------------------------------------------------------------------

    @property
    def state(self) -> GhostState:
        return self._state

    @property
    def ghost_text(self) -> str:
        return self._sug.text if self._sug and not self._sug.error else ""

    @property
    def suggestion_visible(self) -> bool:
        return bool(self.ghost_text)

    @property
    def active(self) -> bool:
        """Something is shown or running (Esc has something to dismiss)."""
        return self._sug is not None

    @property
    def alternatives(self) -> tuple[int, int]:
        """(current index, count) of the visible suggestion's alternatives."""
        return (self._sug.index, len(self._sug.alternatives)) if self._sug else (0, 0)

    def presets(self) -> dict[str, str]:
        if self.settings is not None:
            try:
                return dict(self.settings.rewrite_presets())
            except Exception:
                log.exception("rewrite presets unavailable")
        return dict(REWRITE_PRESETS)

    # -- requests --------------------------------------------------------------------------------------------

    def draft(self, instruction: str = "") -> int | None:
        """Draft new text at the cursor (after the selection, if there is one)."""
        pos = self.editor.textCursor().selectionEnd()
        before, after = self._context(pos, pos)
        if not before.strip() and not instruction.strip():  # said at once, not after waiting for the model
            self.message.emit(
                "Write a few words first (or give an instruction) so there is something to continue."
            )
            return None
        request = DraftRequest(
            before=before,
            instruction=instruction,
            after=after,
            max_new_tokens=self._draft_length(),
            settings=self._denoise(),
        )
        return self._start(
            request,
            "draft",
            pos,
            pos,
            "inline",
            f"Drafting: {_brief(instruction)}…" if instruction.strip() else "Drafting…",
        )

    @property
    def suggestion(self) -> _Suggestion | None:
        """The current suggestion (read it; change it through the methods here)."""
        return self._sug

    def rewrite(self, instruction: str, strength: float | None = None) -> int | None:
        """Rewrite the selection following `instruction` (a preset's text or the writer's own); `strength`
        (the share re-noised) defaults to what `defaults` remembers for that instruction, else 1.0."""
        cursor = self.editor.textCursor()
        if not cursor.hasSelection() or not _plain(selected_text(cursor)).strip():
            key = self._key("rewrite")
            self.message.emit(
                "Select the text you want rewritten first, then choose Rewrite"
                + (f" ({key})." if key else ".")
            )
            return None
        s, e = cursor.selectionStart(), cursor.selectionEnd()
        before, after = self._context(s, e)
        instruction = instruction or self.presets().get("grammar", "")
        if strength is None:
            strength = self.defaults.strength(instruction)
        request = RewriteRequest(
            selection=self._text(s, e),
            instruction=instruction,
            before=before,
            after=after,
            settings=self._denoise(),
            strength=1.0 if strength is None else min(1.0, max(0.1, strength)),
        )
        return self._start(request, "rewrite", s, e, "below", f"Rewriting: {_brief(request.instruction)}…")

    def restart(self, request: Request) -> int | None:
        """Run `request` over the current suggestion's region (re-roll, pins, a new strength), keeping the
        shown text in place until the first new step lands (no flash of an empty ghost)."""
        old = self._sug
        if old is None:
            return None
        s, e = old.full()
        shown = old.alternatives[old.index : old.index + 1]
        shown_rows = old.rows[old.index : old.index + 1]
        request_id = self._start(request, old.kind, s, e, old.layout, "Re-rolling…")
        if self._sug is not None:
            self._sug.alternatives, self._sug.rows = list(shown), list(shown_rows)
            self._show()
        return request_id

    def show_alternative(self, index: int) -> bool:
        """Show alternative `index` of the current suggestion as the ghost."""
        sug = self._sug
        if sug is None or not 0 <= index < len(sug.alternatives):
            return False
        sug.index = index
        self._show()
        return True

    def infill(self, instruction: str = "") -> int | None:
        """Fill the selection (replacing it) or the gap at the cursor so it joins the text around it."""
        cursor = self.editor.textCursor()
        s, e = cursor.selectionStart(), cursor.selectionEnd()
        before, after = self._context(s, e)
        request = InfillRequest(before=before, after=after, instruction=instruction, settings=self._denoise())
        what = "Filling in the selection" if e > s else "Filling the gap"
        return self._start(
            request,
            "infill",
            s,
            e,
            "below" if e > s else "inline",
            f"{what}: {_brief(instruction)}…" if instruction.strip() else f"{what}…",
        )

    # -- accept / dismiss / alternatives ---------------------------------------------------------------------

    def accept_all(self) -> bool:
        return self._accept("all")

    def accept_word(self) -> bool:
        return self._accept("word")

    def accept_line(self) -> bool:
        return self._accept("line")

    def dismiss(self) -> bool:
        """Hide the suggestion and stop its request; the document is untouched."""
        if self._sug is None:
            return False
        self._drop(cancel=True)
        self.message.emit("Suggestion dismissed.")
        return True

    def next_alternative(self) -> bool:
        return self._cycle(1)

    def previous_alternative(self) -> bool:
        return self._cycle(-1)

    # -- internals: requests ---------------------------------------------------------------------------------

    def _start(self, request: Request, kind: Kind, s: int, e: int, layout: Layout, activity: str = "") -> int:
        if self._sug is not None:
            self._drop(cancel=True, publish=False)
        request = self.defaults.apply(request)
        doc = self.editor.document()
        start, end = QTextCursor(doc), QTextCursor(doc)
        start.setPosition(s)
        end.setPosition(e)
        start.setKeepPositionOnInsert(False)  # typing just before the region stays before it
        end.setKeepPositionOnInsert(True)  # typing just after the region stays after it
        self._sug = _Suggestion(
            request.request_id,
            kind,
            layout,
            start,
            end,
            self._probe(s, e),
            (s, e),
            time.perf_counter(),
            wanted=max(1, request.settings.candidates),
            original=self._text(s, e),
            request=request,
        )
        self.host.submit(request)
        if e > s:  # show the original dimmed and struck through, not hidden under the selection colour
            cursor = self.editor.textCursor()
            cursor.clearSelection()
            self.editor.setTextCursor(cursor)
        self._set_state("denoising")
        self.activity = activity
        self.activityChanged.emit(activity)
        self._show()
        # The text the request works on: in the log only while Settings ▸ privacy.log_document_text is on
        # (app.platform.privacy replaces it by its length otherwise).
        text = self._sug.original or getattr(request, "before", "")[-400:]
        log.info("%s request %s submitted for %s", kind, request.request_id, DocumentText(text))
        return request.request_id

    def _denoise(self) -> DenoiseSettings:
        if self.settings is not None:
            try:
                return self.settings.denoise_settings()
            except Exception:
                log.exception("denoise settings unavailable; using defaults")
        return DenoiseSettings()

    def _draft_length(self) -> int:
        if self.settings is not None:
            try:
                return int(self.settings["draft.length"])
            except Exception:
                log.exception("draft length unavailable")
        return 128

    def _context(self, s: int, e: int) -> tuple[str, str]:
        """The whole document before and after the region: the engine sizes it in tokens to the model's
        context (keeping the document's beginning and the text nearest the region) and its notice says what
        was left out."""
        last = self.editor.document().characterCount() - 1
        return self._text(0, s), self._text(e, last)

    def _text(self, s: int, e: int) -> str:
        cursor = QTextCursor(self.editor.document())
        cursor.setPosition(s)
        cursor.setPosition(e, QTextCursor.MoveMode.KeepAnchor)
        return _plain(selected_text(cursor))

    def _probe(self, s: int, e: int) -> str:
        last = self.editor.document().characterCount() - 1
        return self._text(max(0, s - PROBE_CHARS), min(last, e + PROBE_CHARS))

    # -- internals: events -----------------------------------------------------------------------------------

    def _current(self, request_id: int) -> _Suggestion | None:
        sug = self._sug
        if sug is None or sug.request_id != request_id or not sug.running:
            self.stale_events += 1
            return None
        return sug

    @Slot(object)
    def _on_step(self, event: StepEvent) -> None:
        sug = self._current(event.request_id)
        if sug is None or not event.candidates:
            return
        sug.row_spans = {c.row: c.spans for c in event.candidates}
        offered = _offered([(c.row, c.spans) for c in event.candidates], sug.wanted)
        sug.rows, sug.alternatives = [row for row, _ in offered], [spans for _, spans in offered]
        sug.index = min(sug.index, len(sug.alternatives) - 1)
        sug.step, sug.max_steps = event.step, event.max_steps
        if sug.first_visible is None and sug.text.strip():
            sug.first_visible = time.perf_counter() - sug.submitted
        self._show()

    @Slot(object)
    def _on_finished(self, result: Result) -> None:
        sug = self._current(result.request_id)
        if sug is None:
            return
        if result.cancelled:  # stopped from elsewhere (e.g. a model being loaded): nothing is left to show
            self._drop(cancel=False)
            self.message.emit("The suggestion was stopped before it finished.")
            return
        sug.running = False
        finals: list[tuple[Span, ...]] = []
        rows: list[int] = []
        scores: list[float] = []
        # The engine may return its rows reordered (an infill best first) or fewer (duplicates dropped): each
        # candidate names the row it finished in, so that row's words, confidences and pins survive. The
        # result's text is what is accepted: a row whose last step says otherwise shows the result's text.
        for cand in result.candidates:
            if not cand.text.strip():
                continue
            shown = sug.row_spans.get(cand.row)
            if shown is None or "".join(s.text for s in shown) != cand.text:
                shown = (Span(cand.text, cand.confidence),)
            finals.append(shown)
            rows.append(cand.row)
            scores.append(cand.confidence)
        if result.notice:
            self.message.emit(result.notice)
        first = sug.first_visible if sug.first_visible is not None else time.perf_counter() - sug.submitted
        self.finishedStats.emit(result.stats, first)
        if not finals:
            self._fail(
                sug, "The model returned no text. Try again, or change the instruction or the selection."
            )
            return
        sug.alternatives, sug.rows = finals, rows
        sug.scores = scores
        sug.index = min(sug.index, len(finals) - 1)
        self._set_state("ready")
        self._show()

    @Slot(int, object)
    def _on_failed(self, request_id: int, error: EngineError) -> None:
        sug = self._current(request_id)
        if sug is None:
            return
        sug.running = False
        self._fail(sug, getattr(error, "message", str(error)))

    def _fail(self, sug: _Suggestion, message: str) -> None:
        sug.error = message
        sug.alternatives, sug.rows = [], []
        self._set_state("error")
        self._show()
        self.message.emit(message)

    # -- internals: edits ------------------------------------------------------------------------------------

    @Slot(int, int, int)
    def _on_contents_change(self, pos: int, removed: int, added: int) -> None:
        sug = self._sug
        if sug is None or self._muted:
            return
        s, e = sug.full()
        old_s, old_e = sug.last
        touches = pos <= old_e and pos + removed >= old_s
        if s > e or (touches and self._probe(s, e) != sug.probe):
            self._drop(cancel=True)
            if getattr(self.editor, "in_undo_redo", False):
                self.message.emit("Suggestion closed: undo took back what was accepted of it.")
            else:
                self.message.emit("Suggestion cancelled because you edited its text.")
            return
        if (s, e) != sug.last:
            sug.last = (s, e)
            sug.probe = self._probe(s, e)
            self._show()

    def _accept(self, part: Literal["all", "word", "line"]) -> bool:
        """Accept all, the next word or the next visual line of the visible alternative, as one undo step.

        The region (the original of a rewrite or infill, or the draft's anchor) is replaced by the accepted
        prefix joined to the writer's text (`app.assist.joins`); what is left stays as ghost text right after
        it. So the document only ever holds the original, or the original's region replaced by a prefix of the
        alternative: never both side by side.
        """
        sug = self._sug
        if sug is None or not self.suggestion_visible:
            return False
        if sug.running:  # accept what is visible now; stop refining it
            self.host.cancel()
            sug.running = False
        text = sug.text
        if part == "all":
            chunk = text
        elif part == "word":
            chunk = _next_word(text)
        else:
            chunk = text[: self.ghost.first_line_length(sug.spans)] or text
        complete = chunk == text
        if not complete and chunk.rstrip(" \t").strip():
            # A visual line ends with the space where it wrapped (the real engine's words keep their trailing
            # space): that space stays with the ghost, so it never doubles the writer's own space after the
            # region.
            chunk = chunk.rstrip(" \t")
        accepted = sug.accepted + chunk
        s, e = sug.full()
        joined = join(
            self._char_before(s), accepted, self._char_after(e), original=sug.original, complete=complete
        )
        new = joined.text
        old = self._text(s, e)
        keep_head = keep_tail = 0
        if sug.accepted:  # the region is already ours: change only what differs (the new words, the join)
            while keep_head < min(len(old), len(new)) and old[keep_head] == new[keep_head]:
                keep_head += 1
            limit = min(len(old), len(new)) - keep_head
            while keep_tail < limit and old[-1 - keep_tail] == new[-1 - keep_tail]:
                keep_tail += 1
        head_u, tail_u = units(old[:keep_head]), units(old[len(old) - keep_tail :])
        cursor = QTextCursor(self.editor.document())
        self._muted = True
        try:
            cursor.beginEditBlock()
            cursor.setPosition(s + head_u)
            cursor.setPosition(e - tail_u, QTextCursor.MoveMode.KeepAnchor)
            insert_plain(cursor, new[keep_head : len(new) - keep_tail])
            cursor.endEditBlock()
        finally:
            self._muted = False
        # what the writer types next is its own undo step, not part of this accept
        self.editor.seal_undo_step()
        sug.start.setPosition(s)
        sug.end.setPosition(s + units(new))
        caret = QTextCursor(self.editor.document())
        caret.setPosition(s + units(joined.lead + joined.core))
        self.editor.setTextCursor(caret)
        if complete:
            self._drop(cancel=False)
            self.message.emit("Suggestion accepted (Ctrl+Z undoes it).")
            return True
        # Partial: the rest of this alternative stays as ghost text right after the accepted words.
        sug.rows = sug.rows[sug.index : sug.index + 1]
        sug.alternatives = [_drop_prefix(sug.spans, len(chunk))]
        sug.scores = []
        sug.index = 0
        sug.accepted = accepted
        sug.trail = units(joined.trail)
        sug.layout = "inline"
        sug.last = sug.full()
        sug.probe = self._probe(*sug.last)
        self._set_state("ready")
        self._show()
        return True

    def _key(self, name: str, default: str | None = None) -> str:
        """The key the writer bound to assistant command `name` (Settings ▸ Assistant keys), as hints name it;
        without settings, the command table's default (what is bound then)."""
        fallback = default_key(name) if default is None else default
        if self.settings is None:
            return fallback
        try:
            return str(self.settings[f"keys.{name}"])
        except Exception:  # noqa: BLE001 - a settings object without keys: the defaults are what is bound
            return fallback

    def _char_before(self, pos: int) -> str:
        return self._text(max(0, pos - 2), pos)[-1:] if pos > 0 else ""

    def _char_after(self, pos: int) -> str:
        last = self.editor.document().characterCount() - 1
        return self._text(pos, min(last, pos + 2))[:1] if pos < last else ""

    def _cycle(self, delta: int) -> bool:
        sug = self._sug
        if sug is None:
            return False
        if len(sug.alternatives) < 2:
            if not sug.running and not sug.error:
                self.message.emit(
                    "This suggestion has no other alternative."
                    if not sug.accepted
                    else "Only the rest of the accepted alternative is left; Esc dismisses it."
                )
            return False
        sug.index = (sug.index + delta) % len(sug.alternatives)
        self._show()
        return True

    def _drop(self, *, cancel: bool, publish: bool = True) -> None:
        sug, self._sug = self._sug, None
        if sug is not None and sug.running and cancel:
            self.host.cancel()
        self.ghost.clear()
        if publish:
            self._set_state("idle")

    # -- internals: view -------------------------------------------------------------------------------------

    def _set_state(self, state: GhostState) -> None:
        changed = state != self._state
        self._state = state
        if state != "denoising" and self.activity:
            self.activity = ""
            self.activityChanged.emit("")
        self._publish()
        if changed:
            self.stateChanged.emit(state)

    def _publish(self) -> None:
        self.editor.setProperty("ghostState", self._state)
        self.editor.setProperty("ghostText", self.ghost_text)
        self.changed.emit()

    def _show(self) -> None:
        sug = self._sug
        if sug is None:
            return
        count = len(sug.alternatives)
        if sug.error:
            badge = ""
        elif sug.running:
            badge = f"step {sug.step}/{sug.max_steps}" if sug.max_steps else "starting…"
            if count > 1:
                badge += f" · {sug.index + 1}/{count}"
        else:
            hints = [
                f"{key} {verb}"
                for key, verb in ((self._key("accept"), "accept"), (self._key("dismiss"), "dismiss"))
                if key
            ]
            badge = " · ".join(([f"{sug.index + 1}/{count}"] if count > 1 else []) + hints)
        content = GhostContent(sug.layout, self._drawn_spans(sug), badge, sug.error)
        for hook in self.view_hooks:
            content = hook(sug, content)
        self.ghost.show(content, sug.region)
        self._publish()

    def _drawn_spans(self, sug: _Suggestion) -> tuple[Span, ...]:
        """The spans as Tab would insert them at the region's leading edge: an inline ghost right after a word
        or a full stop gets the joining space Tab adds ("ships." + "rey" is drawn "ships. rey", not glued),
        and loses a leading space Tab would drop after the writer's own space."""
        spans = sug.spans
        if sug.layout != "inline" or sug.accepted or not spans:
            return spans
        s, e = sug.full()
        lead = join(self._char_before(s), sug.text, self._char_after(e), original=sug.original).lead
        first = next((i for i, sp in enumerate(spans) if sp.text), None)
        if first is None:
            return spans
        own = spans[first].text[: len(spans[first].text) - len(spans[first].text.lstrip())]
        if own == lead:
            return spans
        fixed = dataclasses.replace(spans[first], text=lead + spans[first].text[len(own) :])
        return (*spans[:first], fixed, *spans[first + 1 :])


def _plain(selected: str) -> str:
    """QTextCursor.selectedText() uses U+2029/U+2028 for line breaks; the engine wants "\n"."""
    text = selected.replace("\u2029", "\n").replace("\u2028", "\n")
    # A window edge may cut a surrogate pair in half; drop the orphan rather than send invalid text.
    if text and "\ud800" <= text[0] <= "\udfff":
        text = text[1:]
    if text and "\ud800" <= text[-1] <= "\udfff":
        text = text[:-1]
    return text


def _brief(instruction: str) -> str:
    """An instruction as the status bar names it: one line, without its closing full stop."""
    return " ".join(instruction.split()).rstrip(".…")


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


def _next_word(text: str) -> str:
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


__all__ = ["Assistant", "GhostState", "Stats"]
