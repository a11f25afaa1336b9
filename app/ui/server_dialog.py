"""Model ▸ Use a server…: where the model server is (a preset for the servers writers already run, or any
URL), its model (picked from what it lists), an optional API key (stored in the OS keychain, never in the
settings file), the model's context length where the server does not say it, and a Test button that connects
and probes on a worker thread, so the window never waits on the network.

Test reports in one sentence what was found (the model, its tier: DiffusionGemma or an ordinary text model,
its context, what is off and why) or what failed and what to do; OK is enabled once a test succeeded for the
URL shown. The dialog grows to show its whole sentence (issue 34: an error was cut at "…Check the" until the
dialog was resized). Everything the server sent (model ids, its version, its error messages) is shown as
plain text: no link or image of its making. A key that no HTTP header can carry is refused as it is typed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.api import EngineError, ServerFailedError
from engine.remote import redact
from engine.remote.client import base_url, host_label, is_plain_http_to_another_machine

PLAIN_HTTP_WARNING = (
    "This is plain http:// to another machine: your text would cross the network unencrypted. "
    "Use https:// (a TLS proxy in front of the server) unless the network is yours."
)
ANOTHER_SERVER = "Another server…"
# The servers writers already run, at their default addresses (each speaks the OpenAI API under /v1).
PRESETS: tuple[tuple[str, str], ...] = (
    ("Ollama on this computer", "http://127.0.0.1:11434/v1"),
    ("LM Studio on this computer", "http://127.0.0.1:1234/v1"),
    ("llama.cpp server on this computer", "http://127.0.0.1:8080/v1"),
    (ANOTHER_SERVER, ""),
)
MIN_WIDTH = 520  # room for a URL and a sentence of about 70 characters a line


@dataclass(frozen=True)
class ServerChoice:
    url: str
    model: str
    key: str
    context_length: int = 0  # 0: what the server says


class _Relay(QObject):
    tested = Signal(str, object, object)  # url, probe or None, error or None


def preset_for(url: str) -> str:
    """The preset whose address `url` is (with or without /v1), else "Another server…"."""
    if url.strip():
        for name, address in PRESETS:
            if address and base_url(address) == base_url(url):
                return name
    return ANOTHER_SERVER


def describe(found: Any) -> str:
    """The sentence for a successful test: the model, its tier and what that means for the controls."""
    caps = found.capabilities
    name = redact.shown(found.model.id, 256, partial=False)  # a server's words: plain, no secrets
    if getattr(caps, "model_kind", "diffusion") == "text":
        context = (
            f"{caps.context_length:,} tokens of context"
            if not getattr(found, "context_notice", "")
            else "context length not stated by the server (set it below; 2,048 assumed)"
        )
        return (
            f"Connected: {name} on {getattr(found, 'server_name', 'the server')}, an ordinary text model, "
            f"{context}. Drafts, rewrites, infill and alternatives work; strength, pins and re-roll need "
            "DiffusionGemma and will be off."
        )
    control = (
        "with canvas control"
        if caps.canvas_control
        else "without canvas control (strength, pins and re-roll will be off)"
    )
    return (
        f"Connected: {name}, {caps.context_length:,} tokens of context, "
        f"vLLM {caps.server_version or '?'}, {control}."
    )


class ServerDialog(QDialog):
    def __init__(
        self,
        url: str = "",
        model: str = "",
        key: str = "",
        parent: QWidget | None = None,
        context_length: int = 0,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("serverDialog")
        self.setWindowTitle("Use a server")
        self.setMinimumWidth(MIN_WIDTH)
        self.preset = QComboBox()
        self.preset.setObjectName("serverPreset")
        for name, address in PRESETS:
            self.preset.addItem(name, address)
        self.url = QLineEdit(url or PRESETS[0][1])
        self.url.setObjectName("serverUrl")
        self.url.setPlaceholderText("https://gpu-box:8000/v1")
        self.key = QLineEdit(key)
        self.key.setObjectName("serverKey")
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("optional (the server's API key); kept in the system keychain")
        self.model = QComboBox()
        self.model.setObjectName("serverModel")
        self.model.setToolTip("Press Test to list the models the server offers.")
        if model:
            self.model.addItem(model)
        self.context = QSpinBox()
        self.context.setObjectName("serverContext")
        self.context.setRange(0, 1_048_576)
        self.context.setSingleStep(1024)
        self.context.setSpecialValueText("as the server says")
        self.context.setValue(context_length)
        self.context.setToolTip(
            "How many tokens the model reads at once, for a server that does not say (Ollama, LM Studio)."
        )
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
        form.addRow("Server", self.preset)
        form.addRow("Server URL", self.url)
        form.addRow("API key", self.key)
        form.addRow("Model", self.model)
        form.addRow("Context length", self.context)
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
        self.preset.currentIndexChanged.connect(self._on_preset)
        self.key.textChanged.connect(self._on_key_changed)
        self._on_url_changed(self.url.text())
        self._on_key_changed(self.key.text())

    def choice(self) -> ServerChoice:
        return ServerChoice(
            self.url.text().strip(), self.model.currentText().strip(), self.key.text(), self.context.value()
        )

    def run_test(self) -> None:
        """Connect and probe on a worker thread; the answer comes back through a queued signal."""
        from engine.remote import RemoteEngine, ServerConfig

        url, key = self.url.text().strip(), self.key.text() or None
        problem = redact.check_key(key)
        if problem:
            self._say(problem)
            return
        wanted = self.model.currentText().strip() or None
        context = self.context.value() or None
        self.test.setEnabled(False)
        self._say(f"Connecting to {host_label(url)}…")
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
            engine = RemoteEngine(ServerConfig(url, wanted, key, context_length=context))
            try:
                found = engine.connect()
            except EngineError as exc:
                if exc.kind == "server_unknown_model" and wanted:
                    other = RemoteEngine(ServerConfig(url, None, key, context_length=context))
                    try:  # the model typed is not served: list what is, so the writer can pick one
                        found = other.connect()
                    except EngineError as again:
                        relay.tested.emit(url, None, again)
                        return
                    finally:
                        other.unload()
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
            self._say(str(getattr(error, "message", error)))
            self._tested_url = ""
        else:
            self._say(describe(found))
            self._tested_url = url
        self._update_ok()

    def _say(self, sentence: str) -> None:
        """Show `sentence` whole: the dialog grows to fit it (never cut off until resized)."""
        self.resultLabel.setText(sentence)
        self._fit_to_content()

    def _fit_to_content(self) -> None:
        layout = self.layout()
        if layout is None:
            return
        layout.invalidate()
        layout.activate()
        width = max(self.width(), MIN_WIDTH)
        need = layout.totalHeightForWidth(width) if layout.hasHeightForWidth() else self.sizeHint().height()
        if need > self.height() or width > self.width():
            self.resize(width, max(need, self.height()))
        QTimer.singleShot(0, self._grow_if_cut)  # once shown, the real widths are known

    def _grow_if_cut(self) -> None:
        label = self.resultLabel
        missing = label.heightForWidth(label.width()) - label.height()
        if missing > 0:
            self.resize(self.width(), self.height() + missing)

    def _on_preset(self, index: int) -> None:
        address = self.preset.itemData(index)
        if address and base_url(address) != base_url(self.url.text() or "x"):
            self.url.setText(address)
        elif not address and preset_for(self.url.text()) != ANOTHER_SERVER:
            self.url.clear()
            self.url.setFocus()

    def _on_url_changed(self, text: str) -> None:
        name = preset_for(text)
        if self.preset.currentText() != name and not (name == ANOTHER_SERVER and not text.strip()):
            self.preset.blockSignals(True)
            self.preset.setCurrentText(name)
            self.preset.blockSignals(False)
        warning = PLAIN_HTTP_WARNING if text.strip() and is_plain_http_to_another_machine(text) else ""
        if warning != self.warning.text():
            self.warning.setText(warning)
            self._fit_to_content()
        self._update_ok()

    def _on_key_changed(self, text: str) -> None:
        problem = redact.check_key(text)
        self.key.setToolTip(problem)
        if problem:
            self._say(problem)
        self.test.setEnabled(not problem)
        self._update_ok()

    def _update_ok(self) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        usable = not redact.check_key(self.key.text())
        ok.setEnabled(usable and bool(self._tested_url) and self._tested_url == self.url.text().strip())
