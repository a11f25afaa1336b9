"""Small typed helpers for building widgets.

PySide6 accepts any Qt property as a constructor keyword (`QLabel(self, objectName="x")`), but its stubs list
only some of them, so mypy rejects the rest. Naming a widget through `named()` keeps construction one line
and typed.
"""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QObject

W = TypeVar("W", bound=QObject)


def named(widget: W, name: str) -> W:
    """`widget` with its object name set (tests, stylesheets and scripts find widgets by it)."""
    widget.setObjectName(name)
    return widget
