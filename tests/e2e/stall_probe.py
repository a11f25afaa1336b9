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
    from PySide6.QtCore import Qt
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
    from tests.helpers.stall import StallProbe

    win = app.create_window(["--model", model, "--device", "cpu"])

    def state() -> str:
        where = f"{win.model_state}/{win.editor.property('ghostState')}"
        if imports:
            now = time.perf_counter()
            where += " importing " + ",".join(n for t, n in imports if t > now - 0.05)[:200]
            where += " after " + imports[-1][1]
        return where

    probe = StallProbe(state)
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
    measured = probe.gaps[2:]  # the first ticks include showing the window
    worst = probe.worst(2)
    stalls = [(round(g.app_ms), g.where) for g in measured if g.app_ms > 30]
    editor.document().setModified(False)
    win.close()
    print(
        json.dumps(
            {
                "ok": bool(ok) and win.model_state == "ready",
                "worst_stall_ms": round(worst.app_ms, 1),
                "worst_gap_ms": round(worst.ms, 1),
                "worst_waited_for_a_core_ms": round(worst.waited_ms, 1),
                "worst_at": worst.where,
                "over_16ms": sorted(round(g.app_ms, 1) for g in measured if g.app_ms > 16),
                "ticks": len(measured),
                **({"stalls": stalls} if imports else {}),
                **{k: round(v, 3) for k, v in marks.items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
