"""Letterpress desktop app (PySide6). Never imports torch: the engine runs in `app.assist.engine_host`'s
thread.

`create_window(argv)` is the automation surface: it builds the full window exactly as `python -m app` does
(engine host started, model from `--model DIR` or the configured default) without entering the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Re-exported: `app.qt_binding_problem` is what the installers and pyproject.toml name.
from app.platform.qt_platform import BROKEN_QT_BINDINGS, qt_binding_problem

if TYPE_CHECKING:
    from app.main_window import MainWindow


def create_window(argv: list[str] | None = None) -> MainWindow:
    """Build the main window for `argv` (arguments as for `python -m app`, without the program name)."""
    from app.__main__ import build_window, parse_args

    return build_window(parse_args(argv))


__all__ = ["BROKEN_QT_BINDINGS", "create_window", "qt_binding_problem"]
