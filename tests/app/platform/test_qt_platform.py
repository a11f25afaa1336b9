"""A Qt platform plugin that cannot load is explained (missing libraries, install commands), never a Qt
abort."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.platform import qt_platform
from app.platform.qt_platform import EXIT_QT_PLATFORM, current_platform, missing_libraries, packages_for

ROOT = Path(__file__).resolve().parents[3]

LDD = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibfoo2.so.3 => not found
"""


def test_missing_libraries_are_read_from_ldd_once_each():
    assert missing_libraries(Path("x"), ldd_output=LDD) == (
        "libxcb-icccm.so.4",
        "libxcb-keysyms.so.1",
        "libfoo2.so.3",
    )


def test_sonames_map_to_the_packages_of_each_system():
    assert packages_for("libxcb-icccm.so.4") == ("libxcb-icccm4", "xcb-util-wm")
    assert packages_for("libxcb-keysyms.so.1") == ("libxcb-keysyms1", "xcb-util-keysyms")
    assert packages_for("libxcb-xinput.so.0") == ("libxcb-xinput0", "libxcb")  # an xcb core extension
    assert packages_for("libbar.so.7") == ("libbar7", "'*/libbar.so.7'")  # Debian's rule; dnf by file
    assert packages_for("libfoo2.so.3")[0] == "libfoo2-3"


def test_the_platform_is_the_first_requested_one():
    assert current_platform({"QT_QPA_PLATFORM": "offscreen"}) == "offscreen"
    assert current_platform({"QT_QPA_PLATFORM": "wayland;xcb"}) == "wayland"
    assert current_platform({"QT_QPA_PLATFORM": "vnc:size=800x600"}) == "vnc"
    assert current_platform({}) == "xcb"


def test_the_message_names_libraries_and_both_install_commands(monkeypatch):
    monkeypatch.setattr(qt_platform, "plugin_path", lambda platform: Path("/p/libqxcb.so"))
    monkeypatch.setattr(
        qt_platform, "missing_libraries", lambda plugin: ("libxcb-icccm.so.4", "libxcb-keysyms.so.1")
    )
    monkeypatch.setattr(sys, "platform", "linux")
    problem = qt_platform.platform_problem({"DISPLAY": ":0"})
    assert problem is not None
    text = problem.message()
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in text
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in text
    assert "sudo dnf install xcb-util-wm xcb-util-keysyms" in text


def test_no_display_is_explained(monkeypatch):
    monkeypatch.setattr(qt_platform, "plugin_path", lambda platform: Path("/p/libqxcb.so"))
    monkeypatch.setattr(qt_platform, "missing_libraries", lambda plugin: ())
    monkeypatch.setattr(qt_platform, "x_display_reachable", lambda display: True)
    monkeypatch.setattr(sys, "platform", "linux")
    problem = qt_platform.platform_problem({})
    assert problem is not None and "DISPLAY" in problem.message()
    assert qt_platform.platform_problem({"DISPLAY": ":0"}) is None
    assert qt_platform.platform_problem({"QT_QPA_PLATFORM": "offscreen"}) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
def test_a_display_that_does_not_answer_is_explained_not_a_qt_abort(tmp_path):
    """DISPLAY set to an X server that is not running (a stale ssh or desktop session): Qt aborted
    with 134."""
    assert not qt_platform.x_display_reachable(":59731")
    env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(
        QT_QPA_PLATFORM="xcb",
        DISPLAY=":59731",
        PYTHONPATH=str(ROOT),
        LETTERPRESS_CONFIG_DIR=str(tmp_path / "c"),
        LETTERPRESS_DATA_DIR=str(tmp_path / "d"),
        LETTERPRESS_LOG_DIR=str(tmp_path / "l"),
    )
    out = subprocess.run(
        [sys.executable, "-m", "app", "--fake-engine"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == EXIT_QT_PLATFORM, out.stderr[-2000:]
    assert "Letterpress cannot open a window" in out.stderr
    if not qt_platform.platform_problem(
        env
    ).missing:  # with the xcb libraries here, it is the display's fault
        assert "':59731' (DISPLAY) does not answer" in out.stderr


def test_the_offscreen_plugin_of_this_install_loads():
    plugin = qt_platform.plugin_path("offscreen")
    assert plugin is not None and plugin.is_file()
    assert qt_platform.platform_problem({"QT_QPA_PLATFORM": "offscreen"}) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the xcb plugin is Linux's")
def test_python_m_app_exits_with_a_clear_code_instead_of_a_qt_abort(tmp_path):
    """Without a display (and here perhaps without the xcb libraries), `python -m app` must explain and
    exit 4."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env.update(
        QT_QPA_PLATFORM="xcb",
        PYTHONPATH=str(ROOT),
        LETTERPRESS_CONFIG_DIR=str(tmp_path / "c"),
        LETTERPRESS_DATA_DIR=str(tmp_path / "d"),
        LETTERPRESS_LOG_DIR=str(tmp_path / "l"),
    )
    out = subprocess.run(
        [sys.executable, "-m", "app", "--fake-engine"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == EXIT_QT_PLATFORM, out.stderr[-2000:]
    assert "Letterpress cannot open a window" in out.stderr
    problem = qt_platform.platform_problem(env)
    assert problem is not None
    for name in problem.missing:  # whatever ldd says is missing on this machine is named, with its package
        assert name in out.stderr and packages_for(name)[0] in out.stderr
