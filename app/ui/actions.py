"""The one action factory: a window's `QAction`s made from the command table (`app.config.commands`).

Every place that brings commands (the main window, the documents controller, diffusion editing, the wiring)
asks `create(parent, id, slot)`; label, keys (the platform's own where it has a convention), tips, toolbar
text, checkability, shortcut context and menu role all come from the table, so no factory spells a key.
`add_window_action` / `place` put an action into the menu the table places it in, at its place there, and
`window_menu` makes a menu from the table's `MENUS`: the menu bar is built from the table.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QPlainTextEdit, QToolBar, QToolButton, QWidget

from app.config.commands import MENU_BY_ID, Command, command, layout, toolbar_layout, with_twins


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


def _entry_id(action: QAction) -> str:
    """The table id of a menu entry: a submenu's objectName, else the action's."""
    sub = action.menu()
    return sub.objectName() if isinstance(sub, QMenu) else action.objectName()


def arrange(menu: QMenu) -> None:
    """Put `menu`'s entries in the order the table gives them (`app.config.commands.layout`), a separator
    between sections; entries the table does not place (a test's stand-in) keep their order, at the end."""
    order = {entry_id: (i, section) for i, (section, entry_id) in enumerate(layout(menu.objectName()))}
    entries = [a for a in menu.actions() if not a.isSeparator()]
    known = sorted((a for a in entries if _entry_id(a) in order), key=lambda a: order[_entry_id(a)][0])
    unknown = [a for a in entries if _entry_id(a) not in order]
    for old in menu.actions():
        menu.removeAction(old)
        if old.isSeparator():
            old.deleteLater()
    section: int | None = None
    for action in known:
        here = order[_entry_id(action)][1]
        if section is not None and here != section:
            menu.addSeparator()
        section = here
        menu.addAction(action)
    if known and unknown:
        menu.addSeparator()
    menu.addActions(unknown)


def window_menu(window: QMainWindow, menu_id: str) -> QMenu:
    """The window's menu `menu_id`, made from the table (`MENUS`: title, where it sits) the first time: a menu
    of the menu bar, or a submenu placed in its parent menu."""
    found = getattr(window, menu_id, None)
    if not isinstance(found, QMenu):
        found = window.findChild(QMenu, menu_id)
    if isinstance(found, QMenu):
        return found
    spec = MENU_BY_ID[menu_id]
    if not spec.parent:
        made = window.menuBar().addMenu(spec.title)
        made.setObjectName(menu_id)
        return made
    parent = window_menu(window, spec.parent)
    made = QMenu(spec.title, window)
    made.setObjectName(menu_id)
    parent.addMenu(made)
    arrange(parent)
    return made


def place(window: QMainWindow, *items: QAction) -> None:
    """Put each action into the menu the table places it in, at its place there."""
    menus: dict[str, QMenu] = {}
    for action in items:
        name = command(action.objectName()).menu
        menu = menus.get(name) or window_menu(window, name)
        menus[name] = menu
        menu.addAction(action)
    for menu in menus.values():
        arrange(menu)


def add_window_action(window: QMainWindow, action: QAction, menu_name: str = "", title: str = "") -> None:
    """Put a service's action at its place in the menu the table places it in (`menu_name` overrides; made
    with `title` when neither the window nor the table has it, e.g. a bare test window) and on the window, so
    its key works without the menu."""
    name = menu_name or command(action.objectName()).menu
    menu = getattr(window, name, None)
    if not isinstance(menu, QMenu):
        menu = window.findChild(QMenu, name)
    if not isinstance(menu, QMenu):
        if name in MENU_BY_ID:
            menu = window_menu(window, name)
        else:
            menu = window.menuBar().addMenu(title or name.removeprefix("menu"))
            menu.setObjectName(name)
    menu.addAction(action)
    arrange(menu)
    window.addAction(action)


__all__ = [
    "add_window_action",
    "arrange",
    "configure",
    "create",
    "create_member",
    "default_sequences",
    "place",
    "tip_with_key",
    "window_menu",
]


def build_toolbar(
    window: QMainWindow,
    toolbar_id: str,
    by_id: dict[str, QAction],
    presets: QMenu,
    preset_actions: list[QAction],
) -> QToolBar:
    """The toolbar `toolbar_id` from the command table (`toolbar_layout`), with the window's actions `by_id`;
    Rewrite is a button whose menu holds the presets, which follow it."""
    tools = window.addToolBar("Assist")
    tools.setObjectName(toolbar_id)
    tools.setMovable(False)
    section: int | None = None
    for here, command_id in toolbar_layout(toolbar_id):
        action = by_id.get(command_id)
        if action is None:
            continue
        if section is not None and here != section:
            tools.addSeparator()
        section = here
        if command_id != "actionRewrite":
            tools.addAction(action)
            continue
        rewrite_button = QToolButton(window)
        rewrite_button.setObjectName("rewriteButton")
        rewrite_button.setDefaultAction(action)
        rewrite_button.setMenu(presets)
        rewrite_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        rewrite_button.setText("Rewrite")
        tools.addWidget(rewrite_button)
        for act in preset_actions:
            tools.addAction(act)
    return tools


def follow_undo(editor: QPlainTextEdit, undo: QAction, redo: QAction) -> None:
    """Undo/Redo enabled exactly when Ctrl+Z / Ctrl+Shift+Z would change `editor`'s document, from now on."""

    def sync(*_args: object) -> None:
        doc = editor.document()
        on = doc.isUndoRedoEnabled() and not editor.isReadOnly()
        undo.setEnabled(on and doc.isUndoAvailable())
        redo.setEnabled(on and doc.isRedoAvailable())

    doc = editor.document()
    for signal in (doc.undoAvailable, doc.redoAvailable, doc.undoCommandAdded, doc.contentsChanged):
        signal.connect(sync)
    sync()
