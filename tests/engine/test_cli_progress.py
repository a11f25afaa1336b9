"""The human-readable `python -m engine generate`: redraws steps on a terminal; on a pipe, the final text on
stdout and a progress line on stderr at least once a second (never minutes of silence)."""

from __future__ import annotations

import io
import re
import sys
import time

from engine.__main__ import _LivePrinter
from engine.api import LoadProgress, StepEvent
from tests.helpers.engine_cli import run_engine


def test_not_a_terminal_ticks_the_latest_status_every_interval(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with _LivePrinter(interactive=False, interval=0.05) as printer:
        printer.on_load(LoadProgress(3, 10, 30, 100, "reading"))
        time.sleep(0.2)
        printer(StepEvent(1, 4, 48, 0, ()), text="three words here")
        time.sleep(0.2)
    lines = err.getvalue().splitlines()
    assert any("loading the model: reading 30%" in line for line in lines)
    assert any("step 4/48" in line and "3 words" in line for line in lines)
    assert len(lines) >= 4


def test_a_terminal_gets_each_step_redrawn_in_place(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    printer = _LivePrinter(interactive=True)
    printer(StepEvent(1, 1, 48, 0, ()), text="rough")
    printer(StepEvent(1, 2, 48, 0, ()), text="sharper")
    assert out.getvalue().count("\x1b[2K\r") == 2 and out.getvalue().endswith("sharper")


def test_piped_generate_prints_the_text_and_progress_lines(tiny_dir, tmp_path):
    before = tmp_path / "before.txt"
    before.write_text("It was the best of times,", encoding="utf-8")
    run = run_engine(
        "generate", "--model", str(tiny_dir), "--before-file", str(before), "--steps", "4", "--seed", "1"
    )
    assert run.returncode == 0, run.stderr
    assert "\x1b[" not in run.stdout and "[step" not in run.stdout  # no terminal redraws into a pipe
    assert run.stdout.strip()  # the final text
    ticks = [float(m.group(1)) for m in re.finditer(r"^\[\s*([\d.]+) s\] ", run.stderr, re.MULTILINE)]
    assert ticks, run.stderr  # importing torch alone takes over a second
    gaps = [b - a for a, b in zip([0.0, *ticks], ticks, strict=False)]
    assert max(gaps) < 2.5, ticks  # about once a second (a loose bound: the machine is shared)


def test_a_terminal_line_never_wraps_and_the_load_is_shown_before_the_first_step(monkeypatch):
    """A 110-character step line on an 80-column terminal wrapped, so each redraw left a stale row behind; and
    a terminal saw nothing at all while the model loaded (minutes for a real checkpoint)."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setenv("COLUMNS", "40")
    with _LivePrinter(interactive=True, interval=0.05) as printer:
        printer.on_load(LoadProgress(3, 10, 30, 100, "reading"))
        time.sleep(0.2)
        printer(StepEvent(1, 1, 48, 0, ()), text="word " * 60)
        time.sleep(0.15)
    frames = out.getvalue().split("\x1b[2K\r")[1:]
    assert any("loading the model: reading 30%" in frame for frame in frames[:-1])
    assert frames[-1].startswith("[step  1] ") and all(len(frame) <= 39 for frame in frames)
