"""The main window: menus, toolbar with the rewrite presets, right-click menu, and a status bar that says what
the model is doing (not loaded / loading with progress / ready / error), on which device, and how the last
request went (steps, tokens per forward, tokens per second, time to the first visible draft).

Extension points for the document controller: `menuFile` (insert before `actionQuit`), `self.editor`, and
`close_guards` (callables that return False to keep the window open, e.g. for unsaved work).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt, Slot
from PySide6.QtGui import QAction, QActionGroup, QCloseEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMenu,
    QProgressBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.assist.controller import Assistant
from app.assist.engine_host import EngineHost
from app.assist.presets import preset_label
from app.assist.request_defaults import RequestDefaults
from app.config.commands import BY_ID, toolbar_layout
from app.config.model_choice import folder_for
from app.documents.brief import BriefController
from app.platform.folders import data_dir
from app.ui import actions, window_place
from app.ui import help as help_ui
from app.ui.demo_notice import DemoBanner, demo_wording, is_demo_model
from app.ui.editor import Editor, FindBar
from app.ui.model_notice import ModelNotice, fallback_sentence
from app.ui.status import ElidedLabel, MessageBar, stats_text
from app.ui.widgets import named
from engine.api import EngineError, LoadProgress, ModelInfo, Stats

log = logging.getLogger(__name__)

GENERIC_REWRITE = "Rewrite it so it reads better, keeping its meaning."
STATUS_LABEL_MAX_PX = 260  # the widest the model and device labels of the status bar grow


class MainWindow(QMainWindow):
    def __init__(
        self,
        host: EngineHost,
        *,
        settings: Any | None = None,
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
        self.device = device
        self.quantization = quantization
        self.model_dir: str | None = str(model_dir) if model_dir else None
        self.model_state = "not loaded"
        self._loading_folder = ""  # the folder (or server URL) the load now running was asked for
        self._fallback_from = ""  # the model that could not be used when the demo was loaded instead
        self._demo_loaded = False
        self._activity, self._activity_shown, self._activity_running = "", "", False
        self.close_guards: list[Callable[[], bool]] = []
        self.context_menu_hooks: list[Callable[[QMenu], None]] = []  # extra right-click entries
        # Filled by the wiring (app.integration.install_services) when it plugs the services in.
        self.services: object | None = None  # app.integration.Services
        self.brief: BriefController | None = None
        self.model_dialog: QDialog | None = None
        self.settings_dialog: QDialog | None = None
        self.palette_dialog: QDialog | None = None

        self.editor = Editor(self)
        # A passing status message describes the suggestion and the document as they were when it was shown;
        # it goes once either changes (undo, a re-run that finished, an accept or dismiss), so the bar never
        # keeps saying something no longer true. Connected before the assistant's own slots, so a message
        # the assistant gives about an edit is shown after the edit is counted.
        self._edits = 0
        self._message_state: tuple[str, object] | None = None  # a tied message and what it describes
        self.editor.document().contentsChange.connect(self._on_edit_for_message)
        self.find_bar = FindBar(self.editor, self)
        central = QWidget(self)
        column = QVBoxLayout(central)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.firstRunHint = named(QLabel(central), "firstRunHint")  # shown once, above the page
        self.firstRunHint.setWordWrap(True)
        self.firstRunHint.setContentsMargins(10, 6, 10, 6)
        self.firstRunHint.setToolTip("Shown on the first start only; Help ▸ Getting started shows it again.")
        self.firstRunHint.hide()
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
        self._build_status_bar()
        from app.assist.editing import (
            DiffusionEditing,
        )  # strength, re-roll, pins, diff view, alternatives panel

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
        self.editor.customContextMenuRequested.connect(self._on_context_menu)

        self.assistant.changed.connect(self._update_actions)
        self.assistant.changed.connect(self._expire_message)
        self.assistant.message.connect(self.show_message)
        self.assistant.activityChanged.connect(self._on_activity)
        self.assistant.finishedStats.connect(self._on_stats)
        self.editor.wordCountChanged.connect(self._on_word_count)
        host.loadStarted.connect(self._on_load_started)
        host.loadProgress.connect(self._on_load_progress)
        host.loaded.connect(self._on_loaded)
        host.loadFailed.connect(self._on_load_failed)
        if settings is not None and hasattr(settings, "changed"):
            settings.changed.connect(self._on_setting_changed)
            from app.ui import keys

            keys.follow(self, settings)  # the assistant's keys as the writer bound them in Settings
        self._update_actions()
        if settings is not None and help_ui.first_run(
            data_dir()
        ):  # shown once, remembered in the data folder
            self.show_first_run_hint()
        self.assistant.changed.connect(self._hide_hint_once_used)
        if self.model_dir:
            self.load_model(self.model_dir)
        else:
            self._set_model_state(
                "not loaded",
                "No model",
                no_model_reason
                or "No model is configured. Choose a model folder with Model ▸ Load model folder…",
            )
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
        a = self.assistant
        self.actionDraft = self._action("actionDraft", a.draft)
        self.actionRewrite = self._action("actionRewrite", lambda: a.rewrite(GENERIC_REWRITE))
        self.actionInfill = self._action("actionInfill", a.infill)
        self.actionCustomInstruction = self._action("actionCustomInstruction", self.custom_instruction)
        self.actionAcceptSuggestion = self._action("actionAcceptSuggestion", a.accept_all)
        self.actionAcceptWord = self._action("actionAcceptWord", a.accept_word)
        self.actionAcceptLine = self._action("actionAcceptLine", a.accept_line)
        self.actionDismissSuggestion = self._action("actionDismissSuggestion", a.dismiss)
        self.actionNextAlternative = self._action("actionNextAlternative", a.next_alternative)
        self.actionPreviousAlternative = self._action("actionPreviousAlternative", a.previous_alternative)
        self.suggestion_actions = [
            self.actionAcceptSuggestion,
            self.actionAcceptWord,
            self.actionAcceptLine,
            self.actionDismissSuggestion,
            self.actionNextAlternative,
            self.actionPreviousAlternative,
        ]
        self.editor.priority_actions.extend(self.suggestion_actions)
        # The requests too: their keys can be rebound (app.ui.keys) to ones the editor would take for itself
        # (Tab, Ctrl+Right…); a key the writer gave to Draft must draft, not type a tab.
        self.editor.priority_actions.extend([self.actionDraft, self.actionRewrite, self.actionInfill])
        self.preset_actions: list[QAction] = []
        for key, instruction in a.presets().items():
            act = actions.create_member(
                self,
                "actionPreset_",
                key,
                preset_label(key),
                partial(a.rewrite, instruction),
                tip=instruction,
            )
            self.preset_actions.append(act)

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
        themes = QActionGroup(self)
        self.theme_actions: list[QAction] = []
        current = self.settings["appearance.theme"] if self.settings is not None else "system"
        for theme in ("system", "light", "dark"):
            act = self._action(f"actionTheme_{theme}", partial(self.set_theme, theme))
            act.setChecked(theme == current)
            themes.addAction(act)
            self.theme_actions.append(act)
        doc = e.document()
        for signal in (doc.undoAvailable, doc.redoAvailable, doc.undoCommandAdded, doc.contentsChanged):
            signal.connect(self._sync_undo_actions)
        self._sync_undo_actions()

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
        """The Assist toolbar from the command table (`toolbar_layout`); Rewrite is a button whose menu holds
        the presets, which follow it."""
        tools = self.addToolBar("Assist")
        tools.setObjectName("toolbarAssist")
        tools.setMovable(False)
        section: int | None = None
        for here, command_id in toolbar_layout("toolbarAssist"):
            action = self.window_actions.get(command_id)
            if action is None:
                continue
            if section is not None and here != section:
                tools.addSeparator()
            section = here
            if command_id != "actionRewrite":
                tools.addAction(action)
                continue
            rewrite_button = QToolButton(self)
            rewrite_button.setObjectName("rewriteButton")
            rewrite_button.setDefaultAction(action)
            rewrite_button.setMenu(self.menuRewritePresets)
            rewrite_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
            rewrite_button.setText("Rewrite")
            tools.addWidget(rewrite_button)
            for act in self.preset_actions:
                tools.addAction(act)
        self.toolbarAssist = tools

    def _build_status_bar(self) -> None:
        bar = MessageBar(self)  # long messages end at a word with "…", the whole text in the tooltip
        self.setStatusBar(bar)
        # A long model name or device note ends at a word ("…", all of it in the tooltip) instead of pushing
        # the message away until it is cut inside its first word.
        self.modelLabel = named(ElidedLabel(self, max_width=STATUS_LABEL_MAX_PX), "modelStatus")
        self.loadBar = named(QProgressBar(self), "loadProgress")
        self.loadBar.setRange(0, 100)
        self.loadBar.setMaximumWidth(140)
        self.loadBar.setTextVisible(True)
        self.loadBar.hide()
        self.deviceLabel = named(ElidedLabel(self, max_width=STATUS_LABEL_MAX_PX), "deviceStatus")
        self.statsLabel = named(QLabel(self), "requestStats")
        self.wordsLabel = named(QLabel("0 words", self), "wordCount")
        # Shown while the built-in demo model is the one loaded: a strip above the page, not in the status
        # bar, where its badge and two buttons took ~480 px and pushed the window past its default 1000 px.
        self.demoBanner = DemoBanner(self)
        self.demoBanner.loadRealModel.connect(self._on_demo_load_real)
        self.demoBanner.useServer.connect(self._on_demo_use_server)
        strip = self.demoBanner.layout()
        if isinstance(strip, QHBoxLayout):
            strip.setContentsMargins(10, 4, 10, 4)
            strip.addStretch(1)
        self._page_column.insertWidget(1, self.demoBanner)
        for w in (
            self.modelLabel,
            self.loadBar,
            self.deviceLabel,
            self.statsLabel,
            self.wordsLabel,
        ):
            bar.addPermanentWidget(w)

    def _sync_undo_actions(self, *_args: object) -> None:
        """Undo/Redo are enabled exactly when Ctrl+Z / Ctrl+Shift+Z would change the document."""
        doc = self.editor.document()
        on = doc.isUndoRedoEnabled() and not self.editor.isReadOnly()
        self.actionUndo.setEnabled(on and doc.isUndoAvailable())
        self.actionRedo.setEnabled(on and doc.isRedoAvailable())

    def _update_actions(self) -> None:
        a = self.assistant
        visible = a.suggestion_visible
        _index, _count = a.alternatives
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

    # -- commands --------------------------------------------------------------------------------------------

    def custom_instruction(self) -> None:
        has_selection = self.editor.textCursor().hasSelection()
        prompt = "How should the selection be rewritten?" if has_selection else "What should be written here?"
        text, ok = QInputDialog.getText(self, "Custom instruction", prompt)
        if ok and text.strip():
            if has_selection:
                self.assistant.rewrite(text.strip())
            else:
                self.assistant.draft(text.strip())

    def palette_commands(self) -> dict[str, QAction]:
        """Every menu command that can run now, by its menu path (the palette lists the others greyed)."""
        from app.ui.palette import menu_commands

        return {
            c.label: c.action
            for c in menu_commands(self.menuBar(), (self.actionCommandPalette,))
            if c.enabled
        }

    def command_palette(self) -> None:
        """Open the filter-as-you-type palette over every menu command (app.ui.palette)."""
        from app.ui.palette import CommandPalette, menu_commands

        dialog = CommandPalette(menu_commands(self.menuBar(), (self.actionCommandPalette,)), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.palette_dialog = dialog
        dialog.open()
        dialog.filter.setFocus()

    def set_theme(self, theme: str) -> None:
        """Switch the colour theme now (and remember it, when there are settings)."""
        from app.ui.theme import apply_theme

        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)  # type: ignore[arg-type]
        if self.settings is not None:
            try:
                self.settings.set("appearance.theme", theme)
            except (ValueError, KeyError):
                log.exception("theme setting refused")
        for act in self.theme_actions:
            act.setChecked(act.objectName() == f"actionTheme_{theme}")
        self.assistant.ghost.flush()

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
        if device is not None:
            self.device = device
        if quantization is not None:
            self.quantization = quantization
        self.model_dir = str(model_dir)
        self.host.load(self.model_dir, self.device, self.quantization)  # type: ignore[arg-type]
        self._set_model_state("loading", "Loading model…", f"Loading {self.model_dir}")

    def _on_key_unavailable(self, action: QAction) -> None:
        """An assistant key whose action cannot run now: say so (the editor typed nothing)."""
        handler = getattr(self.editing, "explain_unavailable", None)
        if handler is not None and handler(action):
            return
        name = action.text().replace("&", "").rstrip("…")
        needs = "a suggestion on screen" if action in self.suggestion_actions else "the model to be ready"
        self.show_message(f"{name} needs {needs}.")

    def show_first_run_hint(self) -> None:
        """The short hint above the page (first start, or Help ▸ Getting started); the first suggestion hides
        it. While the built-in demo is the loaded model it says so, in the demo's own words
        (`demo_wording`)."""
        text = help_ui.hint_text(self)
        if self._demo_loaded:
            text = f"{text}\n\n{demo_wording().hint}"
        self.firstRunHint.setText(text)
        self._retain_hint_room(False)
        self.firstRunHint.show()

    def _hide_hint_once_used(self) -> None:
        if self.firstRunHint.isVisible() and self.assistant.suggestion_visible:
            # Its room stays (blank) until the next start: the page jumped ~100 px up under the writer's eyes
            # at the first draft.
            self._retain_hint_room(True)
            self.firstRunHint.hide()

    def _retain_hint_room(self, retain: bool) -> None:
        policy = self.firstRunHint.sizePolicy()
        policy.setRetainSizeWhenHidden(retain)
        self.firstRunHint.setSizePolicy(policy)

    def show_shortcuts(self) -> None:
        """Help ▸ Keyboard shortcuts: every command and its keys, as bound now, with a search field."""
        sheet = help_ui.ShortcutSheet(self)
        self.shortcut_sheet = sheet
        sheet.show()
        sheet.filter.setFocus()

    def show_message(self, text: str, ms: int = 8000, *, tied: bool = True) -> None:
        """A status message for `ms` (0: until replaced). A passing one (`tied`, the default) also goes as
        soon as the suggestion or the document it describes changes; lasting ones (a request running, the
        model's state, a warning) are cleared by whoever shows them."""
        self.statusBar().showMessage(text, ms)
        self._message_state = (text, self._what_messages_describe()) if tied and ms > 0 else None

    def _what_messages_describe(self) -> tuple[int, tuple[int, bool, str] | None]:
        sug = self.assistant.suggestion
        return (self._edits, None if sug is None else (sug.request_id, sug.running, sug.error))

    def _on_edit_for_message(self, *_args: object) -> None:
        self._edits += 1
        self._expire_message()

    def _expire_message(self) -> None:
        if self._message_state is None:
            return
        text, described = self._message_state
        if described == self._what_messages_describe():
            return
        self._message_state = None
        bar = self.statusBar()
        if bar.currentMessage() == text:  # not one shown since by another route
            bar.clearMessage()

    @Slot(str)
    def _on_activity(self, text: str) -> None:
        """What the assistant runs stays in the status bar while it runs ("Rewriting: Make it shorter…")."""
        if text:
            self._activity = text
            self._activity_running = True
            self.show_message(self._activity_line(), 0)
        else:
            self._activity_running = False
            if self.statusBar().currentMessage() in (self._activity, self._activity_shown):
                self.statusBar().clearMessage()

    def _activity_line(self) -> str:
        """The running request's line; while a model loads it says the request waits for it (loads and
        requests share the engine thread, so a request asked for mid-load starts when the load is done)."""
        text = self._activity
        if self.model_state == "loading":
            text = f"{text.rstrip('…')}… waits for the model to finish loading."
        elif getattr(self.host, "backend", "local") == "server":  # says where it waits, from the first moment
            where = self.host.capabilities.where.removeprefix("Server: ")
            text = f"{text.rstrip('…')}… waiting on the server ({where})."
        self._activity_shown = text
        return text

    def _resume_activity(self, loaded: str) -> None:
        """After a load ends: its message, and the request still running (it now runs) stays in view."""
        if self._activity_running:
            self._activity_shown = f"{loaded} {self._activity_line()}"
            self.show_message(self._activity_shown, 0)
        else:
            self.show_message(loaded, tied=False)  # about the model, not the document

    # -- status ----------------------------------------------------------------------------------------------

    def _set_model_state(self, state: str, label: str, tip: str = "") -> None:
        self.model_state = state
        self.modelLabel.setText(label)
        self.modelLabel.setToolTip(tip)
        self.actionCancelLoad.setEnabled(state == "loading")
        if state != "loading":
            self.loadBar.hide()
        if tip and state in ("error", "not loaded"):
            self.show_message(tip, 0)

    @Slot(str)
    def _on_load_started(self, folder: str) -> None:
        self._loading_folder = folder
        self.loadBar.setRange(0, 0)  # busy until the first measurable phase
        self.loadBar.setValue(0)
        self.loadBar.show()
        self._set_model_state("loading", "Loading model…", f"Loading {folder}")

    @Slot(object)
    def _on_load_progress(self, progress: LoadProgress) -> None:
        from app.ui.load_status import describe, percent

        share = percent(progress)
        self.loadBar.show()
        if share is None:  # a phase without a measurable fraction: a busy bar and "Preparing…", not 0%
            self.loadBar.setRange(0, 0)
        else:
            self.loadBar.setRange(0, 100)
            self.loadBar.setValue(share)
        self.modelLabel.setText(describe(progress))

    @Slot(object)
    def _on_loaded(self, info: ModelInfo) -> None:
        demo = self._show_demo_banner(info.path)
        self._demo_loaded = demo
        self.editing.panel.set_demo(demo)  # the demo's confidence is its own certainty, not quality
        if self.firstRunHint.isVisible():  # the hint names the demo while it is the model in use
            self.show_first_run_hint()
        if not (demo and self._fallback_from):  # a model the writer chose: the note about the last one goes
            self._fallback_from = ""
            self.modelNotice.clear("model")
        name = demo_wording().name if demo else info.name
        self._set_model_state("ready", f"Ready: {name}", f"{info.path} ({info.parameters:,} parameters)")
        quant = "" if info.quantization in ("", "none") else f", {info.quantization}"
        self.deviceLabel.setText(f"{info.device.upper()} ({info.dtype}{quant})")
        if demo and self._fallback_from:  # the note above the page says why; the status bar line fits
            self._resume_activity("Using the built-in demo.")
            return
        self._resume_activity(
            info.notice or (demo_wording().summary if demo else f"Model {info.name} loaded.")
        )

    def _show_demo_banner(self, path: str | None) -> bool:
        """The demo banner is visible exactly while the built-in demo model is the loaded one."""
        demo = is_demo_model(path)
        self.demoBanner.set_server_available(self._server_action() is not None)
        self.demoBanner.setVisible(demo)
        return demo

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

    def _on_demo_use_server(self) -> None:
        action = self._server_action()
        if action is not None:
            action.trigger()

    @Slot(object)
    def _on_load_failed(self, error: EngineError) -> None:
        message = getattr(error, "message", str(error))
        kind = getattr(error, "kind", "engine_error")
        kept = getattr(self.host, "model_info", None)  # a failed load never takes away the model in use
        if kept is not None:
            self.model_dir = kept.path
            demo = self._show_demo_banner(kept.path)
            name = demo_wording().name if demo else kept.name
            self._set_model_state("ready", f"Ready: {name}", f"{kept.path} ({kept.parameters:,} parameters)")
            if kind == "load_cancelled":
                self._resume_activity(f"Loading cancelled; still using {name}.")
                return
            self.modelNotice.show_text(f"{message} Still using {name}.")  # whole, above the page
            self._resume_activity(f"Still using {name}.")
            return
        if self._fall_back_to_demo(kind, message):
            return
        self._set_model_state("error", "Model error", message)
        self.modelNotice.show_text(message)

    def _fall_back_to_demo(self, kind: str, message: str) -> bool:
        """No model is in use and the one asked for cannot be used (moved, deleted, no longer a model, too
        big, a server out of reach): load the built-in demo instead, and say so in one sentence above the
        page."""
        from engine.resources import demo_model_dir

        failed = self._loading_folder or self.model_dir or ""
        demo = demo_model_dir()
        if kind == "load_cancelled" or not failed or is_demo_model(failed) or not demo.is_dir():
            return False
        saved = ""
        if self.settings is not None:
            with contextlib.suppress(KeyError):
                saved = str(self.settings["server.url"]) if failed.startswith("http") else ""
                saved = saved or folder_for(self.settings["model.folder"])
        self._fallback_from = failed
        self.modelNotice.show_text(fallback_sentence(kind, failed, saved=failed == saved), message)
        self.load_model(demo)
        return True

    @Slot(object, float)
    def _on_stats(self, stats: Stats, first_visible: float) -> None:
        self.statsLabel.setText(stats_text(stats, first_visible))

    @Slot(int)
    def _on_word_count(self, words: int) -> None:
        self.wordsLabel.setText(f"{words:,} word{'s' if words != 1 else ''}")

    def _on_setting_changed(self, key: str, value: object) -> None:
        if key == "appearance.theme":
            for act in self.theme_actions:
                act.setChecked(act.objectName() == f"actionTheme_{value}")
        if key in ("model.device", "model.quantization", "model.folder") and self.settings is not None:
            self.device = self.settings["model.device"]
            self.quantization = self.settings["model.quantization"]
            folder = folder_for(self.settings["model.folder"])  # the demo's marker is this version's demo
            if folder:
                self.load_model(folder)

    def _on_context_menu(self, pos: QPoint) -> None:
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
