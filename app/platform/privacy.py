"""Offline by construction, and logs that never hold the writer's words.

`enforce_offline()` sets the Hugging Face offline variables before anything imports `huggingface_hub` or
`transformers` (they read them once, at import). `install_network_guard()` adds an audit hook that refuses any
connection or name lookup to a host other than this machine, so even a library we did not expect to talk to
the network cannot. `setup_logging()` writes rotating logs to the user log folder; document text reaches them
only wrapped in `DocumentText` and only when the writer turned on "log document text" (off by default).
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import logging
import logging.handlers
import os
import re
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


# The one server the writer chose (Model ▸ Use a server…): its host name and the (address, port) pairs it
# resolves to. Empty unless a server is in use, so without one nothing but loopback is ever reached.
_allowed_names: set[str] = set()
_allowed_addresses: set[tuple[str, int]] = set()


def allow_server(url: str) -> None:
    """Let this process reach the host and port of `url` (and nothing else): the server the writer chose."""
    import socket
    from urllib.parse import urlsplit

    forbid_servers()
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # not an address (port 99999, an unclosed '['): nothing is opened; connecting says why
        return
    if not host or _is_local(host):
        return
    _allowed_names.add(host.lower())
    try:
        for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            _allowed_addresses.add((str(info[4][0]), port))
    except OSError:  # the host does not resolve now: connecting will say so
        pass


def forbid_servers() -> None:
    """Back to loopback only (the writer switched back to the local model)."""
    _allowed_names.clear()
    _allowed_addresses.clear()


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect":
        address = args[1]
        if isinstance(address, tuple) and address and not _is_local(address[0]):
            if (str(address[0]), address[1] if len(address) > 1 else -1) in _allowed_addresses:
                return
            raise NetworkBlockedError(f"Letterpress works offline; a connection to {address[0]} was blocked.")
    elif event == "socket.getaddrinfo":
        host = args[0].decode("ascii", "replace") if isinstance(args[0], bytes) else args[0]
        if isinstance(host, str) and host.lower() in _allowed_names:
            return
        if not _is_local(args[0]):
            raise NetworkBlockedError(f"Letterpress works offline; a lookup of {args[0]!r} was blocked.")


_guard_installed = False


def install_network_guard() -> None:
    """Refuse every non-loopback connect and DNS lookup in this process (audit hooks cannot be removed, so the
    app's entry point calls this, not library code or tests). Loopback stays open: asyncio needs it on
    Windows."""
    global _guard_installed
    if not _guard_installed:
        sys.addaudithook(_audit)
        _guard_installed = True


# ------------------------------------------------------------------------------------------------------------
# Logging


class DocumentText(str):
    """Marks a log argument as the writer's text: `log.debug("rewrite %s", DocumentText(selection))`."""


# Document names are the writer's words too (a title says what they write about): the log never has them
# unless document logging is on. The documents the app opens, saves or recovers are noted here; any other path
# that names a text document (by its extension) is hidden as well.
_DOCUMENT_NAMES: set[str] = set()
_DOC_PATH = re.compile(
    r"(?:[A-Za-z]:)?(?:[\\/]?[^\s\\/'\"<>|:]+[\\/])*[^\s\\/'\"<>|:]+"
    r"\.(?:md|markdown|txt|text|rst|tex|org|adoc|fountain)\b",
    re.IGNORECASE,
)


def note_document(path: str | os.PathLike[str] | None) -> None:
    """Remember a document's path and name so that the log hides them (see `_Redactor`)."""
    if not path:
        return
    text = os.fspath(path)
    _DOCUMENT_NAMES.add(text)
    name = os.path.basename(text)
    if len(name) >= 3:
        _DOCUMENT_NAMES.add(name)
    real = os.path.realpath(text)
    _DOCUMENT_NAMES.add(real)


def hide_document_names(message: str) -> str:
    """`message` with every known document path or name, and any path naming a text document, replaced."""
    for known in sorted(_DOCUMENT_NAMES, key=len, reverse=True):
        if known in message:
            message = message.replace(known, "<document>")
    return _DOC_PATH.sub("<document>", message)


class _Redactor(logging.Filter):
    """Replaces `DocumentText` arguments by their length, and document names by "<document>", unless document
    logging is on."""

    def __init__(self) -> None:
        super().__init__()
        self.allow_text = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.allow_text:
            return True
        if isinstance(record.args, tuple):
            record.args = tuple(_redact(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact(v) for k, v in record.args.items()}
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record: leave it to logging's own error handling
            return True
        record.msg, record.args = hide_document_names(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = hide_document_names(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = hide_document_names(record.exc_text)
        return True


class _PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """The log file is the writer's alone (0600: it may name what they work on when document logging is on),
    also when it existed before with a wider mode, and after every rotation."""

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(
            self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600
        )
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o600) if hasattr(os, "fchmod") else None
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def _redact(value: Any) -> Any:
    return (
        f"<{len(value):,} characters of document text hidden>" if isinstance(value, DocumentText) else value
    )


_redactor = _Redactor()


def set_log_document_text(allowed: bool) -> None:
    """Follow the `privacy.log_document_text` setting (applies at once)."""
    _redactor.allow_text = bool(allowed)
    logging.getLogger("letterpress").info("document text in logs: %s", "on" if allowed else "off")


def setup_logging(
    folder: Path | None = None,
    *,
    level: int = logging.INFO,
    log_document_text: bool = False,
    max_bytes: int = 1_000_000,
    backups: int = 5,
) -> Path | None:
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
        handler: logging.Handler = _PrivateFileHandler(
            folder / LOG_FILE,
            maxBytes=max_bytes,
            backupCount=backups,
            encoding="utf-8",
            errors="backslashreplace",
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
