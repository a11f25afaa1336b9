"""Helpers that put commands into the window's menus, shared by the services that bring their own actions.

Lives in the ui layer so that services below the window (the brief, documents) and the wiring above them can
both use it without importing each other.
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow, QMenu


def add_window_action(window: QMainWindow, action: QAction, menu_name: str, title: str) -> None:
    """Put a service's action at the end of the window's menu `menu_name` (made with `title` when the window has
    none, e.g. a bare test window) after a separator, and on the window so its key works without the menu."""
    menu = getattr(window, menu_name, None)
    if not isinstance(menu, QMenu):
        menu = window.menuBar().addMenu(title)
    menu.addSeparator()
    menu.addAction(action)
    window.addAction(action)
