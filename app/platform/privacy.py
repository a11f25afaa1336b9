"""Offline by construction, and logs that never hold the writer's words.

`enforce_offline()` sets the Hugging Face offline variables before anything imports `huggingface_hub` or
`transformers` (they read them once, at import). `install_network_guard()` adds an audit hook that refuses any
connection or name lookup to a host other than this machine, so even a library we did not expect to talk to
the network cannot. `setup_logging()` writes rotating logs to the user log folder; document text reaches them
only wrapped in `DocumentText` and only when the writer turned on "log document text" (off by default).
"""

from __future__ import annotations

import ipaddress
import logging
import logging.handlers
import os
import sys
from pathlib import Path
from typing import Any

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
    "DO_NOT_TRACK": "1",
}
LOG_FILE = "letterpress.log"
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def enforce_offline() -> None:
    """Force (not default) the offline switches: a stray HF_HUB_OFFLINE=0 in the shell must not go online."""
    os.environ.update(OFFLINE_ENV)


class NetworkBlockedError(ConnectionRefusedError):
    """Raised when code in this process tries to reach another machine."""


def _is_local(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if host is None or not isinstance(host, str):
        return host is None
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and address and not _is_local(address[0]):
            raise NetworkBlockedError(f"Letterpress works offline; a connection to {address[0]} was blocked.")
    elif event == "socket.getaddrinfo":
        if not _is_local(args[0]):
            raise NetworkBlockedError(f"Letterpress works offline; a lookup of {args[0]!r} was blocked.")


_guard_installed = False


def install_network_guard() -> None:
    """Refuse every non-loopback connect and DNS lookup in this process (audit hooks cannot be removed, so the
    app's entry point calls this, not library code or tests). Loopback stays open: asyncio needs it on Windows."""
    global _guard_installed
    if not _guard_installed:
        sys.addaudithook(_audit)
        _guard_installed = True


# ----------------------------------------------------------------------------------------------------------------
# Logging


class DocumentText(str):
    """Marks a log argument as the writer's text: `log.debug("rewrite %s", DocumentText(selection))`."""


class _Redactor(logging.Filter):
    """Replaces `DocumentText` arguments by their length unless document logging is on."""

    def __init__(self) -> None:
        super().__init__()
        self.allow_text = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.allow_text or not record.args:
            return True
        if isinstance(record.args, tuple):
            record.args = tuple(_redact(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact(v) for k, v in record.args.items()}
        return True


def _redact(value: Any) -> Any:
    return f"<{len(value):,} characters of document text hidden>" if isinstance(value, DocumentText) else value


_redactor = _Redactor()


def set_log_document_text(allowed: bool) -> None:
    """Follow the `privacy.log_document_text` setting (applies at once)."""
    _redactor.allow_text = bool(allowed)
    logging.getLogger("letterpress").info("document text in logs: %s", "on" if allowed else "off")


def setup_logging(folder: Path | None = None, *, level: int = logging.INFO, log_document_text: bool = False,
                  max_bytes: int = 1_000_000, backups: int = 5) -> Path | None:
    """Rotating log file in `folder` (default: the user log folder); returns its path, or None if the folder
    cannot be created (the app then logs to stderr only; it never refuses to start over a log file)."""
    if folder is None:
        from app.platform.folders import log_dir

        folder = log_dir()
    root = logging.getLogger()
    root.setLevel(level)
    _redactor.allow_text = log_document_text
    path: Path | None = folder / LOG_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
    except OSError as exc:
        print(f"letterpress: cannot write logs to {folder}: {exc}", file=sys.stderr)
        handler, path = logging.StreamHandler(), None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_redactor)
    handler.set_name("letterpress")
    for old in [h for h in root.handlers if h.get_name() == "letterpress"]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    for other in root.handlers:  # e.g. a stderr handler from basicConfig: the same redaction applies
        if _redactor not in other.filters:
            other.addFilter(_redactor)
    return path


def follow_settings(settings: Any) -> None:
    """Apply `privacy.log_document_text` now and whenever it changes."""
    set_log_document_text(settings["privacy.log_document_text"])
    settings.changed.connect(
        lambda key, value: set_log_document_text(value) if key == "privacy.log_document_text" else None
    )
