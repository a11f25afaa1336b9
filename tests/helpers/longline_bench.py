"""Benchmark: the cost of one typed key in a document that is one multi-megabyte line (issue 22).

Engine-free (Qt only, no torch). Run it under nice, with an offscreen platform:

    QT_QPA_PLATFORM=offscreen PYTHONPATH=. nice -n 15 /work/venv/bin/python -m tests.helpers.longline_bench

It times, per key, a real key press in the middle of the line plus the repaint it causes, for three views:
`bare` (a plain QPlainTextEdit; `nowrap` and `anywhere` are the same with
`NoWrap` and `WrapAnywhere`), `editor` (Letterpress's editor as shipped) and `blocks` (the same text cut
into display blocks of about `--block` characters at a space, the shape a "display-only line breaks" fix
would give Qt). It prints seconds per key; it asserts nothing (figures vary with the machine and its load).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QTextOption
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QPlainTextEdit

PHRASE = "the quick brown fox jumps over a lazy dog while letterpress keeps every word "


def one_line(size: int) -> str:
    """About `size` characters of prose with spaces and no line break."""
    chunk = PHRASE
    return (chunk * (size // len(chunk) + 1))[:size]


def cut_into_blocks(text: str, block: int) -> str:
    """The text with a newline at the last space before every `block` characters (display shape only)."""
    parts: list[str] = []
    start = 0
    while len(text) - start > block:
        cut = text.rfind(" ", start, start + block)
        cut = start + block if cut <= start else cut + 1
        parts.append(text[start:cut])
        start = cut
    parts.append(text[start:])
    return "\n".join(parts)


def time_keys(
    view: QPlainTextEdit, text: str, keys: int, prepare: Callable[[QPlainTextEdit], object] | None = None
) -> tuple[float, float]:
    """(seconds to show the text, seconds per typed key incl. the repaint) for `keys` presses mid-text;
    `prepare` runs right after the text is set (what opening a file does after setPlainText)."""
    app = QApplication.instance()
    assert app is not None
    view.resize(900, 700)
    view.show()
    started = time.perf_counter()
    view.setPlainText(text)
    if prepare is not None:
        prepare(view)
    app.processEvents()
    view.viewport().repaint()
    shown = time.perf_counter() - started
    cursor = view.textCursor()
    cursor.setPosition(len(text) // 2)
    view.setTextCursor(cursor)
    view.ensureCursorVisible()
    app.processEvents()
    started = time.perf_counter()
    for _ in range(keys):
        QTest.keyClick(view, Qt.Key.Key_X)
        app.processEvents()
        view.viewport().repaint()
    per_key = (time.perf_counter() - started) / keys
    view.moveCursor(QTextCursor.MoveOperation.Start)
    view.close()
    return shown, per_key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5_000_000, help="characters in the one line")
    parser.add_argument("--keys", type=int, default=3, help="keys typed per view")
    parser.add_argument("--block", type=int, default=4_096, help="display block size for the `blocks` view")
    parser.add_argument("--views", default="bare,editor,blocks")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    text = one_line(args.size)
    per: dict[str, float] = {}
    for name in args.views.split(","):
        prepare: Callable[[QPlainTextEdit], object] | None = None
        if name == "bare":
            view, shown_text = QPlainTextEdit(), text
        elif name == "nowrap":  # no wrapping at all: still one giant QTextLayout line
            view, shown_text = QPlainTextEdit(), text
            view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        elif name == "anywhere":  # wrap anywhere (no word-boundary search): still the whole line per key
            view, shown_text = QPlainTextEdit(), text
            view.setWordWrapMode(QTextOption.WrapMode.WrapAnywhere)
        elif name == "editor":
            from app.ui.editor import Editor

            view, shown_text = Editor(), text
        elif name == "display":  # the editor as shipped: opening adds display breaks
            from app.ui.display_breaks import add_breaks
            from app.ui.editor import Editor

            view, shown_text = Editor(), text
            prepare = lambda v: add_breaks(v.document())  # noqa: E731
        elif name == "blocks":
            from app.ui.editor import Editor

            view, shown_text = Editor(), cut_into_blocks(text, args.block)
        else:
            parser.error(f"unknown view {name}")
        shown, per_key = time_keys(view, shown_text, args.keys, prepare)
        per[name] = per_key
        print(f"{name:7s} size={args.size:>9,d} open+show={shown:7.3f}s per_key={per_key:7.3f}s", flush=True)
        view.deleteLater()
        app.processEvents()
    if "editor" in per and "display" in per and per["display"] > 0:
        print(f"per-key ratio editor/display: {per['editor'] / per['display']:.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
