"""`python -m engine bench --busy`: the busy/quiet benchmark runs, starts and stops its own hogs, and
reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_busy_bench_reports_quiet_busy_and_the_ratio_and_leaves_no_hog(tiny_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "bench",
            "--busy",
            "--model",
            str(tiny_dir),
            "--threads",
            "default,1",
            "--repeats",
            "1",
            "--steps",
            "2",
            "--tokens",
            "8",
            "--candidates",
            "1",
            "--json",
            "--hog-limit",
            "120",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["cores"] >= 1 and [r["config"] for r in report["rows"]] == ["default", "1"]
    for row in report["rows"]:
        assert row["quiet_median"] > 0 and row["busy_median"] > 0
        assert row["ratio"] == row["busy_median"] / row["quiet_median"]
        assert row["threads"] >= 1
        assert row["hog_pids"]
        for pid in row["hog_pids"]:  # every hog it started is gone
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"hog {pid} outlived the bench")


def test_the_table_names_each_configuration():
    from engine.tools.busybench import _format_row

    line = _format_row(
        {
            "config": "torch",
            "quiet_median": 1.0,
            "busy_median": 35.0,
            "ratio": 35.0,
            "threads": 2,
            "quiet": [1.0],
        }
    )
    assert line.startswith("torch default (before)") and "35.0" in line
    assert "error" in _format_row({"config": "2", "error": "boom"})


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("victim", ["bench", "child"])
def test_a_terminated_bench_leaves_no_draft_and_no_hog_running(tiny_dir, victim):
    """`kill <bench>` left its child drafting beside fresh hogs; `kill <child>` left two hogs spinning for
    600 s."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            "bench",
            "--busy",
            "--model",
            str(tiny_dir),
            "--threads",
            "default",
            "--repeats",
            "500",
            "--budget",
            "300",
            "--steps",
            "2",
            "--tokens",
            "8",
            "--candidates",
            "1",
            "--hog-limit",
            "120",
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        child, hogs = None, []
        while time.monotonic() < deadline and not hogs:
            kids = _children(bench.pid)
            child = kids[0] if kids else None
            hogs = _children(child) if child else []
            time.sleep(0.05)
        assert child and hogs, "the bench never started its hogs"
        os.kill(bench.pid if victim == "bench" else child, signal.SIGTERM)
        time.sleep(3)
        tree = [child, *hogs, *_children(child)]
        assert not [pid for pid in tree if _alive(pid)]
    finally:
        bench.kill()
        bench.wait()
