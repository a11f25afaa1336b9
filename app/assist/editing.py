"""Editing only a diffusion model can do, wired into the main window: rewrite strength, re-roll the uncertain
words, pin words, a word-level diff of a rewrite, and the alternatives side by side.

One controller per window, installed by `MainWindow` with one line; the strength controls are
`assist.strength_controls`'s and the re-roll and pin commands `assist.reroll`'s, kept under their names here.
It adds its own actions (all named, so tests and automation find them), menu entries (so the command palette
lists them), a toolbar dial, a right-click submenu and a dock panel, and talks to the `Assistant` only through
its small public surface (the window's `request_defaults` for the strength per instruction, `add_view_hook`,
`restart`, `show_alternative`, `suggestion`). The requests it sends are ordinary engine requests with a warm
canvas (`engine.api.WarmStart`): pinned words come back exactly because the engine pins them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QPointF, Qt
from PySide6.QtGui import QAction, QMouseEvent
from PySide6.QtWidgets import QMainWindow, QMenu

from app.assist.alternatives_panel import AlternativesPanel
from app.assist.controller import Assistant, RequestDefaults
from app.assist.diff_view import WordDiff, diff_hook
from app.assist.reroll import PinCommands
from app.assist.strength import StrengthMemory
from app.assist.strength_controls import StrengthControls
from app.ui import actions
from app.ui.widgets import plain_tip
from engine.api import (
    LOCAL_CAPABILITIES,
    Capabilities,
)

log = logging.getLogger(__name__)


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
        self.pin_commands = PinCommands(assistant, show_message)  # re-roll and pins (app.assist.reroll)
        self.pins = self.pin_commands.pins
        self.memory = StrengthMemory(self.settings, self.assistant.presets())
        self.diff_enabled = self.settings is not None and self.settings.typed.rewrite.view == "diff"
        self._diff: WordDiff | None = None

        a = self.assistant
        a.add_view_hook(self.pin_commands.pin_view)
        a.add_view_hook(diff_hook(lambda: self.diff_enabled, self._on_diff))
        self._build_actions()
        request_defaults.use_strength(self.strength.strength_for)
        self._build_ui()
        self.editor.viewport().installEventFilter(self)
        a.changed.connect(self._on_changed)
        if self.settings is not None:
            self.settings.follow(lambda v: v.rewrite.view, self._on_view_setting, now=False)
            self.settings.follow(
                lambda v: v.rewrite.presets, lambda _presets: self.strength.presets_changed(), now=False
            )
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
        # The strength dial and Assist ▸ Rewrite strength (app.assist.strength_controls), named here too.
        st = self.strength = StrengthControls(
            w,
            assistant=self.assistant,
            memory=self.memory,
            show_message=self.show_message,
            fresh=self.pin_commands.fresh,
        )
        self.dial, self.strength_group, self.strength_actions = (
            st.dial,
            st.strength_group,
            st.strength_actions,
        )
        self.actionSaveStrengthDefault = st.actionSaveStrengthDefault
        self.actionResetStrengthDefault = st.actionResetStrengthDefault
        self.menuStrength = st.menuStrength
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
        w.addToolBarBreak()
        tools = w.addToolBar("Diffusion editing")
        tools.setObjectName("toolbarEditing")
        tools.setMovable(False)
        tools.addWidget(self.dial)
        tools.addSeparator()
        tools.addActions([self.actionRerollUncertain, self.actionRerollAroundPins, self.actionClearPins])
        tools.addSeparator()
        self.toolbarEditing = tools

        self.assist_menu.addMenu(self.menuStrength)
        self.assist_menu.addActions(self.edit_actions)
        actions.arrange(self.assist_menu)  # each at the place the command table gives it

        self.panel = AlternativesPanel(w)
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.panel)
        self.panel.setVisible(
            self.settings is not None and self.settings.typed.appearance.alternatives_panel
        )  # as last time
        self.panel.chosen.connect(self._choose_alternative)
        self.panel.visibilityChanged.connect(self._on_panel_shown)
        toggle = self.panel.toggleViewAction()
        self.actionShowAlternatives = actions.configure(toggle, "actionShowAlternatives")
        w.addAction(self.actionShowAlternatives)
        self.view_menu.addActions([self.actionToggleDiffView, self.actionShowAlternatives])
        actions.arrange(self.view_menu)
        tools.addActions([self.actionToggleDiffView, self.actionShowAlternatives])
        self.context_menu_hooks.append(self._extend_context_menu)
        self.strength.sync_levels()

    # -- strength --------------------------------------------------------------------------------------------

    def set_strength(self, value: float) -> None:
        """Turn the dial (for the preset it shows); a whole rewrite of that preset on screen runs again."""
        self.strength.set_strength(value)

    def save_strength_default(self) -> None:
        self.strength.save_strength_default()

    def reset_strength_default(self) -> None:
        self.strength.reset_strength_default()

    # -- re-roll and pins ------------------------------------------------------------------------------------

    # The commands are app.assist.reroll's; these names are the ones menus, keys and tests use.
    def reroll_uncertain(self) -> bool:
        """Pin every word at least as confident as the threshold (and the writer's pins); redraw the rest."""
        return self.pin_commands.reroll_uncertain()

    def reroll_around_pins(self) -> bool:
        """Keep only the pinned words and redraw everything else."""
        return self.pin_commands.reroll_around_pins()

    def toggle_pin(self, index: int) -> bool:
        """Pin or unpin word `index` of the shown suggestion."""
        return self.pin_commands.toggle_pin(index)

    def pin_next_word(self) -> bool:
        return self.pin_commands.pin_next_word()

    def unpin_last_word(self) -> bool:
        return self.pin_commands.unpin_last_word()

    def clear_pins(self) -> bool:
        return self.pin_commands.clear_pins()

    def pinned_words(self) -> list[str]:
        """The pinned words of the shown suggestion, in order (for the status line and tests)."""
        return self.pin_commands.pinned_words()

    def say_at_suggestion(self, text: str) -> None:
        """`text` whole, in a tip beside the caret."""
        self.pin_commands.say_at_suggestion(text)

    @property
    def last_tip(self) -> str:
        """The last note shown beside the caret."""
        return self.pin_commands.last_tip

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

    # -- view ------------------------------------------------------------------------------------------------

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
        self.pin_commands.repaint()

    def apply_capabilities(self, caps: Capabilities) -> None:
        """The engine in use says what it can do: without canvas control (a server that cannot hold a seeded
        canvas) strength, pins and re-roll are off, and each control's tooltip says why."""
        self.caps = caps
        reason = caps.canvas_control_reason or "The engine in use cannot start from existing text."
        for act in (*self.edit_actions, *self.strength_actions):
            tip = act.statusTip() if caps.canvas_control else reason
            act.setToolTip(plain_tip(tip or act.text().replace("&", "")))  # the reason quotes the server
        self.strength.apply_capabilities(caps, reason)
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

    def _on_view_setting(self, view: str) -> None:
        self.diff_enabled = view == "diff"
        self.actionToggleDiffView.setChecked(self.diff_enabled)
        self._repaint()

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
                    self.pin_commands.pinnable()  # says why not now
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
        if self.settings is None or self.settings[key] == value:
            return
        try:
            self.settings.set(key, value)
        except Exception:  # a view choice is never worth an error
            log.exception("%s not remembered", key)

    def panel_refresh(self) -> None:
        self.panel.refresh(self.assistant.suggestion)
