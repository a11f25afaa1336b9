"""Re-roll and pins, the commands: re-roll the uncertain words, re-roll around the writer's pins, pin or unpin
a word (a click on it, or the keys), and what each says when it cannot run now. The pins themselves and the
re-roll request are `assist.pins`'s; this is what the commands do with the shown suggestion. A re-roll is an
ordinary engine request with a warm canvas: pinned words come back exactly because the engine pins them.
Built by `assist.editing`, which keeps these commands under their names (`reroll_uncertain`, `toggle_pin`…).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtCore import QRect
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QToolTip

from app.assist import pins as pinning
from app.assist.controller import Assistant
from app.assist.ghost import GhostContent
from app.config.commands import default_key
from app.ui.display_breaks import selected_text
from engine.api import DraftRequest, InfillRequest, RewriteRequest

DEFAULT_THRESHOLD = 0.8


class PinCommands:
    """The re-roll and pin commands over one assistant's shown suggestion."""

    def __init__(self, assistant: Assistant, show_message: Callable[[str], None]) -> None:
        self.assistant = assistant
        self.editor = assistant.editor
        self.settings = assistant.settings
        self.show_message = show_message
        self.pins = pinning.PinSet()
        self.rerolls = 0
        self.last_tip = ""  # the last note shown beside the caret (`say_at_suggestion`)

    def repaint(self) -> None:
        """Show the suggestion again (its pins, its view)."""
        sug = self.assistant.suggestion
        if sug is not None:
            self.assistant.show_alternative(sug.index)

    def reroll_uncertain(self) -> bool:
        """Pin every word at least as confident as the threshold (and the writer's pins); redraw the rest."""
        sug = self._rerollable()
        if sug is None:
            return False
        if self.fresh(sug) is None:  # say the real reason first (not "every word is sure")
            return self._stale()
        threshold = (
            self.settings.typed.rewrite.reroll_threshold if self.settings is not None else DEFAULT_THRESHOLD
        )
        spans = sug.spans
        pinned = pinning.confident(spans, threshold) | self._user_pins(sug)
        uncertain = [i for i in pinning.words(spans) if i not in pinned]
        if not uncertain:
            text = (
                f"Every word is at least {threshold:.0%} sure; nothing to re-roll (lower the "
                "threshold in Settings ▸ Rewrite, or pin words and use "
                f"{self.key('reroll_around_pins', 'Re-roll around pins')})."
            )
            self.show_message(text)
            self.say_at_suggestion(text)
            return False
        return self._reroll(
            sug, pinned, f"Re-rolling {len(uncertain)} uncertain word(s); {len(pinned)} kept."
        )

    def say_at_suggestion(self, text: str) -> None:
        """`text` whole, in a tip beside the caret: Alt+R that finds nothing to re-roll showed no change in
        the page, and the only feedback was cut in the status bar."""
        rect = self.editor.cursorRect()
        where = self.editor.viewport().mapToGlobal(rect.bottomLeft())
        QToolTip.showText(where, text, self.editor.viewport(), QRect(), 8000)
        self.last_tip = text

    def reroll_around_pins(self) -> bool:
        """Keep only the pinned words and redraw everything else."""
        sug = self._rerollable()
        if sug is None:
            return False
        if self.fresh(sug) is None:
            return self._stale()
        pinned = self._user_pins(sug)
        if not pinned:
            text = "Pin some words first: click them in the suggestion" + (
                f", or {key}." if (key := self.key("pin_next_word", "")) else "."
            )
            self.show_message(text)
            self.say_at_suggestion(text)
            return False
        return self._reroll(sug, pinned, f"Re-rolling around {len(pinned)} pinned word(s).")

    def toggle_pin(self, index: int) -> bool:
        """Pin or unpin word `index` of the shown suggestion."""
        sug = self.pinnable()
        if sug is None or not 0 <= index < len(sug.spans) or not sug.spans[index].text.strip():
            return False
        self._user_pins(sug)
        now = self.pins.toggle(index)
        word = sug.spans[index].text.strip()
        self.show_message(self._pinned_hint(word) if now else f"Unpinned “{word}”.")
        self.repaint()
        return True

    def pin_next_word(self) -> bool:
        sug = self.pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        index = self.pins.extend(sug.spans)
        if index is not None:
            self.show_message(self._pinned_hint(sug.spans[index].text.strip()))
        self.repaint()
        return index is not None

    def unpin_last_word(self) -> bool:
        sug = self.pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        done = self.pins.shrink() is not None
        self.repaint()
        return done

    def clear_pins(self) -> bool:
        sug = self.pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        self.pins.clear()
        self.repaint()
        return True

    def pinned_words(self) -> list[str]:
        """The pinned words of the shown suggestion, in order (for the status line and tests)."""
        sug = self.assistant.suggestion
        if sug is None or not sug.spans:
            return []
        if sug.running:
            return [s.text.strip() for s in sug.spans if s.pinned and s.text.strip()]
        return [sug.spans[i].text.strip() for i in sorted(self._user_pins(sug)) if i < len(sug.spans)]

    def _reroll(self, sug: Any, pinned: set[int], message: str) -> bool:
        request = self.fresh(sug)
        if request is None:
            return self._stale()
        try:
            new = pinning.reroll_request(request, sug.spans, pinned)
        except (TypeError, ValueError) as exc:
            self.show_message(str(exc))
            return False
        self.rerolls += 1
        self.assistant.restart(new)
        self.show_message(message)
        return True

    def _stale(self) -> bool:
        self.show_message("This suggestion was partly accepted or its text changed; ask for a new one.")
        return False

    def _rerollable(self) -> Any:
        sug = self.assistant.suggestion
        if sug is None or not self.assistant.suggestion_visible:
            draft, rewrite = self.key("draft"), self.key("rewrite")
            self.show_message(
                "There is no suggestion to re-roll; draft"
                + (f" ({draft})" if draft else "")
                + " or rewrite"
                + (f" ({rewrite})." if rewrite else ".")
            )
            return None
        return sug

    def pinnable(self) -> Any:
        sug = self.assistant.suggestion
        if sug is None or not self.assistant.suggestion_visible:
            return None
        if self.fresh(sug) is None:  # a pin could never be used: re-rolls need the whole suggestion
            self._stale()
            return None
        if sug.running:
            stop = self.key("dismiss")
            self.show_message(
                "Pin words once the suggestion has settled"
                + (f" (or press {stop} to stop it)." if stop else ".")
            )
            return None
        return sug

    def _user_pins(self, sug: Any) -> set[int]:
        return self.pins.sync((sug.request_id, sug.index), sug.spans)

    def fresh(self, sug: Any) -> DraftRequest | RewriteRequest | InfillRequest | None:
        """The suggestion's request, if the document still matches it (nothing accepted, context
        unchanged)."""
        if sug is None or not isinstance(sug.request, (DraftRequest, RewriteRequest, InfillRequest)):
            return None
        request = sug.request
        s, e = sug.region()
        if isinstance(request, RewriteRequest):
            return request if self._doc_text(s, e) == sug.original and sug.original else None
        before = request.before
        if not self._doc_text(max(0, s - len(before)), s).endswith(before):
            return None
        if isinstance(request, InfillRequest):
            end = self.editor.document().characterCount() - 1
            return request if self._doc_text(e, min(end, e + len(request.after))) == request.after else None
        return request if s == e else None

    def _doc_text(self, s: int, e: int) -> str:
        cursor = QTextCursor(self.editor.document())
        cursor.setPosition(s)
        cursor.setPosition(e, QTextCursor.MoveMode.KeepAnchor)
        return selected_text(cursor).replace("\u2029", "\n").replace("\u2028", "\n")

    def pin_view(self, sug: Any, content: GhostContent) -> GhostContent:
        """Settled suggestions show the writer's pins (while denoising, the engine's pinned spans show)."""
        if sug.running or content.error or not content.spans:
            return content
        pinned = self._user_pins(sug)
        spans = tuple(
            replace(s, pinned=i in pinned) if s.pinned != (i in pinned) else s
            for i, s in enumerate(content.spans)
        )
        badge = content.badge
        if pinned:
            badge = f"{len(pinned)} pinned · " + badge
        return replace(content, spans=spans, badge=badge)

    def key(self, name: str, default: str | None = None) -> str:
        """The key the writer bound to `keys.<name>` ("" for none), so hints never name a key that does
        nothing."""
        fallback = default_key(name) if default is None else default
        return self.settings.typed.keys.get(name, fallback) if self.settings is not None else fallback

    def _pinned_hint(self, word: str) -> str:
        key = self.key("reroll_around_pins", "")
        return f"Pinned “{word}”" + (f" ({key} re-rolls around pins)." if key else ".")
