"""Model ▸ Use a server…: the URL of a DiffusionGemma server (vLLM), its model (picked from what it lists), an
optional API key (stored in the OS keychain, never in the settings file), and a Test button that connects and
probes it on a worker thread, so the window never waits on the network.

Test reports in one sentence what was found (model, context, version, whether the server has canvas control)
or what failed and what to do; OK is enabled once a test succeeded for the URL shown. Everything the server
sent (model ids, its version, its error messages) is shown as plain text: no link or image of its making.
A key that no HTTP header can carry is refused as it is typed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import EngineError, ServerFailedError
from engine.remote import redact
from engine.remote.client import host_label, is_plain_http_to_another_machine

PLAIN_HTTP_WARNING = (
    "This is plain http:// to another machine: your text would cross the network unencrypted. "
    "Use https:// (a TLS proxy in front of vLLM) unless the network is yours."
)


@dataclass(frozen=True)
class ServerChoice:
    url: str
    model: str
    key: str


class _Relay(QObject):
    tested = Signal(str, object, object)  # url, probe or None, error or None


class ServerDialog(QDialog):
    def __init__(self, url: str = "", model: str = "", key: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("serverDialog")
        self.setWindowTitle("Use a server")
        self.url = QLineEdit(url)
        self.url.setObjectName("serverUrl")
        self.url.setPlaceholderText("https://gpu-box:8000")
        self.key = QLineEdit(key)
        self.key.setObjectName("serverKey")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional (vLLM --api-key); kept in the system keychain")
        self.model = QComboBox()
        self.model.setObjectName("serverModel")
        if model:
            self.model.addItem(model)
        self.test = QPushButton("Test")
        self.test.setObjectName("serverTest")
        self.resultLabel = QLabel("Press Test to connect and see what the server can do.")
        self.resultLabel.setObjectName("serverResult")
        self.resultLabel.setTextFormat(Qt.TextFormat.PlainText)  # it quotes the server: never rich text
        self.resultLabel.setWordWrap(True)
        self.resultLabel.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning = QLabel("")
        self.warning.setObjectName("serverHttpWarning")
        self.warning.setTextFormat(Qt.TextFormat.PlainText)
        self.warning.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.key)
        form.addRow("Model", self.model)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.test)
        layout.addWidget(self.warning)
        layout.addWidget(self.resultLabel)
        layout.addWidget(self.buttons)
        self._relay = _Relay()
        self._relay.tested.connect(self._on_tested, Qt.ConnectionType.QueuedConnection)
        self._tested_url = ""
        self.test.clicked.connect(self.run_test)
        self.url.textChanged.connect(self._on_url_changed)
        self.key.textChanged.connect(self._on_key_changed)
        self._on_url_changed(self.url.text())
        self._on_key_changed(self.key.text())

    def choice(self) -> ServerChoice:
        return ServerChoice(self.url.text().strip(), self.model.currentText().strip(), self.key.text())

    def run_test(self) -> None:
        """Connect and probe on a worker thread; the answer comes back through a queued signal."""
        from engine.remote import RemoteEngine, ServerConfig

        url, key = self.url.text().strip(), self.key.text() or None
        problem = redact.check_key(key)
        if problem:
            self.resultLabel.setText(problem)
            return
        wanted = self.model.currentText().strip() or None
        self.test.setEnabled(False)
        self.resultLabel.setText(f"Connecting to {host_label(url)}…")
        relay = self._relay

        def work() -> None:
            try:
                connect_and_report()
            except Exception as exc:  # noqa: BLE001 - the dialog must hear back, whatever happened
                relay.tested.emit(
                    url,
                    None,
                    ServerFailedError(
                        f"Testing {host_label(url)} failed ({type(exc).__name__}: "
                        f"{redact.scrub(str(exc))[:160]}). Check the address, then press Test again."
                    ),
                )

        def connect_and_report() -> None:
            engine = RemoteEngine(ServerConfig(url, wanted, key))
            try:
                found = engine.connect()
            except EngineError as exc:
                if exc.kind == "server_unknown_model" and wanted:
                    try:  # the model typed is not served: list what is, so the writer can pick one
                        found = RemoteEngine(ServerConfig(url, None, key)).connect()
                    except EngineError as again:
                        relay.tested.emit(url, None, again)
                        return
                    relay.tested.emit(url, found, exc)
                    return
                relay.tested.emit(url, None, exc)
                return
            finally:
                engine.unload()
            relay.tested.emit(url, found, None)

        threading.Thread(target=work, name="server-test", daemon=True).start()

    def _on_tested(self, url: str, found: object, error: object) -> None:
        self.test.setEnabled(True)
        if url != self.url.text().strip():
            return  # the URL changed while testing
        if found is not None:
            models = [m.id for m in found.models]  # type: ignore[attr-defined]
            current = self.model.currentText()
            self.model.clear()
            self.model.addItems(models)
            if current in models:
                self.model.setCurrentText(current)
        if error is not None:
            self.resultLabel.setText(str(getattr(error, "message", error)))
            self._tested_url = ""
        else:
            caps = found.capabilities  # type: ignore[attr-defined]
            control = (
                "with canvas control"
                if caps.canvas_control
                else "without canvas control (strength, pins and re-roll will be off)"
            )
            name = redact.shown(found.model.id, 256, partial=False)  # type: ignore[attr-defined]
            self.resultLabel.setText(
                f"Connected: {name}, {caps.context_length:,} tokens of context, "
                f"vLLM {caps.server_version or '?'}, {control}."
            )
            self._tested_url = url
        self._update_ok()

    def _on_url_changed(self, text: str) -> None:
        self.warning.setText(
            PLAIN_HTTP_WARNING if text.strip() and is_plain_http_to_another_machine(text) else ""
        )
        self._update_ok()

    def _on_key_changed(self, text: str) -> None:
        problem = redact.check_key(text)
        self.key.setToolTip(problem)
        if problem:
            self.resultLabel.setText(problem)
        self.test.setEnabled(not problem)
        self._update_ok()

    def _update_ok(self) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        usable = not redact.check_key(self.key.text())
        ok.setEnabled(usable and bool(self._tested_url) and self._tested_url == self.url.text().strip())
