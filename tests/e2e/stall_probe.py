"""A fresh process (torch not yet imported, as for a writer) opens the real window on a checkpoint, starts a
rewrite at once and then a draft, with a 5 ms timer probing the UI event loop from right after
`create_window`.

Prints one JSON line: the worst stall and the phase it fell in, every stall over 16 ms, and the time from the
keypress (Ctrl+R) to the first visible ghost and to the settled suggestion. Used by tests/e2e/test_gui_tiny.py
and for the figures in docs/performance.md: `python tests/e2e/stall_probe.py MODEL_DIR`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main(model: str) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="stall-probe-"))
    for name in ("CONFIG", "DATA", "LOG"):  # default settings, never the writer's own folders
        os.environ.setdefault(f"LETTERPRESS_{name}_DIR", str(scratch / name.lower()))
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from PySide6.QtCore import QElapsedTimer, Qt, QTimer
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    imports: list[tuple[float, str]] = []
    if os.environ.get("STALL_DEBUG"):  # attribute stalls: what the other threads were importing then
        import threading

        def hook(event: str, args: tuple) -> None:
            if event == "import" and threading.current_thread() is not threading.main_thread():
                imports.append((time.perf_counter(), args[0]))

        sys.addaudithook(hook)
    from PySide6.QtWidgets import QApplication

    import app

    qapp = QApplication.instance() or QApplication([])
    assert "torch" not in sys.modules, "the probe must start before torch is imported"
    gaps: list[tuple[float, str]] = []
    clock = QElapsedTimer()
    probe = QTimer()
    probe.setInterval(5)
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    win = app.create_window(["--model", model, "--device", "cpu"])

    def state() -> str:
        return f"{win.model_state}/{win.editor.property('ghostState')}"

    def tick() -> None:
        gap = clock.nsecsElapsed() / 1e6 - 5.0
        clock.restart()
        where = state()
        if imports and gap > 30:
            now = time.perf_counter()
            where += " importing " + ",".join(n for t, n in imports if t > now - gap / 1000 - 0.005)[:200]
            where += " after " + imports[-1][1]
        gaps.append((gap, where))

    probe.timeout.connect(tick)
    clock.start()
    probe.start()
    win.show()
    text = "Dear team,\n\nthe meeting is moved to friday because lots of people cant come."
    editor = win.editor
    editor.setPlainText(text)
    cursor = QTextCursor(editor.document())
    cursor.setPosition(text.index("the"))
    cursor.setPosition(len(text), QTextCursor.MoveMode.KeepAnchor)
    editor.setTextCursor(cursor)
    marks: dict[str, float] = {}

    def wait(cond, timeout: float = 180.0) -> bool:
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end:
            qapp.processEvents()
            time.sleep(0.001)
        return cond()

    pressed = time.perf_counter()
    win.actionRewrite.trigger()  # Ctrl+R at once: before the model is ready
    ok = wait(lambda: win.model_state in ("ready", "error"))
    marks["model_ready_s"] = time.perf_counter() - pressed
    ok = ok and wait(lambda: bool(editor.property("ghostText")))
    marks["first_ghost_s"] = time.perf_counter() - pressed
    ok = ok and wait(lambda: editor.property("ghostState") in ("ready", "error"))
    marks["settled_s"] = time.perf_counter() - pressed
    QTest.keyClick(editor, Qt.Key.Key_Escape)
    cursor = editor.textCursor()
    cursor.setPosition(len(text))
    editor.setTextCursor(cursor)
    win.activateWindow()
    editor.setFocus()
    qapp.processEvents()
    pressed = time.perf_counter()
    QTest.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)  # Ctrl+Enter: a draft
    if editor.property("ghostState") in (
        None,
        "",
        "idle",
    ):  # the shortcut did not reach the window: the action
        win.actionDraft.trigger()
        marks["draft_by_action"] = 1.0
    ok = ok and wait(lambda: bool(editor.property("ghostText")))
    marks["draft_first_ghost_s"] = time.perf_counter() - pressed
    ok = ok and wait(lambda: editor.property("ghostState") in ("ready", "error"))
    marks["draft_settled_s"] = time.perf_counter() - pressed
    end = time.monotonic() + 0.1
    while time.monotonic() < end:
        qapp.processEvents()
    probe.stop()
    measured = gaps[2:]  # the first ticks include showing the window
    worst, when = max(measured) if measured else (0.0, "")
    editor.document().setModified(False)
    win.close()
    print(
        json.dumps(
            {
                "ok": bool(ok) and win.model_state == "ready",
                "worst_stall_ms": round(worst, 1),
                "worst_at": when,
                "over_16ms": sorted(round(g, 1) for g, _ in measured if g > 16),
                "ticks": len(measured),
                **({"stalls": [(round(g), w) for g, w in measured if g > 30]} if imports else {}),
                **{k: round(v, 3) for k, v in marks.items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
