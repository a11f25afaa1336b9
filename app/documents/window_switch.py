"""Bring the window that edits a document to the front, even when it belongs to another Letterpress process.

Each process listens on one local socket (`QLocalServer`, a Unix socket or a Windows named pipe, private to
the user); its name is written into the document lock (see `app.platform.locks`). A second process that finds
the document locked connects, sends the document's real path, and the holder raises that window and answers
"ok".
"""

from __future__ import annotations

import logging
import os
import uuid

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

log = logging.getLogger(__name__)


def raise_window(window: QWidget) -> None:
    """Bring `window` to the front (another window asked to open the document it edits)."""
    window.show()
    window.raise_()
    window.activateWindow()


class SwitchServer(QObject):
    """The process's listener; `requested(real path)` is emitted on the UI thread; `handler` answers it."""

    requested = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.handler = lambda path: False
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.name = f"letterpress-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if not self.server.listen(self.name):
            log.warning("window switching not available: %s", self.server.errorString())
            self.name = ""
        self.server.newConnection.connect(self._on_connection)

    def _on_connection(self) -> None:
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            sock.readyRead.connect(lambda s=sock: self._on_ready(s))

    def _on_ready(self, sock: QLocalSocket) -> None:
        if not sock.canReadLine():
            return
        path = bytes(sock.readLine().data()).decode("utf-8", "replace").strip()
        self.requested.emit(path)
        ok = bool(self.handler(path))
        sock.write(b"ok\n" if ok else b"no\n")
        sock.flush()
        sock.disconnectFromServer()


_server: SwitchServer | None = None


def server() -> SwitchServer:
    """This process's listener (created on first use, on the UI thread)."""
    global _server
    if _server is None:
        _server = SwitchServer()
    return _server


def request_switch(name: str, real_path: str, timeout_ms: int = 3000) -> bool:
    """Ask the process listening on `name` to raise its window for `real_path`; True when it did."""
    if not name:
        return False
    sock = QLocalSocket()
    sock.connectToServer(name)
    if not sock.waitForConnected(timeout_ms):
        return False
    sock.write(real_path.encode("utf-8") + b"\n")
    sock.flush()
    if not sock.waitForBytesWritten(timeout_ms):
        return False
    while not sock.canReadLine():
        if not sock.waitForReadyRead(timeout_ms):
            return False
    answer = bytes(sock.readLine().data()).strip()
    sock.disconnectFromServer()
    return answer == b"ok"
