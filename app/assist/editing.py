"""Editing only a diffusion model can do, wired into the main window: rewrite strength, re-roll the uncertain
words, pin words, a word-level diff of a rewrite, and the alternatives side by side.

One controller per window, installed by `MainWindow` with one line. It adds its own actions (all named, so
tests and automation find them), menu entries (so the command palette lists them), a toolbar dial, a
right-click submenu and a dock panel, and talks to the `Assistant` only through its small public surface (the
window's `request_defaults` for the strength per instruction, `add_view_hook`, `restart`, `show_alternative`,
`suggestion`). The requests it sends are ordinary engine requests
with a warm canvas (`engine.api.WarmStart`): pinned words come back exactly because the engine pins them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QAction, QActionGroup, QMouseEvent, QTextCursor
from PySide6.QtWidgets import QMainWindow, QMenu

from app.assist import pins as pinning
from app.assist.alternatives_panel import AlternativesPanel
from app.assist.controller import Assistant
from app.assist.diff_view import WordDiff, diff_hook
from app.assist.ghost import GhostContent
from app.assist.request_defaults import RequestDefaults
from app.assist.strength import LEVELS, StrengthDial, StrengthMemory, factory_default
from app.config.commands import MENU_BY_ID, default_key
from app.ui import actions
from app.ui.display_breaks import selected_text
from app.ui.widgets import plain_tip
from engine.api import (
    LOCAL_CAPABILITIES,
    Capabilities,
    DraftRequest,
    InfillRequest,
    RewriteRequest,
    new_request_id,
)

log = logging.getLogger(__name__)
DEFAULT_THRESHOLD = 0.8


class DiffusionEditing(QObject):
    """Strength dial, re-roll, pins, diff view and alternatives panel for one `MainWindow`.

    Everything it works with is passed in: the window (for its toolbars, dock and status bar), the assistant
    it extends, the request defaults it gives the strength per instruction to, the two menus it adds to, where
    messages go, and the window's right-click hooks."""

    def __init__(
        self,
        window: QMainWindow,
        *,
        assistant: Assistant,
        request_defaults: RequestDefaults,
        assist_menu: QMenu,
        view_menu: QMenu,
        show_message: Callable[[str], None],
        context_menu_hooks: list[Callable[[QMenu], None]],
    ) -> None:
        super().__init__(window)
        self.window = window
        self.assistant = assistant
        self.editor = assistant.editor
        self.settings = assistant.settings
        self.show_message = show_message
        self.assist_menu, self.view_menu = assist_menu, view_menu
        self.context_menu_hooks = context_menu_hooks
        self.pins = pinning.PinSet()
        self.memory = StrengthMemory(self.settings, self.assistant.presets())
        self.diff_enabled = self._setting("rewrite.view", "below") == "diff"
        self._diff: WordDiff | None = None
        self.rerolls = 0

        a = self.assistant
        request_defaults.use_strength(self._strength_for)
        a.add_view_hook(self._pin_view)
        a.add_view_hook(diff_hook(lambda: self.diff_enabled, self._on_diff))
        self._build_actions()
        self._build_ui()
        self.editor.viewport().installEventFilter(self)
        a.changed.connect(self._on_changed)
        if self.settings is not None and hasattr(self.settings, "changed"):
            self.settings.changed.connect(self._on_setting_changed)
        self._on_changed()

    # -- building --------------------------------------------------------------------------------------------

    def _build_actions(self) -> None:
        w = self.window
        self.actionRerollUncertain = actions.create(w, "actionRerollUncertain", self.reroll_uncertain)
        self.actionRerollAroundPins = actions.create(w, "actionRerollAroundPins", self.reroll_around_pins)
        self.actionPinNextWord = actions.create(w, "actionPinNextWord", self.pin_next_word)
        self.actionUnpinLastWord = actions.create(w, "actionUnpinLastWord", self.unpin_last_word)
        self.actionClearPins = actions.create(w, "actionClearPins", self.clear_pins)
        self.actionToggleDiffView = actions.create(w, "actionToggleDiffView", self.toggle_diff_view)
        self.actionToggleDiffView.setChecked(self.diff_enabled)
        self.strength_group = QActionGroup(self)
        self.strength_actions: list[QAction] = []
        for name, value in LEVELS:
            act = actions.create_member(
                w,
                "actionRewriteStrength_",
                name.lower(),
                f"{name} ({value:.1f})",
                partial(self.set_strength, value),
                tip=f"Rewrite strength {value:.1f} for the preset the dial shows",
            )
            act.setCheckable(True)
            self.strength_group.addAction(act)
            self.strength_actions.append(act)
        # Saving the dial's value as a preset's default is a choice of its own, never a side effect of a drag.
        self.actionSaveStrengthDefault = actions.create_member(
            w, "actionStrengthDefault_", "save", "Save as default", self.save_strength_default
        )
        self.actionResetStrengthDefault = actions.create_member(
            w, "actionStrengthDefault_", "reset", "Reset to default", self.reset_strength_default
        )
        self.edit_actions = [
            self.actionRerollUncertain,
            self.actionRerollAroundPins,
            self.actionPinNextWord,
            self.actionUnpinLastWord,
            self.actionClearPins,
        ]
        self.editor.priority_actions.extend(self.edit_actions)

    def _build_ui(self) -> None:
        w = self.window
        from app.assist.presets import preset_labels  # the labels the presets show in menus

        self.dial = StrengthDial(self.memory, preset_labels(self.assistant.presets()), w)
        self.dial.changed.connect(self._on_strength_changed)
        self.dial.slider.valueChanged.connect(lambda _v: self._sync_levels())
        self.dial.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.dial.addActions([self.actionSaveStrengthDefault, self.actionResetStrengthDefault])
        w.addToolBarBreak()
        tools = w.addToolBar("Diffusion editing")
        tools.setObjectName("toolbarEditing")
        tools.setMovable(False)
        tools.addWidget(self.dial)
        tools.addSeparator()
        tools.addActions([self.actionRerollUncertain, self.actionRerollAroundPins, self.actionClearPins])
        tools.addSeparator()
        self.toolbarEditing = tools

        self.menuStrength = QMenu(MENU_BY_ID["menuRewriteStrength"].title, w)
        self.menuStrength.setObjectName("menuRewriteStrength")
        self.menuStrength.addActions(self.strength_actions)
        self.menuStrength.addSeparator()
        self.menuStrength.addActions([self.actionSaveStrengthDefault, self.actionResetStrengthDefault])
        self.assist_menu.addMenu(self.menuStrength)
        self.assist_menu.addActions(self.edit_actions)
        actions.arrange(self.assist_menu)  # each at the place the command table gives it

        self.panel = AlternativesPanel(w)
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.panel)
        self.panel.setVisible(bool(self._setting("appearance.alternatives_panel", False)))  # as last time
        self.panel.chosen.connect(self._choose_alternative)
        self.panel.visibilityChanged.connect(self._on_panel_shown)
        toggle = self.panel.toggleViewAction()
        self.actionShowAlternatives = actions.configure(toggle, "actionShowAlternatives")
        w.addAction(self.actionShowAlternatives)
        self.view_menu.addActions([self.actionToggleDiffView, self.actionShowAlternatives])
        actions.arrange(self.view_menu)
        tools.addActions([self.actionToggleDiffView, self.actionShowAlternatives])
        self.context_menu_hooks.append(self._extend_context_menu)
        self._sync_levels()

    # -- strength --------------------------------------------------------------------------------------------

    def _strength_for(self, instruction: str) -> float:
        if not getattr(self, "caps", LOCAL_CAPABILITIES).canvas_control:
            return 1.0  # a rewrite from the instruction alone: the engine cannot warm-start a canvas
        self.memory.presets = self.assistant.presets()
        key = self.memory.key_for(instruction)
        self.dial.show_preset(key)
        self._sync_levels()
        return self.dial.strength()

    def set_strength(self, value: float) -> None:
        """Turn the dial (for the preset it shows); a whole rewrite of that preset on screen runs again."""
        self.dial.set_value(value)
        self._sync_levels()

    def save_strength_default(self) -> None:
        """Assist ▸ Rewrite strength ▸ Save as default for <preset>: the dial's value becomes its default."""
        self.dial.save_default()
        self._sync_levels()
        self.show_message(f"{self.dial.value:.1f} is now the default strength for “{self.dial.name()}”.")

    def reset_strength_default(self) -> None:
        """Assist ▸ Rewrite strength ▸ Reset <preset> to its default (the built-in strength)."""
        self.dial.reset_default()
        self._sync_levels()
        self.show_message(f"“{self.dial.name()}” is back to its default strength {self.dial.value:.1f}.")

    def _on_strength_changed(self, key: str, value: float) -> None:
        self._sync_levels()
        sug = self.assistant.suggestion
        request = self._fresh(sug)
        if not isinstance(request, RewriteRequest) or self.memory.key_for(request.instruction) != key:
            self.show_message(f"Rewrite strength {value:.1f} is used for the next rewrite.")
            return
        self.assistant.restart(replace(request, strength=value, canvas=None, request_id=new_request_id()))
        self.show_message(f"Rewriting again at strength {value:.1f}.")

    def _sync_levels(self) -> None:
        for act, (_name, value) in zip(self.strength_actions, LEVELS, strict=True):
            act.setChecked(abs(value - self.dial.value) < 0.05)
        name, default = self.dial.name(), self.memory.get(self.dial.key)
        save, reset = self.actionSaveStrengthDefault, self.actionResetStrengthDefault
        save.setText(f"Save {self.dial.value:.1f} as default for “{name}”")
        save.setEnabled(self.dial.value != default and self._dial_usable())
        save.setToolTip(f"Rewrites with “{name}” start at {self.dial.value:.1f} from now on")
        reset.setText(f"Reset “{name}” to its default ({factory_default(self.dial.key):.1f})")
        reset.setEnabled(
            (default != factory_default(self.dial.key) or self.dial.value != default) and self._dial_usable()
        )

    def _dial_usable(self) -> bool:
        return getattr(self, "caps", LOCAL_CAPABILITIES).canvas_control

    # -- re-roll and pins ------------------------------------------------------------------------------------

    def reroll_uncertain(self) -> bool:
        """Pin every word at least as confident as the threshold (and the writer's pins); redraw the rest."""
        sug = self._rerollable()
        if sug is None:
            return False
        if self._fresh(sug) is None:  # say the real reason first (not "every word is sure")
            return self._stale()
        threshold = float(self._setting("rewrite.reroll_threshold", DEFAULT_THRESHOLD))
        spans = sug.spans
        pinned = pinning.confident(spans, threshold) | self._user_pins(sug)
        uncertain = [i for i in pinning.words(spans) if i not in pinned]
        if not uncertain:
            self.show_message(
                f"Every word is at least {threshold:.0%} sure; nothing to re-roll (lower the "
                "threshold in Settings ▸ Rewrite, or pin words and use "
                f"{self._key('reroll_around_pins', 'Re-roll around pins')})."
            )
            return False
        return self._reroll(
            sug, pinned, f"Re-rolling {len(uncertain)} uncertain word(s); {len(pinned)} kept."
        )

    def reroll_around_pins(self) -> bool:
        """Keep only the pinned words and redraw everything else."""
        sug = self._rerollable()
        if sug is None:
            return False
        if self._fresh(sug) is None:
            return self._stale()
        pinned = self._user_pins(sug)
        if not pinned:
            self.show_message(
                "Pin some words first: click them in the suggestion"
                + (f", or {key}." if (key := self._key("pin_next_word", "")) else ".")
            )
            return False
        return self._reroll(sug, pinned, f"Re-rolling around {len(pinned)} pinned word(s).")

    def toggle_pin(self, index: int) -> bool:
        """Pin or unpin word `index` of the shown suggestion."""
        sug = self._pinnable()
        if sug is None or not 0 <= index < len(sug.spans) or not sug.spans[index].text.strip():
            return False
        self._user_pins(sug)
        now = self.pins.toggle(index)
        word = sug.spans[index].text.strip()
        self.show_message(self._pinned_hint(word) if now else f"Unpinned “{word}”.")
        self._repaint()
        return True

    def pin_next_word(self) -> bool:
        sug = self._pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        index = self.pins.extend(sug.spans)
        if index is not None:
            self.show_message(self._pinned_hint(sug.spans[index].text.strip()))
        self._repaint()
        return index is not None

    def unpin_last_word(self) -> bool:
        sug = self._pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        done = self.pins.shrink() is not None
        self._repaint()
        return done

    def clear_pins(self) -> bool:
        sug = self._pinnable()
        if sug is None:
            return False
        self._user_pins(sug)
        self.pins.clear()
        self._repaint()
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
        request = self._fresh(sug)
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

    def explain_unavailable(self, action: QAction) -> bool:
        """One of this controller's keys was pressed while its action is disabled: its slot says why."""
        slots = {
            self.actionRerollUncertain: self.reroll_uncertain,
            self.actionRerollAroundPins: self.reroll_around_pins,
            self.actionPinNextWord: self.pin_next_word,
            self.actionUnpinLastWord: self.unpin_last_word,
            self.actionClearPins: self.clear_pins,
        }
        slot = slots.get(action)
        if slot is None:
            return False
        self.window.statusBar().clearMessage()
        slot()
        if not self.window.statusBar().currentMessage():
            self.show_message(f"{action.text().replace('&', '')} needs a suggestion on screen.")
        return True

    def _stale(self) -> bool:
        self.show_message("This suggestion was partly accepted or its text changed; ask for a new one.")
        return False

    def _rerollable(self) -> Any:
        sug = self.assistant.suggestion
        if sug is None or not self.assistant.suggestion_visible:
            draft, rewrite = self._key("draft"), self._key("rewrite")
            self.show_message(
                "There is no suggestion to re-roll; draft"
                + (f" ({draft})" if draft else "")
                + " or rewrite"
                + (f" ({rewrite})." if rewrite else ".")
            )
            return None
        return sug

    def _pinnable(self) -> Any:
        sug = self.assistant.suggestion
        if sug is None or not self.assistant.suggestion_visible:
            return None
        if self._fresh(sug) is None:  # a pin could never be used: re-rolls need the whole suggestion
            self._stale()
            return None
        if sug.running:
            stop = self._key("dismiss")
            self.show_message(
                "Pin words once the suggestion has settled"
                + (f" (or press {stop} to stop it)." if stop else ".")
            )
            return None
        return sug

    def _user_pins(self, sug: Any) -> set[int]:
        return self.pins.sync((sug.request_id, sug.index), sug.spans)

    def _fresh(self, sug: Any) -> DraftRequest | RewriteRequest | InfillRequest | None:
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

    # -- view ------------------------------------------------------------------------------------------------

    def _pin_view(self, sug: Any, content: GhostContent) -> GhostContent:
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

    def _on_diff(self, diff: WordDiff | None) -> None:
        self._diff = diff

    def toggle_diff_view(self) -> None:
        self.diff_enabled = self.actionToggleDiffView.isChecked()
        if self.settings is not None:  # remembered: the next start shows rewrites the same way
            self._store("rewrite.view", "diff" if self.diff_enabled else "below")
        self._repaint()
        self.show_message(
            "Rewrites show as a word diff."
            if self.diff_enabled
            else "Rewrites show the new text below the original."
        )

    def _repaint(self) -> None:
        sug = self.assistant.suggestion
        if sug is not None:
            self.assistant.show_alternative(sug.index)

    def apply_capabilities(self, caps: Capabilities) -> None:
        """The engine in use says what it can do: without canvas control (a server that cannot hold a seeded
        canvas) strength, pins and re-roll are off, and each control's tooltip says why."""
        self.caps = caps
        reason = caps.canvas_control_reason or "The engine in use cannot start from existing text."
        for act in (*self.edit_actions, *self.strength_actions):
            tip = act.statusTip() if caps.canvas_control else reason
            act.setToolTip(plain_tip(tip or act.text().replace("&", "")))  # the reason quotes the server
        self.dial.setEnabled(caps.canvas_control)
        self.dial.setToolTip("" if caps.canvas_control else plain_tip(reason))
        for act in self.strength_actions:
            act.setEnabled(caps.canvas_control)
        self._sync_levels()
        self._on_changed()

    def _on_changed(self) -> None:
        a = self.assistant
        sug = a.suggestion
        visible = a.suggestion_visible
        control = getattr(self, "caps", LOCAL_CAPABILITIES).canvas_control
        can_reroll = control and visible and sug is not None
        self.actionRerollUncertain.setEnabled(bool(can_reroll))
        self.actionRerollAroundPins.setEnabled(bool(can_reroll))
        for act in (self.actionPinNextWord, self.actionUnpinLastWord, self.actionClearPins):
            act.setEnabled(bool(control and visible and sug is not None and not sug.running))
        if self.panel.isVisible():
            self.panel.refresh(sug)

    def _extend_context_menu(self, menu: QMenu) -> None:
        menu.addMenu(self.menuStrength)
        if self.assistant.suggestion_visible:
            menu.addActions([self.actionRerollUncertain, self.actionRerollAroundPins, self.actionClearPins])

    def _on_setting_changed(self, key: str, value: object) -> None:
        if key == "rewrite.view":
            self.diff_enabled = value == "diff"
            self.actionToggleDiffView.setChecked(self.diff_enabled)
            self._repaint()
        elif key == "rewrite.presets":
            from app.assist.presets import preset_labels

            self.memory.presets = self.assistant.presets()
            self.dial.fit_caption(preset_labels(self.memory.presets))
            self._sync_levels()

    def _key(self, name: str, default: str | None = None) -> str:
        """The key the writer bound to `keys.<name>` ("" for none), so hints never name a key that does
        nothing."""
        return str(self._setting(f"keys.{name}", default_key(name) if default is None else default))

    def _pinned_hint(self, word: str) -> str:
        key = self._key("reroll_around_pins", "")
        return f"Pinned “{word}”" + (f" ({key} re-rolls around pins)." if key else ".")

    def _setting(self, key: str, default: Any) -> Any:
        if self.settings is None:
            return default
        try:
            return self.settings[key]
        except Exception:  # noqa: BLE001
            return default

    # -- clicks on ghost words -------------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt virtual
        if (
            event.type() == QEvent.Type.MouseButtonPress
            and isinstance(event, QMouseEvent)
            and event.button() == Qt.MouseButton.LeftButton
            and self.assistant.suggestion_visible
        ):
            index = self.word_at(event.position())
            if index is not None:
                sug = self.assistant.suggestion
                if sug is not None and sug.running:
                    self._pinnable()  # says why not now
                    return True
                self.toggle_pin(index)
                return True
        return super().eventFilter(watched, event)

    def word_at(self, point: QPointF) -> int | None:
        """The suggestion word drawn under a viewport point (mapped through the diff view when it is on)."""
        index = self.assistant.ghost.hit(point)
        if index is None:
            return None
        if self._diff is not None:
            if index >= len(self._diff.sources):
                return None
            index = self._diff.sources[index]
            return index if index >= 0 else None
        return index

    def _choose_alternative(self, index: int) -> None:
        """Show the clicked alternative and give the keyboard back to the document (Tab, typing, Ctrl+Z)."""
        self.assistant.show_alternative(index)
        self.editor.setFocus(Qt.FocusReason.OtherFocusReason)

    def _on_panel_shown(self, shown: bool) -> None:
        """Fill the panel when it opens; remember whether the writer left it open (not when the window closes:
        a dock hidden with its window is not closed by the writer)."""
        if shown:
            self.panel_refresh()
        if self.window.isVisible() and self.settings is not None:
            self._store("appearance.alternatives_panel", shown)

    def _store(self, key: str, value: object) -> None:
        if self.settings is None or self._setting(key, value) == value:
            return
        try:
            self.settings.set(key, value)
        except Exception:  # a view choice is never worth an error
            log.exception("%s not remembered", key)

    def panel_refresh(self) -> None:
        self.panel.refresh(self.assistant.suggestion)
