"""The assistant's commands in the window: Draft, Rewrite and its presets, Infill, the custom instruction, and
accepting, dismissing and cycling a suggestion; when each can run, and the editor's right-click menu that
offers them. The actions are the window's (made on it, with the command table's names, labels and keys); the
window keeps them as its own attributes (`actionDraft`, `suggestion_actions`, `preset_actions`…)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, QPoint
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QMainWindow, QMenu

from app.assist.controller import Assistant
from app.assist.presets import preset_label
from app.ui import actions
from app.ui.editor import Editor

GENERIC_REWRITE = "Rewrite it so it reads better, keeping its meaning."


class AssistActions(QObject):
    def __init__(
        self,
        window: QMainWindow,
        assistant: Assistant,
        editor: Editor,
        *,
        register: Callable[[str, Callable[[], object]], QAction],
        context_menu_hooks: list[Callable[[QMenu], None]],
        show_message: Callable[[str], None],
    ) -> None:
        """`register(command_id, slot)` makes one of the window's actions (and lists it for the toolbar)."""
        super().__init__(window)
        self.window, self.assistant, self.editor = window, assistant, editor
        self.context_menu_hooks = context_menu_hooks  # extra right-click entries, the services' own
        self._show_message = show_message
        a = assistant
        self.actionDraft = register("actionDraft", a.draft)
        self.actionRewrite = register("actionRewrite", partial(a.rewrite, GENERIC_REWRITE))
        self.actionInfill = register("actionInfill", a.infill)
        self.actionCustomInstruction = register("actionCustomInstruction", self.custom_instruction)
        self.actionAcceptSuggestion = register("actionAcceptSuggestion", a.accept_all)
        self.actionAcceptWord = register("actionAcceptWord", a.accept_word)
        self.actionAcceptLine = register("actionAcceptLine", a.accept_line)
        self.actionDismissSuggestion = register("actionDismissSuggestion", a.dismiss)
        self.actionNextAlternative = register("actionNextAlternative", a.next_alternative)
        self.actionPreviousAlternative = register("actionPreviousAlternative", a.previous_alternative)
        self.suggestion_actions = [
            self.actionAcceptSuggestion,
            self.actionAcceptWord,
            self.actionAcceptLine,
            self.actionDismissSuggestion,
            self.actionNextAlternative,
            self.actionPreviousAlternative,
        ]
        editor.priority_actions.extend(self.suggestion_actions)
        # The requests too: their keys can be rebound (app.ui.keys) to ones the editor would take for itself
        # (Tab, Ctrl+Right…); a key the writer gave to Draft must draft, not type a tab.
        editor.priority_actions.extend([self.actionDraft, self.actionRewrite, self.actionInfill])
        self.preset_actions: list[QAction] = []
        for key, instruction in a.presets().items():
            act = actions.create_member(
                window,
                "actionPreset_",
                key,
                preset_label(key),
                partial(a.rewrite, instruction),
                tip=instruction,
            )
            self.preset_actions.append(act)

    def sync_enabled(self) -> None:
        """Which suggestion commands can run now (called whenever the assistant's state changes)."""
        a = self.assistant
        visible = a.suggestion_visible
        # While a request runs the accept keys belong to it even before its first words show, so Tab never
        # indents or accepts depending on timing (an accept with nothing visible yet does nothing).
        running = a.state == "denoising"
        for act in (self.actionAcceptSuggestion, self.actionAcceptWord, self.actionAcceptLine):
            act.setEnabled(visible or running)
        self.actionDismissSuggestion.setEnabled(a.active)
        # Alt+]/Alt+[ belong to a suggestion as long as one is shown, even with a single alternative (the rest
        # after a partial accept): a disabled action lets Qt type "]" into the region, cancelling the
        # suggestion.
        self.actionNextAlternative.setEnabled(a.active)
        self.actionPreviousAlternative.setEnabled(a.active)

    def explain_unavailable(self, action: QAction, first: Callable[[QAction], bool] | None = None) -> None:
        """An assistant key whose action cannot run now: say so (the editor typed nothing). `first` may
        explain it better (diffusion editing's own commands) and returns True when it did."""
        if first is not None and first(action):
            return
        name = action.text().replace("&", "").rstrip("…")
        needs = "a suggestion on screen" if action in self.suggestion_actions else "the model to be ready"
        self._show_message(f"{name} needs {needs}.")

    def custom_instruction(self) -> None:
        has_selection = self.editor.textCursor().hasSelection()
        prompt = "How should the selection be rewritten?" if has_selection else "What should be written here?"
        text, ok = QInputDialog.getText(self.window, "Custom instruction", prompt)
        if ok and text.strip():
            if has_selection:
                self.assistant.rewrite(text.strip())
            else:
                self.assistant.draft(text.strip())

    def on_context_menu(self, pos: QPoint) -> None:
        menu = self.editor.createStandardContextMenu(pos)
        menu.addSeparator()
        menu.addAction(self.actionDraft)
        menu.addAction(self.actionRewrite)
        presets = QMenu("Rewrite as", menu)
        presets.addActions(self.preset_actions)
        menu.addMenu(presets)
        menu.addAction(self.actionCustomInstruction)
        menu.addAction(self.actionInfill)
        if self.assistant.active:
            menu.addSeparator()
            menu.addActions(self.suggestion_actions)
        for hook in self.context_menu_hooks:
            hook(menu)
        menu.exec(self.editor.viewport().mapToGlobal(pos))
        menu.deleteLater()
