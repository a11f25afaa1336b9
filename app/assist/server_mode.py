"""Writing with a server: Model ▸ Use a server… and Model ▸ Use the local model, the status bar's "Server:
host · model" (always in view while text goes to a server), and the capability record driving the editing
controls.

The server's URL and model are settings (`server.url`, `server.model`); its API key lives in the OS keychain
(`app.platform.keychain`), never in the settings file. Before the first connection the network guard is opened
for that host and port only (`app.platform.privacy.allow_server`); switching back closes it again. With no
server configured nothing here touches the network. Plain http:// to another machine warns once per URL.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtWidgets import QDialog, QLabel

from app.config.model_choice import folder_for
from app.platform import keychain, privacy
from app.ui import actions
from app.ui.server_dialog import PLAIN_HTTP_WARNING, ServerDialog
from engine.api import Capabilities, EngineError, ModelInfo, ServerAddressError, ServerKeyError
from engine.remote import address, redact
from engine.remote.client import host_label, is_plain_http_to_another_machine

log = logging.getLogger(__name__)


class ServerMode(QObject):
    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.host = window.host
        self.settings = window.settings
        self._warned: set[str] = set()
        self.timeouts: Any = None  # engine.remote.client.Timeouts; None: the defaults (tests make it short)
        self.dialog: ServerDialog | None = None
        self.actionUseServer = actions.create(window, "actionUseServer", self.choose_server)
        self.actionUseLocalModel = actions.create(window, "actionUseLocalModel", self.use_local)
        actions.add_window_action(window, self.actionUseServer)
        actions.add_window_action(window, self.actionUseLocalModel)
        self.whereLabel = QLabel(window)
        self.whereLabel.setObjectName("whereStatus")
        self.whereLabel.setTextFormat(Qt.TextFormat.PlainText)  # a model id is the server's text
        window.statusBar().addPermanentWidget(self.whereLabel)
        self.host.loaded.connect(self._on_loaded)
        self.host.loadFailed.connect(self._on_load_failed)
        self._show_where()
        url, model = self._server()
        if url:
            QTimer.singleShot(0, lambda: self.connect_server(url, model))

    # -- actions ---------------------------------------------------------------------------------------------

    def choose_server(self) -> None:
        url, model = self._server()
        self.dialog = ServerDialog(
            url,
            model,
            keychain.load_key(url) or "" if url else "",
            self.window,
            context_length=self._context(),
        )
        if self.dialog.exec() != QDialog.DialogCode.Accepted:
            return
        choice = self.dialog.choice()
        problem = keychain.save_key(choice.url, choice.key)
        if problem:
            self.window.show_message(problem)
        self._set("server.context", choice.context_length)
        self.connect_server(choice.url, choice.model, choice.key or None)

    def connect_server(self, url: str, model: str = "", key: str | None = None) -> None:
        """Send text to `url` from now on (its connection and probe run on the engine thread): a
        DiffusionGemma server or any other model (the probe tells them apart)."""
        from engine.remote import RemoteEngine, ServerConfig

        if key is None:
            key = keychain.load_key(url)
        try:  # an address or a key that cannot be used is refused here, before anything connects
            public_url = address.parse(url).public_url
            problem = redact.check_key(key)
            if problem:
                raise ServerKeyError(problem)
        except (ServerAddressError, ServerKeyError) as exc:
            self._refuse(exc)
            return
        if is_plain_http_to_another_machine(url) and url not in self._warned:
            self._warned.add(url)
            self.window.show_message(PLAIN_HTTP_WARNING, 0)
        privacy.allow_server(url)  # that host and port only
        config = ServerConfig(url, model or None, key, context_length=self._context() or None)
        if self.timeouts is not None:
            config = dataclasses.replace(config, timeouts=self.timeouts)
        self._pending = url
        self.whereLabel.setText(f"Server: {host_label(url)} · connecting…")
        self.host.use_server(lambda: RemoteEngine(config), public_url)  # never user:password@ in view

    def _refuse(self, error: EngineError) -> None:
        """A server that cannot even be tried: its sentence, and requests keep going where they went."""
        log.warning("server refused before connecting: %s", error.kind)
        self.window.show_message(error.message, 0)
        notice = getattr(self.window, "modelNotice", None)
        if notice is not None:
            notice.show_text(error.message, topic="server")  # stays when the local model loads
        self._show_where()

    def use_local(self) -> None:
        """One action back to the local model (still loaded if it was)."""
        privacy.forbid_servers()
        self._set("server.url", "")
        w = self.window
        saved = folder_for(self._model_folder()) or None  # the demo's marker: this version's demo
        folder = w.model_dir or saved
        if folder and str(folder).startswith(("http://", "https://")):
            folder = saved
        self.host.use_local(folder, w.device, w.quantization)
        self._show_where()

    # -- state -----------------------------------------------------------------------------------------------

    @Slot(object)
    def _on_loaded(self, info: ModelInfo) -> None:
        caps = self.host.capabilities
        if caps.backend == "remote":
            url = getattr(self, "_pending", "") or info.path
            self._set("server.url", url)
            self._set("server.model", info.name)
            self.window.model_dir = folder_for(self._model_folder()) or None  # never a URL
            self.window.deviceLabel.setText(info.notice or "server")
            self.window.modelLabel.setText(f"Ready: {redact.shown(info.name, 256, partial=False)}")
            notice = getattr(self.window, "modelNotice", None)
            if notice is not None:
                notice.clear("server")  # a refusal of an earlier address is over
        elif getattr(self.host, "wanted_backend", "local") == "local":
            self._set("server.url", "")  # a local model was chosen: the next start stays local too
        self._show_where()
        self._apply(caps)

    @Slot(object)
    def _on_load_failed(self, error: EngineError) -> None:
        if getattr(self, "_pending", ""):
            privacy.forbid_servers()
            self._pending = ""
        self._show_where()
        self._apply(self.host.capabilities)

    def _show_where(self) -> None:
        caps = self.host.capabilities
        on_server = getattr(self.host, "backend", "local") == "server" and caps.backend == "remote"
        self.whereLabel.setText(caps.where if on_server else "Local model")
        self.whereLabel.setToolTip(
            "Your text is sent to this server." if on_server else "Your text stays on this computer."
        )
        self.actionUseLocalModel.setEnabled(on_server)

    def _apply(self, caps: Capabilities) -> None:
        editing = getattr(self.window, "editing", None)
        if editing is not None and hasattr(editing, "apply_capabilities"):
            editing.apply_capabilities(caps)

    def _context(self) -> int:
        """The writer's context length for a server that does not state it (0: none given)."""
        try:
            return self.settings.typed.server.context if self.settings is not None else 0
        except Exception:  # noqa: BLE001 - a window without this setting (tests) has none
            return 0

    def _server(self) -> tuple[str, str]:
        """The saved server address and model ("" each without settings)."""
        if self.settings is None:
            return "", ""
        server = self.settings.typed.server
        return server.url, server.model

    def _model_folder(self) -> str:
        return self.settings.typed.model.folder if self.settings is not None else ""

    def _set(self, key: str, value: str | int) -> None:
        if self.settings is not None and hasattr(self.settings, "set"):
            try:
                self.settings.set(key, value)
            except Exception:
                log.exception("could not store %s", key)
