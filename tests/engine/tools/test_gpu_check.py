"""`python -m engine gpu-check --dry-run`: every check of the prepared GPU run executes on the CPU with its
stand-in, the report and summary are written, and the run never goes past its time limit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}


def test_one_check_in_process_writes_the_report(tmp_path: Path) -> None:
    pytest.importorskip("triton")  # the preflight needs it (the test extra installs it on Linux x86-64)
    from engine.tools.gpu_check import run

    data = run(tmp_path / "out", dry_run=True, time_limit=120, only=["compile"])
    on_disk = json.loads((tmp_path / "out" / "report.json").read_text())
    assert on_disk["status"] == data["status"] == "ok"
    assert list(on_disk["checks"]) == ["preflight", "environment", "compile"]
    assert on_disk["checks"]["compile"]["backend"] == "aot_eager"
    assert all(c["rule"] for c in on_disk["checks"].values())
    assert "compile" in (tmp_path / "out" / "summary.txt").read_text()


def test_the_preflight_stops_the_run_before_any_model_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the lent image as it is (transformers 5.17, no bitsandbytes) the run ends at its first step, with
    every missing piece in one sentence, instead of building a model that fails later as 'damaged'."""
    from engine.tools import gpu_check, gpu_preflight

    monkeypatch.setattr(gpu_preflight, "installed_versions", lambda: dict(gpu_preflight.LENT_IMAGE))

    def no_model(ctx: dict) -> dict:
        raise AssertionError("model work started after a failed preflight")

    monkeypatch.setattr(gpu_check, "_model", no_model)
    data = gpu_check.run(tmp_path / "out", dry_run=True, time_limit=60)
    assert data["status"] == "preflight_failed"
    assert list(data["checks"]) == ["preflight"]
    line = data["checks"]["preflight"]["line"]
    assert line.count(". ") == 0 and line.endswith(".")  # one sentence
    for piece in (
        "transformers 5.17.0 is unusable",
        "bitsandbytes is not installed",
        "platformdirs",
        "--prepare",
    ):
        assert piece in line, line
    assert "preflight_failed" in (tmp_path / "out" / "report.json").read_text()


def test_a_gpu_rule_is_measured_but_not_passed_in_the_dry_run() -> None:
    from engine.tools.gpu_check import _gpu_only, summary

    result = _gpu_only("peak <= 8.5 B per cell", {"bytes_per_cell": 10.5}, "10.50 B per cell")
    assert result["ok"] is False and result["skipped"] is True and result["bytes_per_cell"] == 10.5
    text = summary({"dry_run": True, "status": "ok", "time_limit_s": 1, "checks": {"step_memory": result}})
    assert "skipped" in text and "rule" in text and "peak <= 8.5 B per cell" in text


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
    assert all(c["ok"] or c.get("skipped") for c in report["checks"].values())
    assert all(c.get("rule") for c in report["checks"].values())  # every check says what "ok" means
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


def test_the_30_layer_real_shape_is_a_gpu_check_with_its_rule(tmp_path: Path) -> None:
    pytest.importorskip("triton")  # the preflight needs it
    from engine.tools.gpu_check import run

    data = run(tmp_path / "out", dry_run=True, time_limit=120, only=["real_shape_30"])
    check = data["checks"]["real_shape_30"]
    assert check["skipped"] is True and "262,144" in check["rule"] and "8K" in check["rule"]
    assert data["status"] == "ok"
