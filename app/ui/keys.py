"""The assistant's keys follow the `keys.*` settings: each binding goes to its window action, at once.

The settings refuse a binding that clashes with another (see `app.config.settings.key_clash`), so here every
key is applied as it is, plus the second spelling Qt may deliver for the same press (Shift+Tab arrives as
Backtab, the keypad's Enter beside Return).
"""

from __future__ import annotations

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

from app.config.commands import command, rebindable, with_twins
from app.config.settings import Settings
from app.ui.actions import tip_with_key

# setting -> the window's action (objectName), from the command table
ACTIONS: dict[str, str] = {c.setting: c.id for c in rebindable()}


def sequences(key: str) -> list[QKeySequence]:
    """The key sequences one binding stands for ([] for no key)."""
    return [QKeySequence.fromString(k, QKeySequence.SequenceFormat.PortableText) for k in with_twins(key)]


def apply(window: QWidget, settings: Settings) -> None:
    """Give every assistant action the key its setting names."""
    for setting, name in ACTIONS.items():
        action = window.findChild(QAction, name)
        if action is None:
            continue
        key = settings.typed.keys[setting.removeprefix("keys.")]
        action.setShortcuts(sequences(key))
        tip = tip_with_key(command(name), key)
        if tip:
            action.setStatusTip(tip)
            action.setToolTip(tip)


def follow(window: QWidget, settings: Settings) -> None:
    """Apply the keys now and whenever a `keys.*` setting changes."""
    settings.follow(lambda v: dict(v.keys), lambda _keys: apply(window, settings))


__all__ = ["ACTIONS", "apply", "follow", "sequences"]
