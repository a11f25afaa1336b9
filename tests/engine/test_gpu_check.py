"""`python -m engine gpu-check --dry-run`: every check of the prepared GPU run executes on the CPU with its
stand-in, the report and summary are written, and the run never goes past its time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}


def test_one_check_in_process_writes_the_report(tmp_path: Path) -> None:
    from engine.tools.gpu_check import run

    data = run(tmp_path / "out", dry_run=True, time_limit=120, only=["compile"])
    on_disk = json.loads((tmp_path / "out" / "report.json").read_text())
    assert on_disk["status"] == data["status"] == "ok"
    assert set(on_disk["checks"]) == {"environment", "compile"}
    assert on_disk["checks"]["compile"]["backend"] == "aot_eager"
    assert "compile" in (tmp_path / "out" / "summary.txt").read_text()


@pytest.mark.slow
def test_the_dry_run_exercises_every_check(tmp_path: Path) -> None:
    """~80 s on a free CPU (the GPU tests are only collected)."""
    from engine.tools.gpu_check import CHECKS

    proc = subprocess.run(
        [sys.executable, "-m", "engine", "gpu-check", "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=470,
        cwd=ROOT,
        env=_env(),
    )
    report = json.loads((tmp_path / "report.json").read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["status"] == "ok" and report["dry_run"] is True
    assert list(report["checks"]) == [name for name, _ in CHECKS]
    assert all(c["ok"] for c in report["checks"].values())
    assert report["checks"]["syncs"]["syncing_ops_in_forward"] == {}
    assert "gpu-check (dry run, CPU) ok" in (tmp_path / "summary.txt").read_text()


@pytest.mark.slow
def test_the_run_stops_itself_at_the_time_limit(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "gpu-check",
            "--dry-run",
            "--time-limit",
            "4",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=_env(),
    )
    assert proc.returncode == 124
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["status"] == "timed_out" and report["time_limit_s"] == 4
