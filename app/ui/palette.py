"""The command palette: a line edit over a list of every menu command, filtered as you type (like any
editor's).

Every action of the menu bar is listed by its menu path ("View ▸ Theme ▸ Dark"), with its key; commands that
cannot run now (no suggestion to accept, no model loading) stay listed but greyed, so the writer learns they
exist. Typing keeps the commands whose label holds every typed word (in any order, case-insensitive), best
matches first; Up/Down move, Enter runs, Esc closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QPainter, QPalette
from PySide6.QtWidgets import (
    QDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMenuBar,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets import named

SEPARATOR = " ▸ "
KEY_ROLE = Qt.ItemDataRole.UserRole + 1  # the command's key, drawn right-aligned


class _KeyDelegate(QStyledItemDelegate):
    """Draws an item's key right-aligned and dimmed, like a menu's shortcut column."""

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().paint(painter, option, index)
        keys = index.data(KEY_ROLE)
        if not keys:
            return
        painter.save()
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.PlaceholderText
        painter.setPen(option.palette.color(role))
        painter.drawText(
            option.rect.adjusted(0, 0, -8, 0),
            int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
            keys,
        )
        painter.restore()


@dataclass(frozen=True)
class Command:
    label: str  # the menu path, without mnemonics
    action: QAction

    @property
    def enabled(self) -> bool:
        return self.action.isEnabled()


def menu_commands(bar: QMenuBar, skip: tuple[QAction, ...] = ()) -> list[Command]:
    """Every command in the menu bar, by its menu path, in menu order (submenus walked; separators
    skipped)."""
    found: list[Command] = []

    def walk(menu: QMenu, prefix: str) -> None:
        for act in menu.actions():
            if act.isSeparator() or not act.isVisible():
                continue
            sub = act.menu()  # typed QObject (Qt's template); a menu's action holds a QMenu
            if isinstance(sub, QMenu):
                walk(sub, f"{prefix}{_clean(act.text())}{SEPARATOR}")
            elif act.text() and act not in skip:
                found.append(Command(prefix + _clean(act.text()), act))

    for top in bar.actions():
        top_menu = top.menu()
        if isinstance(top_menu, QMenu):
            walk(top_menu, f"{_clean(top.text())}{SEPARATOR}")
    return found


def enabled_commands(bar: QMenuBar, skip: tuple[QAction, ...] = ()) -> dict[str, QAction]:
    """Every menu command that can run now, by its menu path (the palette lists the others greyed)."""
    return {c.label: c.action for c in menu_commands(bar, skip) if c.enabled}


def open_palette(parent: QWidget, bar: QMenuBar, skip: tuple[QAction, ...] = ()) -> CommandPalette:
    """Open the palette over every command of `bar` (closed, it deletes itself), its filter focused."""
    dialog = CommandPalette(menu_commands(bar, skip), parent)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    dialog.filter.setFocus()
    return dialog


def _clean(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()


def score(label: str, query: str) -> int | None:
    """How well `label` matches `query` (lower is better), or None when some typed word is missing."""
    words = query.casefold().split()
    if not words:
        return 0
    text = label.casefold()
    leaf = text.rsplit(SEPARATOR.strip().casefold(), 1)[-1].strip()
    total = 0
    for word in words:
        where = text.find(word)
        if where < 0:
            return None
        total += 0 if leaf.startswith(word) else 1 if word in leaf else 2
    return total


class CommandPalette(QDialog):
    """Filter-as-you-type list of the window's menu commands; `run_selected` triggers the chosen one."""

    def __init__(self, commands: list[Command], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("commandPalette")
        self.setWindowTitle("Command palette")
        self.commands = commands
        self.filter = named(QLineEdit(self), "paletteFilter")
        self.filter.setPlaceholderText("Type to find a command…")
        self.filter.setClearButtonEnabled(True)
        self.list = named(QListWidget(self), "paletteList")
        self.list.setUniformItemSizes(True)
        self.list.setItemDelegate(_KeyDelegate(self.list))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(self.filter)
        layout.addWidget(self.list)
        self.resize(560, 360)
        self.filter.textChanged.connect(self.refilter)
        self.filter.returnPressed.connect(self.run_selected)
        self.list.itemActivated.connect(lambda _item: self.run_selected())
        self.filter.installEventFilter(self)
        self.refilter("")

    def visible_labels(self) -> list[str]:
        return [self.list.item(i).text() for i in range(self.list.count())]

    def refilter(self, query: str) -> None:
        """Keep the commands matching `query`, best first, the first runnable one selected."""
        ranked = [(s, i, c) for i, c in enumerate(self.commands) if (s := score(c.label, query)) is not None]
        ranked.sort(key=lambda t: (not t[2].enabled, t[0], t[1]))
        self.list.clear()
        for _s, _i, cmd in ranked:
            keys = cmd.action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            item = QListWidgetItem(cmd.label)
            item.setData(Qt.ItemDataRole.UserRole, cmd.label)
            item.setData(KEY_ROLE, keys)
            if not cmd.enabled:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled & ~Qt.ItemFlag.ItemIsSelectable)
                item.setToolTip("Not available right now")
            self.list.addItem(item)
        for row in range(self.list.count()):
            if self.list.item(row).flags() & Qt.ItemFlag.ItemIsEnabled:
                self.list.setCurrentRow(row)
                break

    def selected(self) -> Command | None:
        item = self.list.currentItem()
        if item is None or not item.flags() & Qt.ItemFlag.ItemIsEnabled:
            return None
        label = item.data(Qt.ItemDataRole.UserRole)
        return next((c for c in self.commands if c.label == label), None)

    def run_selected(self) -> bool:
        """Close and trigger the highlighted command (after closing, so it acts on the window, not on us)."""
        cmd = self.selected()
        if cmd is None or not cmd.enabled:
            return False
        self.accept()
        cmd.action.trigger()
        return True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        # Up/Down in the filter move through the list, so the fingers never leave the keys.
        moves = (Qt.Key.Key_Down, Qt.Key.Key_Up, Qt.Key.Key_PageDown, Qt.Key.Key_PageUp)
        if (
            watched is self.filter
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in moves
        ):
            self._move(event.key())
            return True
        return super().eventFilter(watched, event)

    def _move(self, key: int) -> None:
        steps = {Qt.Key.Key_Down: 1, Qt.Key.Key_Up: -1, Qt.Key.Key_PageDown: 8, Qt.Key.Key_PageUp: -8}
        step = steps[Qt.Key(key)]
        row = self.list.currentRow()
        direction = 1 if step > 0 else -1
        target = row
        moved = 0
        probe = row + direction
        while 0 <= probe < self.list.count() and moved < abs(step):
            if self.list.item(probe).flags() & Qt.ItemFlag.ItemIsEnabled:
                target = probe
                moved += 1
            probe += direction
        if target != row and target >= 0:
            self.list.setCurrentRow(target)


__all__ = ["Command", "CommandPalette", "menu_commands", "score"]
