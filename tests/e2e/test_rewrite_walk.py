"""ARCHITECTURE.md's "A Rewrite, key press to Tab, file by file" is what runs: a Rewrite with the shipped demo
model, from its key to Tab, traced on every thread (`tests.helpers.walk`). The table must name files the walk
enters, in each thread's order; every other file that runs must be listed beside the walk; the figures (files
on the walk, rooms, returns to a room) are printed for the closing notes."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.helpers.gui import demo_window, ghost_text, set_text, wait_suggestion_ready
from tests.helpers.walk import WalkTracer, room_sequence

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
THREADS = {"UI": "MainThread", "engine": "letterpress-engine"}


def documented() -> tuple[list[tuple[str, str]], set[str]]:
    """The table's (file, thread) rows in order, and the files listed beside the walk."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## A Rewrite, key press to Tab, file by file", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \d+ \| `([^`]+)` \| (UI|engine) \|", section, flags=re.MULTILINE)
    beside = section.split("Beside the walk", 1)[1]
    return [(f, THREADS[t]) for f, t in rows], set(re.findall(r"`([^`]+\.py)`", beside))


@pytest.fixture
def traced(qtbot, monkeypatch, tmp_path):
    tracer = WalkTracer()
    tracer.install()  # before the window: its engine thread must inherit the profile function
    try:
        for window in demo_window(qtbot, monkeypatch, tmp_path, "[denoise]\nsteps = 8\nalternatives = 2\n"):
            threading.setprofile(None)  # type: ignore[arg-type]  # only the window's own threads inherit it
            yield window, tracer
    finally:
        tracer.uninstall()


def test_the_documented_walk_of_a_rewrite_is_what_runs(qtbot, traced):
    window, tracer = traced
    text = "He counted the boats in the harbour every night."
    set_text(window, text + " It was late.", select=(0, len(text)))
    key = window.actionRewrite.shortcut()[0]
    tracer.start()
    qtbot.keyClick(window.editor, key.key(), key.keyboardModifiers())
    wait_suggestion_ready(qtbot, window)
    shown = ghost_text(window)
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    tracer.stop()
    assert shown.strip() and shown.strip() in window.editor.toPlainText()

    rows, beside = documented()
    walk = list(dict.fromkeys(f for f, _ in rows))
    assert all((ROOT / f).is_file() for f in walk + sorted(beside)), "ARCHITECTURE.md names a missing file"
    ran = tracer.files()
    assert [f for f in walk if f not in ran] == [], "listed on the walk but never entered"
    unlisted = [f for f in ran if f not in walk and f not in beside]
    assert unlisted == [], f"runs during a Rewrite, listed nowhere: {unlisted}"
    for thread in THREADS.values():
        order = [f for t, f in tracer.visits if t == thread and (f, thread) in rows]
        want = [f for f, t in rows if t == thread]
        assert order == want, f"the {thread} files run in another order: {order}"
    rooms = room_sequence(walk)
    returns = len(rooms) - len(set(rooms))
    print(
        f"\nwalk: {len(walk)} files on the walk, {len(beside & set(ran))} beside it ({len(ran)} ran); "
        f"rooms in order: {' > '.join(rooms)}; returns to an earlier room: {returns}"
    )
