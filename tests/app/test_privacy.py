"""Privacy: offline switches are forced, other hosts are unreachable, and logs hide document text by default."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from pathlib import Path

from app.platform import privacy
from app.platform.privacy import DocumentText

ROOT = Path(__file__).resolve().parents[2]


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
    logging.getLogger().removeHandler(next(h for h in logging.getLogger().handlers if h.get_name() == "letterpress"))


def test_log_files_rotate(tmp_path):
    privacy.setup_logging(tmp_path, max_bytes=2000, backups=2)
    for i in range(200):
        logging.getLogger("app.test").warning("line %d", i)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["letterpress.log", "letterpress.log.1", "letterpress.log.2"]
    logging.getLogger().removeHandler(next(h for h in logging.getLogger().handlers if h.get_name() == "letterpress"))


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=ROOT)
    assert out.stdout.split("\n")[:3] == ["blocked", "blocked", "loopback ok"], out.stderr
