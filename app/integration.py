"""Plugs documents, recovery, settings, the model manager and privacy into a main window, in one call.

`install_services(window, settings)` is what `app.__main__.build_window` calls after creating the `MainWindow`
(the wiring sits above the window in the layers, so it is typed by it). After the event loop starts, the first
file given on the command line is opened and autosaved copies left by a crash are offered for restoring.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QLabel

from app.config.sections import Theme
from app.config.settings import Settings, data_dir, recovery_dir
from app.documents.brief import BriefController
from app.documents.controller import DocumentController
from app.documents.recovery import RecoveredDocument, RecoveryManager
from app.main_window import MainWindow
from app.platform import privacy
from app.ui.actions import add_window_action, create

log = logging.getLogger(__name__)


@dataclass
class Services:
    documents: DocumentController
    recovery: RecoveryManager
    settings: Settings | None
    action_model: QAction | None
    action_settings: QAction | None
    kept_for_later: list[RecoveredDocument]
    brief: BriefController | None = None
    autosave_warning: QLabel | None = None


def install_services(
    window: MainWindow,
    settings: Settings | None = None,
    *,
    files: list[str] | None = None,
    recovery_folder: Path | None = None,
    offer_recovery: bool = True,
) -> Services:
    existing = window.services
    if isinstance(existing, Services):  # installing twice would double every menu entry and autosave
        return existing
    editor = window.editor
    folder = recovery_folder or recovery_dir()
    documents = DocumentController(
        window,
        editor,
        settings,
        recent_path=data_dir() / "recent.json",
        menu=window.menuFile,
        lock_folder=folder / "locks",
    )
    recovery = RecoveryManager(folder, documents.recovery_snapshot, parent=window)
    recovery.connect_document(documents)
    if settings is not None:
        recovery.connect_settings(settings)
        settings.follow(lambda v: v.privacy.log_document_text, privacy.set_log_document_text)
        _follow_appearance(window, settings)
    app = QApplication.instance()
    if app is not None:
        app.aboutToQuit.connect(lambda: recovery.shutdown(keep=documents.is_modified()))
    services = Services(documents, recovery, settings, None, None, [])
    from app.documents.brief import install_brief

    session = Path(getattr(recovery, "file", "") or "").stem or uuid.uuid4().hex
    services.brief = window.brief = install_brief(
        window, documents, Path(recovery.folder), session, window.request_defaults
    )
    services.action_model = _add_model_action(window, settings)
    services.action_settings = _add_settings_action(window, settings)
    documents.message.connect(lambda text: _show(window, text))
    services.autosave_warning = _add_autosave_warning(window, recovery)
    window.services = services

    def start() -> None:
        if files:
            documents.open(files[0])
            if len(files) > 1:
                _show(window, f"Letterpress edits one document per window; opened {Path(files[0]).name}.")
        if offer_recovery:
            offer(services, window)

    QTimer.singleShot(0, start)
    return services


def offer(services: Services, window: MainWindow) -> list[RecoveredDocument]:
    """Offer every autosave left by a crash; the window restores one (copies it cannot take now are kept)."""
    documents = services.documents

    def restore(doc: RecoveredDocument) -> bool:
        here = documents.path
        if documents.is_modified() or (here is not None and str(here) != (doc.path or "")):
            services.kept_for_later.append(doc)
            _show(
                window,
                f"The recovered text of {doc.name} is kept; it will be offered again at the next start.",
            )
            return False
        said: list[str] = []  # what restoring reported (read-only, changed on disk since): kept in view
        documents.message.connect(said.append)
        try:
            documents.restore(doc.text, doc.path, saved_at=doc.saved_at)
        finally:
            documents.message.disconnect(said.append)
        if services.brief is not None:
            services.brief.adopt_recovered(Path(getattr(doc, "file", "") or ""), doc.path)
        _show(window, " ".join([f"Restored unsaved text of {doc.name}. Save it to keep it.", *said]))
        return True

    return services.recovery.offer(restore)


def _add_autosave_warning(window: MainWindow, recovery: RecoveryManager) -> QLabel:
    """A permanent status-bar warning (objectName `autosaveWarning`) shown for as long as autosave fails: the
    writer must never believe unsaved text is protected when it is not. Saving keeps working meanwhile."""
    label = QLabel(window)
    label.setObjectName("autosaveWarning")
    label.setStyleSheet("QLabel { color: #b00020; font-weight: bold; }")
    label.hide()
    window.statusBar().addPermanentWidget(label)

    def update(failure: str) -> None:
        label.setText(f"⚠ {failure}" if failure else "")
        label.setToolTip(f"{failure}\nRecovery folder: {recovery.folder}" if failure else "")
        label.setVisible(bool(failure))
        if failure:
            _show(window, failure)

    recovery.statusChanged.connect(update)
    return label


def _show(window: MainWindow, text: str) -> None:
    window.show_message(text)


def _add_model_action(window: MainWindow, settings: Settings | None) -> QAction | None:
    host = window.host

    def open_dialog() -> None:
        from app.ui.model_dialog import ModelDialog

        def load(folder: str, device: str, quantization: str) -> None:
            window.load_model(folder, device, quantization)  # the window tracks its model in the status bar

        dialog = ModelDialog(host, settings, window, loader=load)
        window.model_dialog = dialog
        dialog.open()

    action = create(window, "actionModelManager", open_dialog)
    add_window_action(window, action)  # first in Model, where the command table places it
    return action


def _add_settings_action(window: MainWindow, settings: Settings | None) -> QAction | None:
    if settings is None:
        return None

    def open_dialog() -> None:
        from app.ui.settings_dialog import SettingsDialog

        dialog = SettingsDialog(settings, window)
        window.settings_dialog = dialog
        dialog.open()

    action = create(window, "actionSettings", open_dialog)  # Preferences: the platform's key, else Ctrl+,
    add_window_action(window, action, title="&Edit")
    return action


def _follow_appearance(window: MainWindow, settings: Settings) -> None:
    """Theme and font apply at once (the zoom steps the writer chose are kept on top of the font size)."""
    editor = window.editor

    def apply_font() -> None:
        from app.ui.editor import default_font

        font = default_font()
        family = settings.typed.appearance.font_family
        if family:
            font.setFamily(family)
        font.setPointSize(max(4, settings.typed.appearance.font_size + int(getattr(editor, "zoom", 0))))
        editor.setFont(font)

    def apply_theme(theme: Theme) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            from app.ui.theme import apply_theme as apply

            apply(app, theme)

    settings.follow(lambda v: v.appearance.theme, apply_theme, now=False)
    settings.follow(lambda v: (v.appearance.font_family, v.appearance.font_size), lambda _font: apply_font())
