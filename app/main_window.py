"""The main window: menus, toolbar with the rewrite presets, right-click menu, and a status bar that says what
the model is doing (not loaded / loading with progress / ready / error), on which device, and how the last
request went (steps, tokens per forward, tokens per second, time to the first visible draft).

The window composes the parts that do each job: `assist.model_load` (the model's load state: `ModelState`,
its status bar labels, the demo strip), `assist.assist_actions` (the assistant's commands and the right-click
menu), `ui.status.TiedMessages` (passing messages), `ui.theme.ThemeActions` (View ▸ Theme), `ui.help`'s
first-run hint and `ui.actions`' toolbar; it keeps their actions and widgets under its own names.

Extension points for the document controller: `menuFile` (insert before `actionQuit`), `self.editor`, and
`close_guards` (callables that return False to keep the window open, e.g. for unsaved work).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Slot
from PySide6.QtGui import QAction, QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from app.assist.assist_actions import GENERIC_REWRITE, AssistActions
from app.assist.controller import Assistant, RequestDefaults
from app.assist.engine_host import EngineHost
from app.assist.model_load import ModelLoad, ModelState
from app.config.commands import BY_ID
from app.config.model_choice import folder_for
from app.config.sections import ModelSection
from app.config.settings import Settings
from app.documents.brief import BriefController
from app.platform.folders import data_dir
from app.ui import actions, window_place
from app.ui import help as help_ui
from app.ui.demo_notice import demo_wording
from app.ui.editor import Editor, FindBar
from app.ui.model_notice import ModelNotice
from app.ui.status import MessageBar, TiedMessages, stats_text
from app.ui.theme import ThemeActions
from app.ui.widgets import named
from engine.api import Stats

log = logging.getLogger(__name__)
__all__ = ["GENERIC_REWRITE", "MainWindow"]  # GENERIC_REWRITE: app.assist.assist_actions's, named here too


class MainWindow(QMainWindow):
    def __init__(
        self,
        host: EngineHost,
        *,
        settings: Settings | None = None,
        model_dir: str | Path | None = None,
        device: str = "auto",
        quantization: str = "auto",
        no_model_reason: str = "",
        request_defaults: RequestDefaults | None = None,
    ) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("Letterpress")
        self.resize(1000, 720)
        self._keeps_place = False  # `keep_place()`: only the app's own window keeps its size and place
        self.host = host
        self.settings = settings
        self.close_guards: list[Callable[[], bool]] = []
        self.context_menu_hooks: list[Callable[[QMenu], None]] = []  # extra right-click entries
        # Filled by the wiring (app.integration.install_services) when it plugs the services in.
        self.services: object | None = None  # app.integration.Services
        self.brief: BriefController | None = None
        self.model_dialog: QDialog | None = None
        self.settings_dialog: QDialog | None = None
        self.palette_dialog: QDialog | None = None

        self.editor = Editor(self)
        # Passing status messages go once the suggestion or the document they describe changes; edits are
        # counted before the assistant's own slots see them (app.ui.status.TiedMessages).
        self.messages = TiedMessages(self.statusBar, self._what_messages_describe)
        self.editor.document().contentsChange.connect(self.messages.edited)
        self.find_bar = FindBar(self.editor, self)
        central = QWidget(self)
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.firstRunHint = help_ui.FirstRunHint(central)  # shown once, above the page
        # What the writer must read about the model (the saved one was not found, the demo runs instead):
        # whole and word-wrapped here, where the status bar's few hundred pixels would cut it.
        self.modelNotice = ModelNotice(central)
        column.addWidget(self.modelNotice)
        column.addWidget(self.firstRunHint)
        self._page_column = column  # the demo strip joins it (`_build_status_bar`)
        column.addWidget(self.editor)
        column.addWidget(self.find_bar)
        self.setCentralWidget(central)

        # What every request carries besides the text (brief, strength per instruction): the services that own
        # those parts are handed this object; the assistant is given it here.
        self.request_defaults = request_defaults if request_defaults is not None else RequestDefaults()
        self.assistant = Assistant(self.editor, host, settings, defaults=self.request_defaults)
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self._build_status_bar(model_dir, device, quantization)
        from app.assist.editing import DiffusionEditing  # strength, re-roll, pins, diff, alternatives panel

        self.editing = DiffusionEditing(
            self,
            assistant=self.assistant,
            request_defaults=self.request_defaults,
            assist_menu=self.menuAssist,
            view_menu=self.menuView,
            show_message=self.show_message,
            context_menu_hooks=self.context_menu_hooks,
        )
        from app.assist.server_mode import ServerMode  # Model ▸ Use a server…, "Server: host · model"

        self.server_mode = ServerMode(self)
        self.editor.keyUnavailable.connect(self._on_key_unavailable)
        self.editor.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.editor.customContextMenuRequested.connect(self.assist_actions.on_context_menu)

        self.assistant.changed.connect(self.assist_actions.sync_enabled)
        self.assistant.changed.connect(self.messages.expire)
        self.assistant.message.connect(self.show_message)
        self.assistant.activityChanged.connect(self.model_load.on_activity)
        self.assistant.finishedStats.connect(self._on_stats)
        self.editor.wordCountChanged.connect(self._on_word_count)
        self.model_load.stateChanged.connect(self._on_model_state)
        self.model_load.demoChanged.connect(self._on_demo_changed)
        self.model_load.listen()  # after the server mode's own slots, as before
        if settings is not None:
            settings.follow(lambda v: v.appearance.theme, self.themes.check, now=False)
            settings.follow(lambda v: v.model, self._on_model_setting, now=False)
            from app.ui import keys

            keys.follow(self, settings)  # the assistant's keys as the writer bound them in Settings
        self.assist_actions.sync_enabled()
        if settings is not None and help_ui.first_run(
            data_dir()
        ):  # shown once, remembered in the data folder
            self.show_first_run_hint()
        self.assistant.changed.connect(self._hide_hint_once_used)
        if self.model_dir:
            self.load_model(self.model_dir)
        else:
            self.model_load.no_model(no_model_reason)
        self.editor.setFocus()

    # -- actions ---------------------------------------------------------------------------------------------

    def _action(self, name: str, slot: Callable[[], object]) -> QAction:
        """The window's action for command-table entry `name` (label, keys, tips: app.config.commands),
        registered by its id for the toolbar."""
        action = actions.create(self, name, slot)
        self.window_actions[name] = action
        return action

    def _build_actions(self) -> None:
        self.window_actions: dict[str, QAction] = {}  # by command id: what the toolbar layout places
        # The assistant's commands (app.assist.assist_actions), kept under their names on the window.
        hooks = self.context_menu_hooks
        c = self.assist_actions = AssistActions(
            self,
            self.assistant,
            self.editor,
            register=self._action,
            context_menu_hooks=hooks,
            show_message=self.show_message,
        )
        self.actionDraft, self.actionRewrite = c.actionDraft, c.actionRewrite
        self.actionInfill = c.actionInfill
        self.actionCustomInstruction = c.actionCustomInstruction
        self.actionAcceptSuggestion, self.actionAcceptWord = c.actionAcceptSuggestion, c.actionAcceptWord
        self.actionAcceptLine, self.actionDismissSuggestion = c.actionAcceptLine, c.actionDismissSuggestion
        self.actionNextAlternative = c.actionNextAlternative
        self.actionPreviousAlternative = c.actionPreviousAlternative
        self.suggestion_actions, self.preset_actions = c.suggestion_actions, c.preset_actions

        e = self.editor
        self.actionUndo = self._action("actionUndo", e.undo)
        self.actionRedo = self._action("actionRedo", e.redo)
        self.actionRedo.setShortcuts(help_ui.redo_keys())  # Ctrl+Y too on Linux (Qt's binding lacks it)
        self.actionCut = self._action("actionCut", e.cut)
        self.actionCopy = self._action("actionCopy", e.copy)
        self.actionPaste = self._action("actionPaste", e.paste)
        self.actionSelectAll = self._action("actionSelectAll", e.selectAll)
        self.actionShortcuts = self._action("actionShortcuts", self.show_shortcuts)
        self.actionGettingStarted = self._action("actionGettingStarted", self.show_first_run_hint)
        self.actionFind = self._action("actionFind", lambda: self.find_bar.open(replace=False))
        self.actionReplace = self._action("actionReplace", lambda: self.find_bar.open(replace=True))
        self.actionZoomIn = self._action("actionZoomIn", e.zoom_in)
        self.actionZoomOut = self._action("actionZoomOut", e.zoom_out)
        self.actionZoomReset = self._action("actionZoomReset", e.zoom_reset)
        self.actionLoadModel = self._action("actionLoadModel", self.choose_model_folder)
        self.actionCancelLoad = self._action("actionCancelLoad", self.host.cancel_load)
        self.actionCommandPalette = self._action("actionCommandPalette", self.command_palette)
        self.actionQuit = self._action("actionQuit", self.close)
        # View ▸ Theme (app.ui.theme); the suggestion is repainted in the new colours.
        self.themes = ThemeActions(self, self._action, self.settings, after=self.assistant.ghost.flush)
        self.theme_actions = self.themes.actions
        actions.follow_undo(e, self.actionUndo, self.actionRedo)

    def _build_menus(self) -> None:
        """The menu bar from the command table: its menus (`MENUS`) in order, and each of the window's own
        actions at the place the table gives it; the services place theirs the same way later."""
        self.menuFile = actions.window_menu(self, "menuFile")
        self.menuEdit = actions.window_menu(self, "menuEdit")
        self.menuView = actions.window_menu(self, "menuView")
        self.menuAssist = actions.window_menu(self, "menuAssist")
        self.menuModel = actions.window_menu(self, "menuModel")
        self.menuHelp = actions.window_menu(self, "menuHelp")
        self.menuTheme = actions.window_menu(self, "menuTheme")
        self.menuTheme.addActions(self.theme_actions)
        self.menuRewritePresets = actions.window_menu(self, "menuRewritePresets")
        self.menuRewritePresets.addActions(self.preset_actions)
        own = [a for a in self.actions() if a.objectName() in BY_ID and a not in self.theme_actions]
        actions.place(self, *own)

    def _build_toolbar(self) -> None:
        self.toolbarAssist = actions.build_toolbar(
            self, "toolbarAssist", self.window_actions, self.menuRewritePresets, self.preset_actions
        )

    def _build_status_bar(self, model_dir: str | Path | None, device: str, quantization: str) -> None:
        bar = MessageBar(self)  # long messages end at a word with "…", the whole text in the tooltip
        self.setStatusBar(bar)
        # Which model is asked for and where its load is (app.assist.model_load): its labels come first in
        # the status bar, its demo strip goes above the page, and the note above the page follows it.
        self.model_load = ModelLoad(
            self.host,
            self,
            settings=self.settings,
            notice=self.modelNotice,
            show_message=self.show_message,
            server_action=self._server_action,
            load_real=self._on_demo_load_real,
            model_dir=model_dir,
            device=device,
            quantization=quantization,
        )
        self.modelLabel, self.loadBar = self.model_load.label, self.model_load.bar
        self.deviceLabel, self.demoBanner = self.model_load.device_label, self.model_load.banner
        self._page_column.insertWidget(1, self.demoBanner)
        self.statsLabel = named(QLabel(self), "requestStats")
        self.wordsLabel = named(QLabel("0 words", self), "wordCount")
        bar.addPermanentWidget(self.statsLabel)
        bar.addPermanentWidget(self.wordsLabel)

    # -- commands --------------------------------------------------------------------------------------------

    def palette_commands(self) -> dict[str, QAction]:
        """Every menu command that can run now, by its menu path (the palette lists the others greyed)."""
        from app.ui.palette import enabled_commands

        return enabled_commands(self.menuBar(), (self.actionCommandPalette,))

    def command_palette(self) -> None:
        """Open the filter-as-you-type palette over every menu command (app.ui.palette)."""
        from app.ui.palette import open_palette

        self.palette_dialog = open_palette(self, self.menuBar(), (self.actionCommandPalette,))

    def set_theme(self, theme: str) -> None:
        """Switch the colour theme now (and remember it, when there are settings)."""
        self.themes.set_theme(theme)

    def choose_model_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(
            self, "Choose a DiffusionGemma model folder", self.model_dir or ""
        )
        if folder:
            self.load_model(folder)

    @property
    def brief_dialog(self) -> QDialog | None:
        """The document brief's dialog, once opened (Assist ▸ Document brief…)."""
        return self.brief.dialog if self.brief is not None else None

    def load_model(
        self, model_dir: str | Path, device: str | None = None, quantization: str | None = None
    ) -> None:
        """Load `model_dir` (on `device` with `quantization` when given: they are kept for later loads)."""
        self.model_load.load(model_dir, device, quantization)

    # The model asked for, kept by the load state machine (the server mode and the wiring read and set them).
    @property
    def model_state(self) -> str:
        """Where the model is: "not loaded", "loading", "ready" or "error" (`ModelState`'s values)."""
        return self.model_load.state.value

    @property
    def model_dir(self) -> str | None:
        return self.model_load.model_dir

    @model_dir.setter
    def model_dir(self, folder: str | None) -> None:
        self.model_load.model_dir = folder

    @property
    def device(self) -> str:
        return self.model_load.device

    @property
    def quantization(self) -> str:
        return self.model_load.quantization

    def _on_key_unavailable(self, action: QAction) -> None:
        """An assistant key whose action cannot run now: say so (the editor typed nothing)."""
        self.assist_actions.explain_unavailable(action, getattr(self.editing, "explain_unavailable", None))

    def show_first_run_hint(self) -> None:
        """The short hint above the page (first start, or Help ▸ Getting started); the first suggestion hides
        it. While the built-in demo is the loaded model it says so, in the demo's own words
        (`demo_wording`)."""
        text = help_ui.hint_text(self)
        if self.model_load.demo:
            text = f"{text}\n\n{demo_wording().hint}"
        self.firstRunHint.show_text(text)

    def _hide_hint_once_used(self) -> None:
        if self.firstRunHint.isVisible() and self.assistant.suggestion_visible:
            self.firstRunHint.hide_keeping_room()

    def show_shortcuts(self) -> None:
        """Help ▸ Keyboard shortcuts: every command and its keys, as bound now, with a search field."""
        sheet = help_ui.ShortcutSheet(self)
        self.shortcut_sheet = sheet
        sheet.show()
        sheet.filter.setFocus()

    def show_message(self, text: str, ms: int = 8000, *, tied: bool = True) -> None:
        """A status message for `ms` (0: until replaced); a passing one (`tied`) also goes once the suggestion
        or the document it describes changes (`TiedMessages.show`)."""
        self.messages.show(text, ms, tied=tied)

    def _what_messages_describe(self) -> tuple[int, bool, str] | None:
        sug = self.assistant.suggestion
        return None if sug is None else (sug.request_id, sug.running, sug.error)

    # -- status ----------------------------------------------------------------------------------------------

    def _on_model_state(self, state: ModelState) -> None:
        self.actionCancelLoad.setEnabled(state is ModelState.LOADING)

    def _on_demo_changed(self, demo: bool) -> None:
        self.editing.panel.set_demo(demo)  # the demo's confidence is its own certainty, not quality
        if self.firstRunHint.isVisible():  # the hint names the demo while it is the model in use
            self.show_first_run_hint()

    def _server_action(self) -> QAction | None:
        """The server mode's "Use a server…" action: the one the mode this window built holds (not looked up
        by name or text among the window's actions, where a test's stand-in could lose to the real one)."""
        return self.server_mode.actionUseServer

    def _on_demo_load_real(self) -> None:
        manager = self.findChild(QAction, "actionModelManager")
        if manager is not None:
            manager.trigger()
        else:
            self.choose_model_folder()

    @Slot(object, float)
    def _on_stats(self, stats: Stats, first_visible: float) -> None:
        self.statsLabel.setText(stats_text(stats, first_visible))

    @Slot(int)
    def _on_word_count(self, words: int) -> None:
        self.wordsLabel.setText(f"{words:,} word{'s' if words != 1 else ''}")

    def _on_model_setting(self, model: ModelSection) -> None:
        """Settings ▸ Model changed: the device and quantization for the next load, and the folder loaded."""
        self.model_load.device = model.device
        self.model_load.quantization = model.quantization
        folder = folder_for(model.folder)  # the demo's marker is this version's demo
        if folder:
            self.load_model(folder)

    # -- lifetime --------------------------------------------------------------------------------------------

    def keep_place(self) -> None:
        """Open with the size and position the window had when it last closed, and keep them at this close
        (`python -m app` asks; windows built by tests keep the default 1000x720)."""
        self._keeps_place = True
        window_place.restore(self)

    def closeEvent(self, event: QCloseEvent) -> None:
        for guard in self.close_guards:
            if not guard():
                event.ignore()
                return
        if self._keeps_place:  # the next start opens the window where the writer left it
            window_place.save(self)
        self.host.shutdown(timeout=2.0)
        super().closeEvent(event)
