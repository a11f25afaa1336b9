"""The real window, the real engine thread and the real `engine.session.Session` on a tiny random checkpoint.

A random tiny model writes nonsense, but nonsense that arrives the way real text does: step by step, in the
engine thread, through the same signals. These tests check what the writer sees and that the UI never stalls.
"""

from __future__ import annotations

import os
import time

import pytest
from PySide6.QtCore import Qt

from tests.helpers.gui import (
    ghost_state,
    ghost_text,
    is_joined,
    isolate_user_dirs,
    record_ghost_texts,
    set_text,
)

pytestmark = pytest.mark.slow

SETTINGS_TOML = """
[denoise]
steps = 16
alternatives = 3

[draft]
length = 32
"""


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    from tests.helpers.checkpoints import tiny_checkpoint

    return tiny_checkpoint(tmp_path_factory, name="model")


@pytest.fixture
def window(qtbot, tiny_model, monkeypatch, tmp_path):
    isolate_user_dirs(monkeypatch, tmp_path)
    (tmp_path / "config" / "settings.toml").write_text(SETTINGS_TOML, encoding="utf-8")
    import app

    win = app.create_window(["--model", str(tiny_model), "--device", "cpu"])
    win.show()
    qtbot.waitExposed(win)
    win.activateWindow()
    win.editor.setFocus()
    qtbot.waitUntil(lambda: win.model_state in ("ready", "error"), timeout=120_000)
    assert win.model_state == "ready", win.modelLabel.toolTip()
    yield win
    win.editor.document().setModified(False)  # nothing to save: skip the unsaved-work prompt
    win.close()
    win.deleteLater()


def run_to_ready(qtbot, win, trigger):
    seen = record_ghost_texts(win)
    trigger()
    assert ghost_state(win) == "denoising"
    qtbot.waitUntil(lambda: ghost_state(win) in ("ready", "error"), timeout=120_000)
    assert ghost_state(win) == "ready", win.statusBar().currentMessage()
    return seen()


def test_draft_updates_over_steps_accepts_as_one_undo_step(qtbot, window):
    text = "The harbour was quiet in the morning. "
    window.settings.update({"denoise.steps": 48})  # enough steps to be painted apart on a fast machine too
    set_text(window, text)
    seen = run_to_ready(qtbot, window, window.actionDraft.trigger)
    assert len(seen) >= 2, "the ghost text should change while it denoises"
    suggestion = ghost_text(window)
    assert window.editor.toPlainText() == text
    qtbot.keyClick(window.editor, Qt.Key.Key_Tab)
    assert is_joined(window.editor.toPlainText(), text, suggestion, "")
    window.editor.undo()
    assert window.editor.toPlainText() == text
    assert ghost_state(window) == "idle"
    assert "steps" in window.statsLabel.text()


def test_rewrite_and_alternatives(qtbot, window):
    text = "Dear team,\n\nthe meeting is moved to friday because lots of people cant come."
    start = text.index("the")
    set_text(window, text, select=(start, len(text)))
    run_to_ready(qtbot, window, window.actionRewrite.trigger)
    _index, count = window.assistant.alternatives
    assert count >= 1
    if count > 1:
        first = ghost_text(window)
        qtbot.keyClick(window.editor, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.AltModifier)
        assert window.assistant.alternatives[0] == 1
        qtbot.keyClick(window.editor, Qt.Key.Key_BracketLeft, Qt.KeyboardModifier.AltModifier)
        assert ghost_text(window) == first
    suggestion = ghost_text(window)
    window.actionAcceptSuggestion.trigger()
    assert is_joined(window.editor.toPlainText(), text[:start], suggestion, "")
    window.editor.undo()
    assert window.editor.toPlainText() == text


def test_infill_keeps_the_text_after_the_gap(qtbot, window):
    before, after = "It was the best of times,\n", "\nit was the age of foolishness."
    set_text(window, before + after, cursor=len(before))
    run_to_ready(qtbot, window, window.actionInfill.trigger)
    middle = ghost_text(window)
    window.actionAcceptSuggestion.trigger()
    assert is_joined(window.editor.toPlainText(), before, middle, after)


def test_escape_partial_accept_and_typing_during_denoising(qtbot, window):
    text = "Once upon a time"
    set_text(window, text)
    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=60_000)
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert window.editor.toPlainText() == text and ghost_state(window) == "idle"

    window.actionDraft.trigger()
    qtbot.waitUntil(lambda: ghost_text(window) != "", timeout=60_000)
    cursor = window.editor.textCursor()
    cursor.setPosition(0)
    window.editor.setTextCursor(cursor)
    qtbot.keyClicks(window.editor, "Typed. ")  # outside the suggestion: it stays anchored at the end
    qtbot.waitUntil(lambda: ghost_state(window) in ("ready", "error"), timeout=120_000)
    assert window.editor.toPlainText() == "Typed. " + text
    if ghost_state(window) == "ready":
        suggestion = ghost_text(window)
        window.actionAcceptWord.trigger()
        assert is_joined(window.editor.toPlainText(), "Typed. " + text, suggestion, "", whole=False)
        window.editor.undo()
    assert window.editor.toPlainText() == "Typed. " + text


def test_rewrite_partial_accepts_esc_and_undo_with_the_real_engine(qtbot, window):
    """The trial's case on a real checkpoint: rewrite, Ctrl+Right twice, Esc; the original is never beside the
    accepted words, each accept is one undo step, and undoing them all restores the text byte for byte."""
    text = "It was morning. He counted the boats that had come back in the night. The sea was calm."
    s = text.index("He counted")
    e = text.index(" The sea")
    set_text(window, text, select=(s, e))
    run_to_ready(qtbot, window, window.actionRewrite.trigger)
    suggestion = ghost_text(window)
    states = [text]
    for _ in range(2):
        if not window.assistant.suggestion_visible:
            break
        qtbot.keyClick(window.editor, Qt.Key.Key_Right, Qt.KeyboardModifier.ControlModifier)
        doc = window.editor.toPlainText()
        assert is_joined(doc, text[:s], suggestion, text[e:], whole=False), doc
        assert text[s:e] not in doc
        states.append(doc)
    qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
    assert window.editor.toPlainText() == states[-1] and ghost_state(window) == "idle"
    for expected in reversed(states[:-1]):
        qtbot.keyClick(window.editor, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert window.editor.toPlainText() == expected
    assert window.editor.textCursor().position() == e, "the caret ends at the restored sentence's end"


def test_random_accept_sequences_with_the_real_engine(qtbot, window):
    """The randomized accept/Esc/undo/redo sequences (tests/helpers/sequences.py) on the tiny checkpoint: its
    rows come from the real denoising loop, so what is accepted mid-denoising is what the model showed."""
    import random

    from tests.helpers.sequences import run_rounds

    total, _accepted, _changed = run_rounds(
        qtbot, window, random.Random(7), rounds=3, actions=10, timeout_ms=120_000
    )
    assert total == 30


def test_ui_event_loop_never_stalls_during_generation(qtbot, window, record_property):
    """A 5 ms QTimer probe runs while the tiny model generates; the longest gap, less the time the UI thread
    waited for a core (tests/helpers/stall.py), is the UI's worst stall.

    Drafts are repeated until the probe has watched at least a second of generation, so a fast machine
    (where one draft takes a fraction of a second) still measures a real stretch of engine work. A stall the
    app causes (work on the UI thread, the GIL held, a collector pause) is in every stretch; a shared
    machine's hiccup is not: the best of up to three stretches is judged.
    """
    from tests.helpers.stall import StallProbe

    window.settings.update({"draft.length": 256, "denoise.steps": 48})
    set_text(window, "The quick brown fox jumps over the lazy dog. " * 20)
    stretches: list[tuple[float, str]] = []
    for _attempt in range(3):
        probe = StallProbe()
        probe.start()
        generation = 0.0
        drafts = 0
        while generation < 1.0 and drafts < 100:
            started = time.perf_counter()
            window.actionDraft.trigger()
            qtbot.waitUntil(lambda: ghost_state(window) in ("ready", "error"), timeout=120_000)
            generation += time.perf_counter() - started
            drafts += 1
            assert ghost_state(window) == "ready"
            qtbot.keyClick(window.editor, Qt.Key.Key_Escape)
            qtbot.waitUntil(lambda: ghost_state(window) == "idle", timeout=10_000)
        probe.stop()
        assert generation >= 1.0, "the probe must have run through a real stretch of generation"
        assert len(probe.gaps) > 100, "the probe ticked all through the generation"
        worst = probe.worst(skip=1).app_ms
        stretches.append((worst, f"{probe.summary(skip=1)} over {generation:.2f} s in {drafts} drafts"))
        print(f"\nUI {stretches[-1][1]}")
        if worst < 50.0:
            break
    best = min(stretches)
    record_property("ui_worst_stall_ms", round(best[0], 1))
    assert best[0] < 50.0, f"the UI stalled in every stretch: {[s for _, s in stretches]}"


def test_ui_never_stalls_from_window_creation_through_load_and_the_first_request(
    qtbot, tiny_model, monkeypatch, tmp_path, record_property
):
    """The probe starts right after `create_window`: it watches the model load, its completion and a rewrite
    started at once (queued behind the load), which is when work used to land on the UI thread."""
    from tests.helpers.stall import StallProbe

    isolate_user_dirs(monkeypatch, tmp_path)
    (tmp_path / "config" / "settings.toml").write_text(SETTINGS_TOML, encoding="utf-8")
    import app

    win = app.create_window(["--model", str(tiny_model), "--device", "cpu"])
    probe = StallProbe(lambda: f"{win.model_state}/{ghost_state(win)}")
    probe.start()
    try:
        win.show()
        text = "Dear team,\n\nthe meeting is moved to friday because lots of people cant come."
        start = text.index("the")
        set_text(win, text, select=(start, len(text)))
        win.actionRewrite.trigger()  # at once: before the model is ready
        qtbot.waitUntil(lambda: win.model_state in ("ready", "error"), timeout=120_000)
        assert win.model_state == "ready", win.modelLabel.toolTip()
        qtbot.waitUntil(lambda: ghost_state(win) in ("ready", "error"), timeout=120_000)
        assert ghost_state(win) == "ready", win.statusBar().currentMessage()
        win.actionDraft.trigger()  # and a second request right after the first
        qtbot.waitUntil(lambda: ghost_state(win) in ("ready", "error"), timeout=120_000)
        qtbot.wait(50)
    finally:
        probe.stop()
        win.editor.document().setModified(False)
        win.close()
        win.deleteLater()
    skip = 2  # the first ticks include showing the window (no event loop ran before)
    worst = probe.worst(skip)
    record_property("ui_worst_stall_from_create_ms", round(worst.app_ms, 1))
    print(
        f"\nUI from window creation: {probe.summary(skip)}; over 16 ms: "
        f"{sorted(round(g.app_ms) for g in probe.gaps[skip:] if g.app_ms > 16)}"
    )
    assert len(probe.gaps) - skip > 20
    assert worst.app_ms < 50.0, f"the UI stalled: {probe.summary(skip)}"


STALL_BOUND_FRESH_MS = 100.0


def test_ui_never_stalls_in_a_fresh_process_while_torch_imports_and_the_model_loads(
    tiny_model, tmp_path, record_property
):
    """As a writer starts the app: torch not yet imported, the window open at once, a rewrite asked for at
    once. The import and load used to freeze the UI for 200-500 ms (the cyclic GC walking torch's million new
    objects with the GIL held, and the dlopen of libtorch inside `import torch`)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "QT_QPA_PLATFORM": "offscreen", "OMP_NUM_THREADS": "1"}
    for name in ("CONFIG", "DATA", "LOG"):
        (tmp_path / name.lower()).mkdir()
        env[f"LETTERPRESS_{name}_DIR"] = str(tmp_path / name.lower())
    (tmp_path / "config" / "settings.toml").write_text(SETTINGS_TOML, encoding="utf-8")
    # The freeze this guards against (200-500 ms) is in every start; a scheduler hiccup of a shared 2-core
    # machine is not. Quiet starts of the round-5 base commit measured 50-135 ms worst here (62, 79, 135; 61,
    # 50), the round's head 50-95 ms (60, 58, 50; 95, 56, 63): a bound of 50 ms failed on the base as often as
    # on the head. So the best of up to three fresh starts must stay under 100 ms, half the freeze.
    worst: list[float] = []
    for _attempt in range(3):
        out = subprocess.run(
            [sys.executable, str(root / "tests" / "e2e" / "stall_probe.py"), str(tiny_model)],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        report = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"\nfresh process: {report}")
        assert report["ok"], report
        assert report["ticks"] > 100
        worst.append(report["worst_stall_ms"])
        if report["worst_stall_ms"] < STALL_BOUND_FRESH_MS:
            break
    record_property("ui_worst_stall_fresh_process_ms", min(worst))
    assert min(worst) < STALL_BOUND_FRESH_MS, (
        f"the UI stalled in every start: {worst} ms (last at {report['worst_at']})"
    )
