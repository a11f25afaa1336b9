"""Small typed helpers for building widgets.

PySide6 accepts any Qt property as a constructor keyword (`QLabel(self, objectName="x")`), but its stubs list
only some of them, so mypy rejects the rest. Naming a widget through `named()` keeps construction one line
and typed.
"""

from __future__ import annotations

import html
from typing import TypeVar

from PySide6.QtCore import QObject

W = TypeVar("W", bound=QObject)


def named(widget: W, name: str) -> W:
    """`widget` with its object name set (tests, stylesheets and scripts find widgets by it)."""
    widget.setObjectName(name)
    return widget


def plain_tip(text: str) -> str:
    """`text` as a tooltip shows it, character for character. Qt renders a tooltip as rich text whenever it
    looks like markup, so a sentence quoting a server (a model id, an error) could otherwise carry a link or
    an image of the server's making; such text is escaped inside an explicit rich-text wrapper."""
    if "<" not in text and "&" not in text:
        return text
    return "<qt>" + html.escape(text, quote=False).replace("\n", "<br>") + "</qt>"
