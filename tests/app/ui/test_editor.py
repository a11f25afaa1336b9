"""The editor widget on its own (app/ui/editor.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

COPY_THEN_QUIT = r"""
import json, sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.ui import display_breaks
from app.ui.editor import Editor

editor = Editor()
text = " ".join(f"word{i}" for i in range(16_000))  # one line over LONG_LINE: shown in display blocks
editor.setPlainText(text)
assert display_breaks.add_breaks(editor.document()) > 0
at = display_breaks.break_positions(editor.document())[1]
cursor = editor.textCursor()
cursor.setPosition(at - 30)
cursor.setPosition(at + 30, cursor.MoveMode.KeepAnchor)
editor.setTextCursor(cursor)
getattr(editor, sys.argv[1])()
app.processEvents()
print(json.dumps({"clipboard": QApplication.clipboard().text(), "expected": text[at - 30 : at + 30]}))
"""


@pytest.mark.parametrize("how", ["copy", "cut"])
def test_quitting_after_a_copy_across_a_display_break_exits_cleanly_and_keeps_the_text(how: str) -> None:
    """Text copied from a document with display breaks is made in Python (a break must copy as its space);
    Qt's clipboard used to delete it at exit, after Python had finalized: SIGSEGV on quit (exit 139)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", COPY_THEN_QUIT, how], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["clipboard"] == seen["expected"]
    assert "\u2029" not in seen["clipboard"] and "\n" not in seen["clipboard"]
