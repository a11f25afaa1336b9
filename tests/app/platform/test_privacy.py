"""Privacy: offline switches are forced, other hosts are unreachable, and logs hide document text by
default."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.platform import privacy
from app.platform.privacy import DocumentText

ROOT = Path(__file__).resolve().parents[3]


def _stop_file_log() -> None:
    """Take the test's log file handler off the root logger and close its file (no unclosed-file warning)."""
    root = logging.getLogger()
    handler = next(h for h in root.handlers if h.get_name() == "letterpress")
    root.removeHandler(handler)
    handler.close()


def test_offline_variables_are_forced(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    privacy.enforce_offline()
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        assert os.environ[name] == "1"


def test_logs_hide_document_text_unless_the_writer_allows_it(tmp_path):
    path = privacy.setup_logging(tmp_path, level=logging.DEBUG)
    log = logging.getLogger("app.test")
    log.debug("rewrite of %s requested", DocumentText("my secret diary entry"))
    privacy.set_log_document_text(True)
    log.debug("rewrite of %s requested", DocumentText("a sentence I chose to share"))
    privacy.set_log_document_text(False)
    log.debug("infill %(text)s", {"text": DocumentText("another secret")})
    for h in logging.getLogger().handlers:
        h.flush()
    content = path.read_text(encoding="utf-8")
    assert "secret" not in content
    assert "<21 characters of document text hidden>" in content
    assert "a sentence I chose to share" in content
    _stop_file_log()


def test_log_files_rotate(tmp_path):
    privacy.setup_logging(tmp_path, max_bytes=2000, backups=2)
    for i in range(200):
        logging.getLogger("app.test").warning("line %d", i)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["letterpress.log", "letterpress.log.1", "letterpress.log.2"]
    _stop_file_log()


def test_network_guard_blocks_other_hosts_but_not_loopback():
    # Audit hooks cannot be removed, so this runs in a child process.
    code = r"""
import socket, threading
from app.platform.privacy import install_network_guard, NetworkBlockedError
install_network_guard()
for call in (lambda: socket.create_connection(("93.184.216.34", 80), timeout=1),
             lambda: socket.getaddrinfo("huggingface.co", 443)):
    try:
        call(); print("LEAK")
    except NetworkBlockedError:
        print("blocked")
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname(), timeout=1); print("loopback ok"); c.close(); srv.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.split("\n")[:3] == ["blocked", "blocked", "loopback ok"], out.stderr


@pytest.mark.usefixtures("user_dirs")
def test_a_requests_text_reaches_the_log_only_while_the_setting_is_on(qtbot, tmp_path, settings):
    from engine.fake import FakeEngine
    from tests.helpers.gui import build_window, set_text

    path = privacy.setup_logging(tmp_path / "logs")
    try:
        window = build_window(qtbot, FakeEngine(), settings=settings)
        settings.follow(lambda v: v.privacy.log_document_text, privacy.set_log_document_text)
        set_text(window, "Dear diary, the rain kept falling on my secret garden.", select=(12, 52))
        window.actionRewrite.trigger()
        settings.set("privacy.log_document_text", True)
        set_text(window, "A sentence the writer chose to share with the log.", select=(0, 10))
        window.actionRewrite.trigger()
        settings.set("privacy.log_document_text", False)
        set_text(window, "Another private line about the garden.", select=(0, 15))
        window.actionRewrite.trigger()
        for h in logging.getLogger().handlers:
            h.flush()
        content = path.read_text(encoding="utf-8")
        requests = [line for line in content.splitlines() if "request" in line and "submitted for" in line]
        assert len(requests) == 3
        assert "secret garden" not in content and "Another private" not in content
        assert "<40 characters of document text hidden>" in requests[0]
        assert "A sentence" in requests[1]
        assert "<15 characters of document text hidden>" in requests[2]
    finally:
        privacy.set_log_document_text(False)
        _stop_file_log()
