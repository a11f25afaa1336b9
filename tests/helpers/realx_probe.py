"""The real-X probe: one start of the real window (scripted engine) on a real X server, driven by xdotool's
key presses and wheel clicks, which arrive through Qt's xcb event path exactly as a writer's do (QTest's key
clicks skip the X keymap, so they never saw Shift+Tab called ambiguous).

Run by `tests/app/test_real_x.py` as `python -m tests.helpers.realx_probe REPORT.json [SHOTS_DIR]` with
DISPLAY set and QT_QPA_PLATFORM=xcb; it writes one JSON report the tests read:

- `live`: what Tab, Shift+Tab, Esc, Alt+P and Alt+R did on a live suggestion (the real slots);
- `presses`: for every key bound on the window, which actions it triggered and how often (slots replaced by
  counters, so no dialog opens), and `editor` for the keys the editor answers itself (Undo, Copy...);
- `wheel`: a Settings field's value before and after wheel clicks over it, and the page's scroll position;
- `qt_log`: every message Qt logged ("Ambiguous shortcut overload" would be one).

After each press it presses F12 (bound to nothing) and waits for that press to arrive: X delivers events in
order, so by then everything the first press caused has happened. No sleeps decide a result.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QEventLoop, QObject, QPoint, Qt, QTimer, qInstallMessageHandler
from PySide6.QtGui import QAction, QCursor, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QApplication, QDoubleSpinBox, QWidget

SYNC = "F12"

# The longest status messages a writer saw cut (issue 34) and one longer than any.
STATUS_MESSAGES = (
    "Running on the CPU: fine for the demo model, slow for DiffusionGemma itself; a GPU with 24 GB or a "
    "server writes real sentences.",
    "Fix the grammar and spelling without changing the meaning, the tone or the length of the text.",
    "Every word is at least 80% sure; nothing to re-roll (lower the threshold in Settings ▸ Rewrite, or "
    "pin words and use Alt+Shift+R).",
)

# Qt's portable key names -> xdotool's keysyms (letters and digits are the same, lower-cased).
XKEYS = {
    "Ctrl": "ctrl",
    "Shift": "shift",
    "Alt": "alt",
    "Meta": "super",
    "Return": "Return",
    "Enter": "KP_Enter",
    "Esc": "Escape",
    "Tab": "Tab",
    "Backtab": "ISO_Left_Tab",
    "Right": "Right",
    "Left": "Left",
    "Up": "Up",
    "Down": "Down",
    "Del": "Delete",
    "Ins": "Insert",
    "Backspace": "BackSpace",
    "]": "bracketright",
    "[": "bracketleft",
    ",": "comma",
    "=": "equal",
    "-": "minus",
    "+": "plus",
    ".": "period",
    "/": "slash",
}


def xdotool_key(portable: str) -> str:
    """ "Ctrl+Shift+Z" -> "ctrl+shift+z"; "" when a part has no xdotool name here (the report says so)."""
    parts = portable.split("+")
    if portable.endswith("++"):
        parts = [*portable[:-2].split("+"), "+"]
    out = []
    for part in parts:
        if part in XKEYS:
            out.append(XKEYS[part])
        elif len(part) == 1 and part.isalnum():
            out.append(part.lower())
        elif part.startswith("F") and part[1:].isdigit():
            out.append(part)
        else:
            return ""
    return "+".join(out)


class Recorder(QObject):
    """Counts the sync key's arrivals (application-wide)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0
        self.wheels: list[str] = []

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt virtual
        if event.type() == QEvent.Type.Wheel:
            self.wheels.append(type(watched).__name__)
        elif event.type() == QEvent.Type.KeyPress and isinstance(event, QKeyEvent):
            focus = QApplication.focusWidget()
            if event.key() == Qt.Key.Key_F12 and (
                watched is focus or (focus is None and watched.isWidgetType())
            ):
                self.syncs += 1
        return False


class Probe:
    def __init__(self, app: QApplication, window: Any, shots: Path | None) -> None:
        self.app = app
        self.window = window
        self.shots = shots
        self.recorder = Recorder()
        app.installEventFilter(self.recorder)
        self.log: list[str] = []

    def wait(self, done: Callable[[], bool], seconds: float = 20.0) -> bool:
        """Run the event loop until `done()` (False if it never came: the report shows what was seen)."""
        end = time.monotonic() + seconds
        while not done():
            if time.monotonic() > end:
                return False
            loop = QEventLoop()
            QTimer.singleShot(5, loop.quit)
            loop.exec()  # a real event loop: processEvents() alone never delivered X's pointer events
        return True

    def press(self, key: str) -> bool:
        """Press `key` (xdotool keysyms) and the sync key; True once the sync key has arrived."""
        before = self.recorder.syncs
        subprocess.run(["xdotool", "key", "--clearmodifiers", key, SYNC], check=True, timeout=30)
        return self.wait(lambda: self.recorder.syncs > before)

    def focus_editor(self) -> None:
        self.window.activateWindow()
        self.window.raise_()
        self.window.editor.setFocus()
        self.wait(lambda: self.window.editor.hasFocus() and self.app.activeWindow() is self.window, 10)

    def ghost(self) -> str:
        return str(self.window.editor.property("ghostState"))

    def set_text(self, text: str) -> None:
        editor = self.window.editor
        editor.setPlainText(text)
        cursor = editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        editor.setTextCursor(cursor)
        self.wait(lambda: self.window.actionDraft.isEnabled(), 10)

    def draft(self) -> bool:
        """A live, settled suggestion at the end of the text, asked for with the real Ctrl+Return."""
        for _try in range(2):  # once more if the first press found the window not yet active again
            self.focus_editor()
            self.press("ctrl+Return")
            if self.wait(lambda: self.ghost() == "ready", 60):
                return True
        return False

    def shoot(self, widget: QWidget, name: str) -> None:
        if self.shots is not None:
            self.shots.mkdir(parents=True, exist_ok=True)
            widget.grab().save(str(self.shots / f"{name}.png"))

    # -- a live suggestion, real slots -------------------------------------------------------------------

    def live(self) -> dict[str, Any]:
        w = self.window
        out: dict[str, Any] = {}
        base = "The harbour was quiet."
        self.set_text(base)
        out["draft_ready"] = self.draft()
        out["ghost"] = str(w.editor.property("ghostText") or "")
        self.press("Tab")
        out["tab"] = {"text": w.editor.toPlainText(), "state": self.ghost()}

        self.set_text(base)
        self.draft()
        shown = str(w.editor.property("ghostText") or "")
        self.press("shift+Tab")
        out["shift_tab"] = {"ghost": shown, "text": w.editor.toPlainText(), "state": self.ghost()}

        self.set_text(base)
        self.draft()
        self.press("alt+p")
        out["alt_p"] = {"pinned": list(w.editing.pinned_words()), "text": w.editor.toPlainText()}
        before_message = w.statusBar().currentMessage()
        self.press("alt+r")
        out["alt_r"] = {
            "message": w.statusBar().currentMessage(),
            "message_before": before_message,
            "state": self.ghost(),
            "text": w.editor.toPlainText(),
        }
        self.wait(lambda: self.ghost() in ("ready", "error", "none", "None"))
        self.press("Escape")
        out["esc"] = {"state": self.ghost(), "text": w.editor.toPlainText()}
        return out

    # -- every key bound on the window ---------------------------------------------------------------------

    def presses(self) -> dict[str, Any]:
        w = self.window
        from app.ui.help import on_a_writers_keyboard

        self.set_text("The harbour was quiet.")
        shown = self.draft()  # the suggestion's keys are enabled only while one is shown
        self.draft_state = (self.ghost(), self.window.statusBar().currentMessage())
        counts: dict[str, int] = {}
        bound: list[tuple[str, str]] = []
        for act in w.findChildren(QAction):
            name = act.objectName()
            if not name.startswith("action"):
                continue
            keys = [s for s in act.shortcuts() if not s.isEmpty() and on_a_writers_keyboard(s)]
            if act.shortcutContext() == Qt.ShortcutContext.WidgetShortcut:
                continue  # the editor's own keys: `editor_keys` checks what they do
            if keys:
                with contextlib.suppress(RuntimeError, TypeError):  # PySide6: "no connections"
                    act.triggered.disconnect()
            act.triggered.connect(lambda _c=False, n=name: counts.__setitem__(n, counts.get(n, 0) + 1))
            bound += [(name, s.toString(QKeySequence.SequenceFormat.PortableText)) for s in keys]
        results = []
        for name, key in bound:
            self.focus_editor()
            entry: dict[str, Any] = {"action": name, "key": key, "suggestion_shown": self.ghost() == "ready"}
            xkey = xdotool_key(key)
            entry["xdotool"] = xkey
            if xkey:
                counts.clear()
                log_before = len(self.log)
                entry["synced"] = self.press(xkey)
                entry["triggered"] = dict(counts)
                entry["qt_log"] = self.log[log_before:]
            results.append(entry)
        return {"draft_ready": shown, "draft_state": self.draft_state, "results": results}

    def editor_keys(self) -> dict[str, Any]:
        """The keys the editor answers itself, in a sequence whose every step shows if a key acted twice."""
        w = self.window
        self.focus_editor()
        self.set_text("alpha beta")
        self.window.editor.document().clearUndoRedoStacks()
        steps = []
        for key in ("ctrl+a", "ctrl+c", "ctrl+x", "ctrl+v", "ctrl+z", "ctrl+shift+z", "ctrl+z", "ctrl+y"):
            self.press(key)
            cursor = w.editor.textCursor()
            steps.append(
                {
                    "key": key,
                    "text": w.editor.toPlainText(),
                    "selected": cursor.selectedText(),
                    "clipboard": QApplication.clipboard().text(),
                }
            )
        return {"steps": steps}

    # -- the status bar at the default size and at 1280x800 ------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Every label of the status bar with what it shows, what it holds and where, at both sizes, with the
        longest messages the issue saw cut and the demo banner up."""
        from PySide6.QtWidgets import QLabel

        w = self.window
        out: dict[str, Any] = {}
        self.focus_editor()
        self.set_text(" ".join(["word"] * 12345))
        self.wait(lambda: w.wordsLabel.text() == "12,345 words", 20)  # the count runs on a debounce
        for size in ((1000, 720), (1280, 800)):
            w.resize(*size)
            self.wait(lambda size=size: (w.width(), w.height()) == size, 10)
            for i, message in enumerate(STATUS_MESSAGES):
                w.show_message(message, 0)
                bar = w.statusBar()
                self.wait(lambda: False, 0.3)  # posted layout requests run
                bar.layout().activate()
                self.wait(lambda: False, 0.1)
                labels = []
                for label in bar.findChildren(QLabel):
                    if not label.isVisibleTo(bar) or not label.text():
                        continue
                    full = label.full_text() if hasattr(label, "full_text") else label.text()
                    room = label.contentsRect().width()
                    right = label.mapTo(bar, QPoint(label.width(), 0)).x()
                    labels.append(
                        {
                            "name": label.objectName() or type(label).__name__,
                            "shown": label.text(),
                            "full": " ".join(full.split()),
                            "tooltip": label.toolTip(),
                            "needed": label.fontMetrics().horizontalAdvance(label.text()),
                            "room": room,
                            "right": right,
                        }
                    )
                out[f"{size[0]}x{size[1]}:{i}"] = {"bar_width": bar.width(), "labels": labels}
                if i == 0:
                    self.shoot(w, f"window-{size[0]}x{size[1]}")
        w.resize(1000, 720)
        w.show_shortcuts()  # the shortcut sheet as a writer opens it (Help ▸ Keyboard shortcuts)
        sheet = w.shortcut_sheet
        self.wait(lambda: sheet.isVisible(), 10)
        self.shoot(sheet, "shortcut-sheet")
        out["sheet_rows"] = sheet.visible_rows()
        sheet.close()
        return out

    # -- the wheel over Settings -----------------------------------------------------------------------------

    def wheel(self) -> dict[str, Any]:
        from app.ui.settings_dialog import SettingsDialog

        dlg = SettingsDialog(self.window.settings, self.window)
        dlg.show()
        dlg.activateWindow()
        self.wait(lambda: dlg.isVisible() and dlg.isActiveWindow(), 10)
        field = dlg.findChild(QDoubleSpinBox, "setting:denoise.entropy_bound")
        dlg.scroll_area.ensureWidgetVisible(field)
        self.wait(lambda: False, 0.2)  # let the scroll settle before the pointer moves there
        self.shoot(dlg, "settings-dialog")
        centre = field.mapToGlobal(QPoint(field.width() // 2, field.height() // 2))
        before = field.value()
        bar = dlg.scroll_area.verticalScrollBar()
        scroll_before = bar.value()
        subprocess.run(["xdotool", "mousemove", str(centre.x()), str(centre.y())], check=True, timeout=30)

        def under_pointer() -> bool:
            hit = QApplication.widgetAt(QCursor.pos())
            return hit is not None and (hit is field or field.isAncestorOf(hit))

        self.wait(lambda: QCursor.pos() == centre and under_pointer(), 10)
        self.recorder.wheels.clear()
        for button in ("5", "5", "5", "4"):
            subprocess.run(["xdotool", "click", button], check=True, timeout=30)
        synced = self.press("shift")  # the sync key after the wheel clicks: they have all arrived
        out = {
            "pointer_there": QCursor.pos() == centre,
            "under_pointer": str(QApplication.widgetAt(QCursor.pos())),
            "wheel_receivers": self.recorder.wheels,
            "value_before": before,
            "value_after": field.value(),
            "scroll_before": scroll_before,
            "scroll_after": bar.value(),
            "scroll_max": bar.maximum(),
            "field_focused": field.hasFocus(),
            "synced": synced,
        }
        dlg.reject()
        return out


def main(argv: list[str]) -> int:
    report_path = Path(argv[0])
    shots = Path(argv[1]) if len(argv) > 1 else None
    log: list[str] = []
    qInstallMessageHandler(lambda _t, _c, message: log.append(message))
    import app

    window = app.create_window(["--fake-engine", "steps=4,delay=0.01,load_delay=0.01"])
    window.services.recovery.ask = lambda doc, i, n: "later"
    window.services.documents.ask_unsaved = lambda name: "discard"
    window.show()
    probe = Probe(QApplication.instance(), window, shots)  # type: ignore[arg-type]
    probe.log = log

    def run() -> None:
        probe.wait(lambda: window.model_state in ("ready", "error"), 30)
        probe.focus_editor()
        report: dict[str, Any] = {"model_state": window.model_state, "display": os.environ.get("DISPLAY", "")}
        phases = {
            "status": probe.status,
            "live": probe.live,
            "editor": probe.editor_keys,
            "wheel": probe.wheel,
            "presses": probe.presses,
        }
        for name in os.environ.get("REALX_PHASES", ",".join(phases)).split(","):
            report[name] = phases[name]()
        report["qt_log"] = log
        report_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
        window.editor.document().setModified(False)
        window.close()
        QApplication.quit()

    QTimer.singleShot(0, run)
    QApplication.exec()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
