"""Letterpress desktop app (PySide6). Never imports torch: the engine runs in `app.engine_host`'s thread.

`create_window(argv)` is the automation surface: it builds the full window exactly as `python -m app` does
(engine host started, model from `--model DIR` or the configured default) without entering the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.main_window import MainWindow

# PySide6 6.12.0 drops a reference on every Python-side `Signal.emit()` (it returns True without a reference)
# and on every Python slot called from C++ (the slot's return value): a Qt app aborts after a few hundred
# signals with "bool_dealloc"/"none_dealloc". 6.11.3 is fine.
BROKEN_QT_BINDINGS = {"6.12.0"}


def qt_binding_problem() -> str:
    """Why the installed PySide6 cannot run Letterpress ("" when it can)."""
    import PySide6

    version = PySide6.__version__
    if version in BROKEN_QT_BINDINGS:
        return (
            f"PySide6 {version} has a reference-counting bug that crashes Qt applications; "
            'install another version: pip install "PySide6-Essentials==6.11.3" "shiboken6==6.11.3"'
        )
    return ""


def create_window(argv: list[str] | None = None) -> MainWindow:
    """Build the main window for `argv` (arguments as for `python -m app`, without the program name)."""
    from app.__main__ import build_window, parse_args

    return build_window(parse_args(argv))


__all__ = ["create_window", "qt_binding_problem"]
