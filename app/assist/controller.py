"""The assistant: the only module that knows both the engine API and the widgets.

It turns the selection/cursor into an immutable request with a new id, sends it to the engine host (latest
request wins), drops events of requests it no longer cares about, feeds the ghost painter, and applies accepts
(all, next word, next line) as exactly one undo step each.

The suggestion's region is held by two live `QTextCursor`s, so it moves with edits made elsewhere. An edit
that touches the region (typing at a draft's anchor, changing the selected text of a rewrite, undoing a
partial accept) cancels and removes the suggestion; the writer's text is never overwritten.

The suggestion itself (its region, alternatives and what changes them, the text around it and the accept) is
`assist.suggestion`'s. What every request carries besides the editor's text is here too: the document brief,
the document's identity and the rewrite strength remembered per instruction (`RequestDefaults`: the window
makes one and gives it to the `Assistant`; the services that own a part, the brief in `app.documents.brief`
and the strength dial in `app.assist.editing`, plug their source in through its typed methods), and what the
writer's settings give a request (`WriterSettings`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Literal, Protocol

from PySide6.QtCore import QObject, Signal, Slot

from app.assist.engine_host import EngineHost
from app.assist.ghost import GhostContent, GhostPainter, Layout
from app.assist.suggestion import (
    Kind,
    Mute,
    Suggestion,
    TextAround,
    accept_chunk,
    drawn_spans,
    plain,
    units,
    write_accept,
)
from app.config.commands import default_key
from app.config.settings import Settings
from app.platform.privacy import DocumentText
from app.ui.display_breaks import selected_text
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
    Stats,
    StepEvent,
)

log = logging.getLogger(__name__)

GhostState = Literal["idle", "denoising", "ready", "error"]


class BriefSource(Protocol):
    """The document's brief and identity (app.documents.brief.BriefController)."""

    @property
    def text(self) -> str: ...

    @property
    def request_text(self) -> str: ...  # the part of the brief the loaded model reads

    def document_id(self) -> str: ...


class RequestDefaults:
    """The brief, the document identity and the strength per instruction for the assistant's next requests."""

    def __init__(
        self, *, brief: BriefSource | None = None, strength_for: Callable[[str], float] | None = None
    ) -> None:
        self._brief = brief
        self._strength_for = strength_for

    def use_brief(self, source: BriefSource) -> None:
        """Every later request carries `source`'s brief and document identity."""
        self._brief = source

    def use_strength(self, strength_for: Callable[[str], float]) -> None:
        """Rewrites without an explicit strength ask `strength_for(instruction)` (the dial's memory)."""
        self._strength_for = strength_for

    def strength(self, instruction: str) -> float | None:
        """The remembered strength for `instruction` (None: none remembered, or its source failed)."""
        if self._strength_for is None:
            return None
        try:
            return self._strength_for(instruction)
        except Exception:  # a broken source must not break rewriting
            log.exception("rewrite strength unavailable")
            return None

    def apply(self, request: Request) -> Request:
        """`request` with the document brief and the document's identity (for the engine's prefix cache)."""
        source = self._brief
        if source is None:
            return request
        brief = _read("brief", lambda: source.request_text)
        document = _read("document", source.document_id)
        if brief is not None:
            request = dataclasses.replace(request, brief=brief)
        if document is not None:
            request = dataclasses.replace(request, document=document)
        return request


def _read(name: str, read: Callable[[], str]) -> str | None:
    try:
        return str(read())
    except Exception:  # a broken brief must not stop the assistant
        log.exception("%s unavailable", name)
        return None


class WriterSettings:
    """What the writer's settings give the assistant's requests and hints: the denoising settings, the draft
    length, the rewrite presets and the keys bound to the assistant's commands. Each falls back to the
    built-in default when there are no settings or they cannot be read (logged)."""

    def __init__(self, settings: Settings | None) -> None:
        self.settings = settings

    def denoise(self) -> DenoiseSettings:
        if self.settings is not None:
            try:
                return self.settings.denoise_settings()
            except Exception:
                log.exception("denoise settings unavailable; using defaults")
        return DenoiseSettings()

    def draft_length(self) -> int:
        if self.settings is not None:
            try:
                return self.settings.typed.draft.length
            except Exception:
                log.exception("draft length unavailable")
        return 128

    def presets(self) -> dict[str, str]:
        if self.settings is not None:
            try:
                return dict(self.settings.rewrite_presets())
            except Exception:
                log.exception("rewrite presets unavailable")
        return dict(REWRITE_PRESETS)

    def key(self, name: str, default: str | None = None) -> str:
        """The key the writer bound to assistant command `name` (Settings ▸ Assistant keys), as hints name it;
        without settings, the command table's default (what is bound then)."""
        fallback = default_key(name) if default is None else default
        if self.settings is None:
            return fallback
        return self.settings.typed.keys.get(name, fallback)


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
        settings: Settings | None = None,
        *,
        defaults: RequestDefaults | None = None,
    ) -> None:
        super().__init__(editor)
        self.editor = editor
        self.host = host
        self.settings = settings
        self.writer = WriterSettings(settings)  # what the writer's settings give each request and hint
        self.ghost = GhostPainter(editor)
        self.around = TextAround(editor)  # the document's text around the region (app.assist.suggestion)
        self.stale_events = 0
        self._sug: Suggestion | None = None
        self._state: GhostState = "idle"
        self._mute = Mute()  # held while the assistant makes its own edit
        self.activity = ""
        # The brief, document identity and strength per instruction every request carries, given by the window
        # (the brief and the strength dial plug their sources into it).
        self.defaults = defaults if defaults is not None else RequestDefaults()
        # Views drawn over the ghost content (app.assist.editing: pins, word diff); see `add_view_hook`.
        self.view_hooks: list[Callable[[Suggestion, GhostContent], GhostContent]] = []
        self._publish()
        host.stepped.connect(self._on_step)
        host.finished.connect(self._on_finished)
        host.failed.connect(self._on_failed)
        editor.document().contentsChange.connect(self._on_contents_change)

    def add_view_hook(self, hook: Callable[[Suggestion, GhostContent], GhostContent]) -> None:
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
        return self.writer.presets()

    # -- requests --------------------------------------------------------------------------------------------

    def draft(self, instruction: str = "") -> int | None:
        """Draft new text at the cursor (after the selection, if there is one)."""
        pos = self.editor.textCursor().selectionEnd()
        before, after = self.around.context(pos, pos)
        if not before.strip() and not instruction.strip():  # said at once, not after waiting for the model
            self.message.emit(
                "Write a few words first (or give an instruction) so there is something to continue."
            )
            return None
        self._supersede()
        request = DraftRequest(
            before=before,
            instruction=instruction,
            after=after,
            max_new_tokens=self.writer.draft_length(),
            settings=self.writer.denoise(),
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
    def suggestion(self) -> Suggestion | None:
        """The current suggestion (read it; change it through the methods here)."""
        return self._sug

    def rewrite(self, instruction: str, strength: float | None = None) -> int | None:
        """Rewrite the selection following `instruction` (a preset's text or the writer's own); `strength`
        (the share re-noised) defaults to what `defaults` remembers for that instruction, else 1.0."""
        cursor = self.editor.textCursor()
        if not cursor.hasSelection() or not plain(selected_text(cursor)).strip():
            key = self.writer.key("rewrite")
            self.message.emit(
                "Select the text you want rewritten first, then choose Rewrite"
                + (f" ({key})." if key else ".")
            )
            return None
        s, e = cursor.selectionStart(), cursor.selectionEnd()
        self._supersede()
        before, after = self.around.context(s, e)
        instruction = instruction or self.presets().get("grammar", "")
        if strength is None:
            strength = self.defaults.strength(instruction)
        request = RewriteRequest(
            selection=self.around.text(s, e),
            instruction=instruction,
            before=before,
            after=after,
            settings=self.writer.denoise(),
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
        self._supersede()
        before, after = self.around.context(s, e)
        request = InfillRequest(
            before=before, after=after, instruction=instruction, settings=self.writer.denoise()
        )
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

    def _supersede(self) -> None:
        """A new ask replaces what runs and what is shown at once, before its request is built: the old
        request stops computing meanwhile (its late events are dropped as stale) and its ghost goes."""
        self.host.cancel()
        self._drop(cancel=False, publish=False)

    def _start(self, request: Request, kind: Kind, s: int, e: int, layout: Layout, activity: str = "") -> int:
        if self._sug is not None:
            self._drop(cancel=True, publish=False)
        request = self.defaults.apply(request)
        self._sug = Suggestion.over(
            self.editor.document(),
            s,
            e,
            request,
            kind,
            layout,
            self.around.probe(s, e),
            self.around.text(s, e),
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

    # -- internals: events -----------------------------------------------------------------------------------

    def _current(self, request_id: int) -> Suggestion | None:
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
        sug.take_step(event, time.perf_counter())
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
        if result.notice:
            self.message.emit(result.notice)
        first = sug.first_visible if sug.first_visible is not None else time.perf_counter() - sug.submitted
        self.finishedStats.emit(result.stats, first)
        if not sug.finish(result):  # the candidates become the alternatives (their rows, words and pins)
            self._fail(
                sug, "The model returned no text. Try again, or change the instruction or the selection."
            )
            return
        self._set_state("ready")
        self._show()

    @Slot(int, object)
    def _on_failed(self, request_id: int, error: EngineError) -> None:
        sug = self._current(request_id)
        if sug is None:
            return
        sug.running = False
        self._fail(sug, getattr(error, "message", str(error)))

    def _fail(self, sug: Suggestion, message: str) -> None:
        sug.error = message
        sug.alternatives, sug.rows = [], []
        self._set_state("error")
        self._show()
        self.message.emit(message)

    # -- internals: edits ------------------------------------------------------------------------------------

    @Slot(int, int, int)
    def _on_contents_change(self, pos: int, removed: int, added: int) -> None:
        sug = self._sug
        if sug is None or self._mute.on:
            return
        s, e = sug.full()
        old_s, old_e = sug.last
        touches = pos <= old_e and pos + removed >= old_s
        if s > e or (touches and self.around.probe(s, e) != sug.probe):
            self._drop(cancel=True)
            if getattr(self.editor, "in_undo_redo", False):
                self.message.emit("Suggestion closed: undo took back what was accepted of it.")
            else:
                self.message.emit("Suggestion cancelled because you edited its text.")
            return
        if (s, e) != sug.last:
            sug.last = (s, e)
            sug.probe = self.around.probe(s, e)
            self._show()

    def _accept(self, part: Literal["all", "word", "line"]) -> bool:
        """Accept all, the next word or the next visual line of the visible alternative, as one undo step.

        The region (the original of a rewrite or infill, or the draft's anchor) is replaced by the accepted
        prefix joined to the writer's text (`app.assist.suggestion.join`); what is left stays as ghost text
        right after it. So the document only ever holds the original, or the original's region replaced by a
        prefix of the alternative: never both side by side.
        """
        sug = self._sug
        if sug is None or not self.suggestion_visible:
            return False
        if sug.running:  # accept what is visible now; stop refining it
            self.host.cancel()
            sug.running = False
        chunk, complete = accept_chunk(sug.text, part, lambda: self.ghost.first_line_length(sug.spans))
        accepted, joined = write_accept(self.around, sug, chunk, complete=complete, muted=self._mute)
        if complete:
            self._drop(cancel=False)
            self.message.emit("Suggestion accepted (Ctrl+Z undoes it).")
            return True
        # Partial: the rest of this alternative stays as ghost text right after the accepted words.
        sug.keep_rest(chunk, accepted, units(joined.trail))
        sug.last = sug.full()
        sug.probe = self.around.probe(*sug.last)
        self._set_state("ready")
        self._show()
        return True

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
        keys = (self.writer.key("accept"), "accept"), (self.writer.key("dismiss"), "dismiss")
        badge = sug.badge([f"{key} {verb}" for key, verb in keys if key])
        content = GhostContent(sug.layout, drawn_spans(self.around, sug), badge, sug.error)
        for hook in self.view_hooks:
            content = hook(sug, content)
        self.ghost.show(content, sug.region)
        self._publish()


def _brief(instruction: str) -> str:
    """An instruction as the status bar names it: one line, without its closing full stop."""
    return " ".join(instruction.split()).rstrip(".…")


__all__ = ["Assistant", "BriefSource", "GhostState", "RequestDefaults", "Stats", "WriterSettings"]
