"""The command table (app.config.commands) is the one source of every command's id, label, keys and placement:
the window's menus hold nothing it does not declare, the palette reaches every entry, and no two entries share
a default key where both could fire."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu

from app.config import commands
from app.config.commands import COMMANDS, FAMILIES, canonical
from app.config.settings import SETTINGS, defaults, key_clash
from engine.fake import FakeEngine
from tests.helpers.gui import build_window

pytestmark = pytest.mark.usefixtures("user_dirs")


@pytest.fixture
def window(qtbot, settings):
    from app.integration import install_services

    win = build_window(qtbot, FakeEngine(), settings=settings)
    install_services(win, settings, offer_recovery=False)
    return win


def _menu_actions(window) -> list[tuple[str, QAction]]:
    """(menu objectName, action) for every command in the menu bar, submenus walked."""
    found: list[tuple[str, QAction]] = []

    def walk(menu: QMenu) -> None:
        for act in menu.actions():
            if act.isSeparator():
                continue
            if act.menu() is not None:
                walk(act.menu())
            else:
                found.append((menu.objectName(), act))

    for top in window.menuBar().actions():
        if top.menu() is not None:
            walk(top.menu())
    return found


def test_every_menu_command_is_in_the_table_and_where_the_table_places_it(window):
    placed = _menu_actions(window)
    assert len(placed) > 30
    for menu, act in placed:
        if menu == "menuRecent":  # recent files: one entry per file the writer opened
            continue
        family = next((f for f in FAMILIES if act.objectName().startswith(f)), None)
        if family is not None:
            assert menu == FAMILIES[family], act.objectName()
            continue
        assert act.objectName() in commands.BY_ID, f"{act.text()!r} in {menu} is not in the command table"
        entry = commands.command(act.objectName())
        assert entry.menu == menu, f"{entry.id} is in {menu}, the table places it in {entry.menu}"
        assert act.text() == entry.label


def test_the_menu_bar_is_built_from_the_table_in_its_order(window):
    """The menus and their order are the table's (MENUS), and in each menu the entries stand as the table lays
    them out: sections in order, a separator between two, table order inside one (so a new row needs no
    menu code)."""
    tops = [a.menu().objectName() for a in window.menuBar().actions() if a.menu() is not None]
    assert tops == [m.id for m in commands.MENUS if not m.parent]

    def entries(menu: QMenu) -> list[str]:
        shown = []
        for act in menu.actions():
            sub = act.menu()
            shown.append(
                "-" if act.isSeparator() else sub.objectName() if sub is not None else act.objectName()
            )
            if sub is not None and commands.layout(sub.objectName()):
                assert entries(sub) == expected(sub.objectName()), sub.objectName()
        return shown

    def expected(menu_id: str) -> list[str]:
        laid: list[str] = []
        last = None
        for section, entry_id in commands.layout(menu_id):
            if last is not None and section != last:
                laid.append("-")
            laid.append(entry_id)
            last = section
        return laid

    for top in window.menuBar().actions():
        assert entries(top.menu()) == expected(top.menu().objectName()), top.menu().objectName()


def test_every_table_entry_reaches_the_palette_under_its_label(window):
    from app.ui.palette import menu_commands

    listed = {
        c.action.objectName(): c.label
        for c in menu_commands(window.menuBar(), (window.actionCommandPalette,))
    }
    for entry in COMMANDS:
        if entry.palette:
            assert entry.id in listed, f"{entry.id} cannot be found in the command palette"
            assert listed[entry.id].endswith(entry.name)
        else:
            assert entry.id not in listed


def test_table_entries_are_on_their_toolbars(window):
    from PySide6.QtWidgets import QToolBar, QToolButton

    for entry in COMMANDS:
        if entry.toolbar:
            bar = window.findChild(QToolBar, entry.toolbar)
            ids = {a.objectName() for a in bar.actions()}
            ids |= {
                b.defaultAction().objectName() for b in bar.findChildren(QToolButton) if b.defaultAction()
            }
            ids |= {
                b.defaultAction().objectName()
                for b in window.findChildren(QToolButton)
                if b.defaultAction() and b.parentWidget() is bar
            }
            assert entry.id in ids, f"{entry.id} is not on {entry.toolbar}"
            assert entry.icon_text == "" or window.findChild(QAction, entry.id).iconText() == entry.icon_text


@pytest.mark.parametrize("context", commands.CONTEXTS)
def test_no_two_entries_share_a_default_key_in_one_context(context):
    owner: dict[str, str] = {}
    for entry in COMMANDS:
        if entry.context != context and not (context == "window" and entry.context == "editor"):
            continue
        for key in entry.keys:
            key = canonical(key)
            assert key not in owner, f"{key} is the default of both {owner[key]} and {entry.id}"
            owner[key] = entry.id


def test_keys_have_one_default_the_table_and_the_settings_agree():
    keyed = {s.key: s for s in SETTINGS if s.kind == "key"}
    assert set(keyed) == {c.setting for c in commands.rebindable()}
    for entry in commands.rebindable():
        assert len(entry.keys) == 1
        assert keyed[entry.setting].default == entry.key
        assert keyed[entry.setting].label == entry.name
    assert key_clash(defaults()) == "", "the default keys clash with each other or with a kept key"


def test_the_window_binds_the_tables_default_keys(window):
    for entry in COMMANDS:
        act = window.findChild(QAction, entry.id)
        assert act is not None, entry.id
        bound = {s.toString(QKeySequence.SequenceFormat.PortableText) for s in act.shortcuts()}
        if entry.standard:
            assert bound, entry.id  # the platform's own binding or the table's fallback
        else:
            assert bound == set(commands.with_twins(entry.key) if entry.setting else entry.keys), entry.id


def test_shift_tab_is_bound_once_and_its_other_spellings_count_as_it():
    """Binding Shift+Tab, Shift+Backtab and Backtab made one X11 press match twice, and Qt refused it as an
    "Ambiguous shortcut overload": one spelling is bound, and the clash check still knows the others as it
    (a second command cannot take Backtab)."""
    from app.ui.keys import sequences

    spelled = [s.toString(QKeySequence.SequenceFormat.PortableText) for s in sequences("Shift+Tab")]
    assert spelled == ["Shift+Tab"]
    assert [s.toString() for s in sequences("Backtab")] == ["Shift+Tab"]
    clash = key_clash({**defaults(), "keys.infill": "Backtab"}, ["keys.infill"])
    assert "Accept next line" in clash


def test_no_two_bindings_of_the_table_match_one_press():
    """Every default key of the table, with its twins and the platform's standard keys, reaches one action:
    two bindings of one press (even of one action) make Qt trigger neither."""
    from app.ui.actions import default_sequences

    bound = [
        (entry.id, seq.toString(QKeySequence.SequenceFormat.PortableText))
        for entry in COMMANDS
        for seq in default_sequences(entry)
    ]
    assert commands.shortcut_clashes(bound) == []


def test_the_clash_check_sees_one_press_bound_twice():
    assert commands.shortcut_clashes([("a", "Shift+Tab"), ("a", "Backtab")])
    assert commands.shortcut_clashes([("a", "Shift+Tab"), ("b", "Shift+Backtab")])
    assert commands.shortcut_clashes([("a", "Ctrl+Return"), ("a", "Ctrl+Enter")]) == []


def test_no_two_actions_of_the_window_match_one_press(window):
    """The built window (rebound keys, Redo's extra key, docks' toggles included): each press one action."""
    bound = [
        (act.objectName(), seq.toString(QKeySequence.SequenceFormat.PortableText))
        for act in window.findChildren(QAction)
        for seq in act.shortcuts()
        if not seq.isEmpty()
    ]
    assert commands.shortcut_clashes(bound) == []


def test_redo_names_one_key_in_the_edit_menu_and_the_context_menu(window):
    """The Edit menu said Ctrl+Y and the editor's context menu Ctrl+Shift+Z for the same Redo."""
    menu = window.editor.createStandardContextMenu()
    try:
        context_redo = next(a for a in menu.actions() if a.objectName() == "edit-redo")
        shown = context_redo.text().split("\t")[-1]
        edit_redo = (
            window.findChild(QAction, "actionRedo")
            .shortcut()
            .toString(QKeySequence.SequenceFormat.NativeText)
        )
        assert shown == edit_redo
    finally:
        menu.deleteLater()
