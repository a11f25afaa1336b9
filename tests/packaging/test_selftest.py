"""`letterpress --self-test` from the checkout: what installers and CI rely on to prove a build works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.checkpoints import tiny_checkpoint

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], tmp_path: Path, timeout: float = 300) -> tuple[int, dict, str]:
    home = tmp_path / "home"
    env = dict(
        os.environ,
        QT_QPA_PLATFORM="offscreen",
        OMP_NUM_THREADS="1",
        PYTHONPATH=str(ROOT),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_CACHE_HOME=str(home / ".cache"),
    )
    for name in ("LETTERPRESS_CONFIG_DIR", "LETTERPRESS_DATA_DIR", "LETTERPRESS_LOG_DIR", "DISPLAY"):
        env.pop(name, None)
    out = subprocess.run(
        [sys.executable, "-m", "app", "--self-test", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=timeout,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, f"expected one JSON line on stdout, got:\n{out.stdout}\n{out.stderr[-3000:]}"
    return out.returncode, json.loads(lines[0]), out.stderr


def test_self_test_drives_draft_rewrite_and_infill_through_the_window(tmp_path: Path) -> None:
    code, summary, stderr = _run(["--fake-engine"], tmp_path)
    assert code == 0 and summary["ok"], (summary, stderr[-3000:])
    assert list(summary["tasks"]) == ["draft", "rewrite", "infill"]
    assert summary["tasks"]["draft"]["inserted_chars"] > 0
    assert summary["tasks"]["rewrite"]["replaced"] is True
    assert summary["tasks"]["infill"]["gap_chars"] > 0
    assert summary["network_attempts"] == []


def test_missing_model_fails_with_the_reason(tmp_path: Path) -> None:
    code, summary, _stderr = _run(["--model", str(tmp_path / "nowhere")], tmp_path)
    assert code == 2
    assert summary["ok"] is False and "nowhere" in summary["error"] and "--model" in summary["error"]


def test_json_out_writes_the_same_summary(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    code, summary, _stderr = _run(["--fake-engine", "--json-out", str(target)], tmp_path)
    assert code == 0 and json.loads(target.read_text()) == summary


def test_network_access_is_refused_and_reported() -> None:
    script = """
import socket
from app.selftest import _Report, _record_network
report = _Report()
_record_network(report)
try:
    socket.socket().connect(("203.0.113.7", 443))
except ConnectionRefusedError as exc:
    print("refused:", exc)
try:
    socket.getaddrinfo("huggingface.co", 443)
except ConnectionRefusedError:
    print("lookup refused")
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
socket.create_connection(server.getsockname(), timeout=1).close()
print(report.network)
"""
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith("refused:") and lines[1] == "lookup refused"
    assert lines[2] == "['connect 203.0.113.7', 'lookup huggingface.co']"


@pytest.mark.slow
def test_self_test_with_a_real_tiny_checkpoint(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tiny = tiny_checkpoint(tmp_path_factory)
    code, summary, stderr = _run(["--model", str(tiny), "--device", "cpu"], tmp_path, timeout=600)
    assert code == 0 and summary["ok"], (summary, stderr[-3000:])
    assert summary["device"] == "cpu" and summary["parameters"] > 0 and summary["model_name"] == "tiny"
    assert all(task["changed"] for task in summary["tasks"].values())
