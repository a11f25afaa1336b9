"""The wheel carries `resources/` (stylesheets, icons, the demo model), installed where `engine.resources`
looks for it: a `pip install letterpress` without them starts with no theme and no demo model."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_wheel_holds_every_resource_where_the_engine_finds_it(tmp_path):
    source = tmp_path / "src"  # a copy, so the build leaves no build/ or egg-info in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("app", "engine", "resources"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            ".",
        ],
        cwd=source,
        check=True,
        timeout=600,
    )
    (wheel,) = out.glob("letterpress-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(ROOT).as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file()}
    assert shipped, "no resources in the checkout"
    assert shipped <= names, f"missing from the wheel: {sorted(shipped - names)[:5]}"
    assert not any(n.startswith("tests/") for n in names)

    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from engine.resources import demo_model_dir as d, resources_dir as r;"
                "print(r(), (d() / 'config.json').is_file())"
            ),
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert found == [str(installed / "resources"), "True"]
