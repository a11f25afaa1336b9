"""The one action factory: a window's `QAction`s made from the command table (`app.config.commands`).

Every place that brings commands (the main window, the documents controller, diffusion editing, the wiring)
asks `create(parent, id, slot)`; label, keys (the platform's own where it has a convention), tips, toolbar
text, checkability, shortcut context and menu role all come from the table, so no factory spells a key.
`add_window_action` puts a service's action into the menu the table places it in.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QWidget

from app.config.commands import Command, command, with_twins


def default_sequences(entry: Command) -> list[QKeySequence]:
    """The keys `entry` has by default on this platform: the platform's standard bindings when it names a
    standard key and the platform has any, else the table's keys (with the other spellings of each press)."""
    if entry.standard:
        standard = getattr(QKeySequence.StandardKey, entry.standard)
        bound = [s for s in QKeySequence.keyBindings(standard) if not s.isEmpty()]
        if bound:
            return bound
    texts = [twin for key in entry.keys for twin in (with_twins(key) if entry.setting else [key])]
    return [QKeySequence.fromString(t, QKeySequence.SequenceFormat.PortableText) for t in texts]


def tip_with_key(entry: Command, key: str) -> str:
    """The tip shown for `entry` with `key` bound: rebindable commands name their key in brackets."""
    if not entry.tip:
        return ""
    return f"{entry.tip} ({key})" if key and entry.setting else entry.tip


def configure(action: QAction, command_id: str) -> QAction:
    """Give an existing action (e.g. a dock's toggle action) its id, label, keys and texts from the table."""
    entry = command(command_id)
    action.setObjectName(entry.id)
    action.setText(entry.label)
    action.setShortcuts(default_sequences(entry))
    tip = tip_with_key(entry, entry.key)
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    if entry.icon_text:
        action.setIconText(entry.icon_text)
    if entry.checkable:
        action.setCheckable(True)
    if entry.context == "editor":  # the editor handles its own keys
        action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
    if entry.role:
        action.setMenuRole(getattr(QAction.MenuRole, entry.role))
    return action


def create(
    parent: QWidget, command_id: str, slot: Callable[[], object], *, tip: str = "", label: str = ""
) -> QAction:
    """A new action for table entry `command_id` that calls `slot()` when triggered, added to `parent` so its
    keys work without a menu. `label` / `tip` override the table's for families (a preset's own name)."""
    action = configure(QAction(parent), command_id)
    if label:
        action.setText(label)
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    action.triggered.connect(lambda _checked=False: slot())
    parent.addAction(action)
    return action


def create_member(
    parent: QWidget, family: str, name: str, label: str, slot: Callable[[], object], tip: str = ""
) -> QAction:
    """One action of a family made at run time (a rewrite preset, a strength level): `family` + `name` is its
    objectName; families have no default keys."""
    action = QAction(label, parent)
    action.setObjectName(f"{family}{name}")
    if tip:
        action.setStatusTip(tip)
        action.setToolTip(tip)
    action.triggered.connect(lambda _checked=False: slot())
    parent.addAction(action)
    return action


def add_window_action(window: QMainWindow, action: QAction, menu_name: str = "", title: str = "") -> None:
    """Put a service's action at the end of the menu the table places it in (`menu_name` overrides; made with
    `title` when the window has none, e.g. a bare test window) after a separator, and on the window so its key
    works without the menu."""
    name = menu_name or command(action.objectName()).menu
    menu = getattr(window, name, None)
    if not isinstance(menu, QMenu):
        menu = window.findChild(QMenu, name)
    if not isinstance(menu, QMenu):
        menu = window.menuBar().addMenu(title or name.removeprefix("menu"))
        menu.setObjectName(name)
    menu.addSeparator()
    menu.addAction(action)
    window.addAction(action)


__all__ = ["add_window_action", "configure", "create", "create_member", "default_sequences", "tip_with_key"]
