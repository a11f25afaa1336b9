"""Every command of the app in one declarative table: id (objectName), label, default keys, and placement.

Frescobaldi's action collection is the model. This table is the ONE place a command's default key lives:
the `keys.*` settings (and so Settings ▸ Assistant keys and the settings file), the keys the app keeps for
itself (`reserved_keys`, which a rebinding may not take), the window's actions (`app.ui.actions.create`),
the command palette and the menus all read it. The four factories that build actions (main window, documents,
diffusion editing, wiring) only attach a slot to an id.

It is plain data (no Qt import), so it sits in the config layer where the settings can read it; the ui layer
turns entries into `QAction`s. Keys are written in Qt's portable text ("Ctrl+Return"). Where the platform has
its own convention (Undo, Save, Preferences…), `standard` names the `QKeySequence.StandardKey` whose bindings
win on each platform; `keys` is then what it is on Linux and Windows, used where the platform has none and for
the clash check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# Where a key works: "window" (anywhere in the window), "suggestion" (only while a suggestion is shown or
# running; disabled otherwise), "editor" (only while the editor has focus: it keeps its own undo keys).
CONTEXTS = ("window", "suggestion", "editor")


@dataclass(frozen=True)
class Command:
    """One command: what the writer sees (label, tip, icon text), its default keys and where it is placed."""

    id: str  # the QAction's objectName; scripts and tests find actions by it, never rename
    label: str  # menu text with its mnemonic ("&Draft at cursor")
    menu: str  # objectName of the menu it sits in (the palette lists it under that menu's path)
    keys: tuple[str, ...] = ()  # default keys, the first is the one hints name
    standard: str = ""  # QKeySequence.StandardKey name whose per-platform bindings win where there are any
    setting: str = ""  # "keys.<name>": the writer can rebind it (only one key, so `keys` has one entry)
    help: str = ""  # the settings dialog's line under a rebindable key
    tip: str = ""  # status tip / tool tip (the bound key is added in brackets for rebindable commands)
    toolbar: str = ""  # objectName of the toolbar it is on ("" for none)
    icon_text: str = ""  # the toolbar's short text
    context: str = "window"
    checkable: bool = False
    role: str = ""  # QAction.MenuRole name for macOS's application menu ("PreferencesRole", "QuitRole")
    palette: bool = True  # listed in the command palette (the palette itself is not)
    section: int = 0  # its group in its menu and toolbar: groups in number order, a separator between them

    @property
    def name(self) -> str:
        """The label without mnemonics or the trailing ellipsis ("Draft at cursor")."""
        return self.label.replace("&&", "\0").replace("&", "").replace("\0", "&").rstrip("…").strip()

    @property
    def key(self) -> str:
        """The default key hints name ("" for none)."""
        return self.keys[0] if self.keys else ""


_SHOWN = "Only while a suggestion is shown."
_SETTLED = "Only while a settled suggestion is shown."

# The assistant commands first; the rebindable ones in the order Settings ▸ Assistant keys lists them.
# Within a menu or toolbar, entries stand in table order inside their `section` (see `layout`).
COMMANDS: tuple[Command, ...] = (
    Command(
        "actionAcceptSuggestion",
        "&Accept suggestion",
        "menuAssist",
        ("Tab",),
        setting="keys.accept",
        help="Only while a suggestion is shown; otherwise the key types.",
        tip="Insert the whole suggestion",
        toolbar="toolbarAssist",
        icon_text="Accept",
        context="suggestion",
        section=1,
    ),
    Command(
        "actionAcceptWord",
        "Accept next &word",
        "menuAssist",
        ("Ctrl+Right",),
        setting="keys.accept_word",
        help=_SHOWN,
        context="suggestion",
        section=1,
    ),
    Command(
        "actionAcceptLine",
        "Accept next &line",
        "menuAssist",
        ("Shift+Tab",),
        setting="keys.accept_line",
        help=_SHOWN,
        context="suggestion",
        section=1,
    ),
    Command(
        "actionDismissSuggestion",
        "D&ismiss suggestion",
        "menuAssist",
        ("Esc",),
        setting="keys.dismiss",
        help="Only while a suggestion is shown or running.",
        tip="Hide the suggestion and stop generating",
        toolbar="toolbarAssist",
        icon_text="Dismiss",
        context="suggestion",
        section=1,
    ),
    Command(
        "actionNextAlternative",
        "&Next alternative",
        "menuAssist",
        ("Alt+]",),
        setting="keys.next_alternative",
        help=_SHOWN,
        context="suggestion",
        section=1,
    ),
    Command(
        "actionPreviousAlternative",
        "&Previous alternative",
        "menuAssist",
        ("Alt+[",),
        setting="keys.previous_alternative",
        help=_SHOWN,
        context="suggestion",
        section=1,
    ),
    Command(
        "actionDraft",
        "&Draft at cursor",
        "menuAssist",
        ("Ctrl+Return",),
        setting="keys.draft",
        tip="Write new text at the cursor",
        toolbar="toolbarAssist",
        icon_text="Draft",
    ),
    Command(
        "actionRewrite",
        "&Rewrite selection",
        "menuAssist",
        ("Ctrl+R",),
        setting="keys.rewrite",
        tip="Rewrite the selected text",
        toolbar="toolbarAssist",
        icon_text="Rewrite",
    ),
    Command(
        "actionCustomInstruction",
        "Custom &instruction…",
        "menuAssist",
        ("Ctrl+Shift+R",),
        tip="Rewrite the selection (or draft) following your own instruction",
        toolbar="toolbarAssist",
        icon_text="Custom…",
    ),
    Command(
        "actionInfill",
        "&Infill selection or gap",
        "menuAssist",
        ("Ctrl+Shift+I",),
        setting="keys.infill",
        tip="Fill the selection or the gap at the cursor so it joins the text around it",
        toolbar="toolbarAssist",
        icon_text="Infill",
    ),
    Command(
        "actionRerollUncertain",
        "Re-roll &uncertain words",
        "menuAssist",
        ("Alt+R",),
        setting="keys.reroll_uncertain",
        help=_SHOWN,
        tip="Keep the words the model is sure of and redraw the rest, live",
        toolbar="toolbarEditing",
        icon_text="Re-roll uncertain",
        context="suggestion",
        section=2,
    ),
    Command(
        "actionRerollAroundPins",
        "Re-roll around &pinned words",
        "menuAssist",
        ("Alt+Shift+R",),
        setting="keys.reroll_around_pins",
        help=_SHOWN,
        tip="Keep the words you pinned and redraw everything else",
        toolbar="toolbarEditing",
        icon_text="Re-roll around pins",
        context="suggestion",
        section=2,
    ),
    Command(
        "actionPinNextWord",
        "&Pin next word",
        "menuAssist",
        ("Alt+P",),  # not Ctrl+Alt+Right: GNOME, Xfce and openbox switch workspaces with it
        setting="keys.pin_next_word",
        help=_SETTLED,
        tip="Extend the pinned words by one, or click a word of the suggestion",
        context="suggestion",
        section=2,
    ),
    Command(
        "actionUnpinLastWord",
        "Unpin &last word",
        "menuAssist",
        ("Alt+Shift+P",),
        setting="keys.unpin_last_word",
        help=_SETTLED,
        context="suggestion",
        section=2,
    ),
    # The assistant's other commands.
    Command(
        "actionClearPins",
        "&Clear pins",
        "menuAssist",
        toolbar="toolbarEditing",
        icon_text="Clear pins",
        context="suggestion",
        section=2,
    ),
    Command(
        "actionDocumentBrief",
        "Document &brief…",
        "menuAssist",
        tip="A note on style, audience, names and facts that every request for this document reads",
        section=3,
    ),
    # File (the documents controller).
    Command("actionNew", "&New", "menuFile", ("Ctrl+N",), standard="New"),
    Command("actionOpen", "&Open…", "menuFile", ("Ctrl+O",), standard="Open"),
    Command("actionSave", "&Save", "menuFile", ("Ctrl+S",), standard="Save"),
    Command("actionSaveAs", "Save &As…", "menuFile", ("Ctrl+Shift+S",), standard="SaveAs"),
    Command("actionQuit", "&Quit", "menuFile", ("Ctrl+Q",), standard="Quit", role="QuitRole", section=1),
    # Edit.
    Command("actionUndo", "&Undo", "menuEdit", ("Ctrl+Z",), standard="Undo", context="editor"),
    Command("actionRedo", "&Redo", "menuEdit", ("Ctrl+Shift+Z", "Ctrl+Y"), standard="Redo", context="editor"),
    Command("actionCut", "Cu&t", "menuEdit", ("Ctrl+X",), standard="Cut", context="editor", section=1),
    Command("actionCopy", "&Copy", "menuEdit", ("Ctrl+C",), standard="Copy", context="editor", section=1),
    Command("actionPaste", "&Paste", "menuEdit", ("Ctrl+V",), standard="Paste", context="editor", section=1),
    Command(
        "actionSelectAll",
        "Select &all",
        "menuEdit",
        ("Ctrl+A",),
        standard="SelectAll",
        context="editor",
        section=1,
    ),
    Command("actionFind", "&Find…", "menuEdit", ("Ctrl+F",), standard="Find", section=2),
    Command("actionReplace", "Find and &replace…", "menuEdit", ("Ctrl+H",), section=2),
    Command(
        "actionSettings",
        "&Settings…",
        "menuEdit",
        ("Ctrl+,",),
        standard="Preferences",
        role="PreferencesRole",
        section=3,
    ),
    # View.
    Command("actionZoomIn", "Zoom &in", "menuView", ("Ctrl++", "Ctrl+=")),
    Command("actionZoomOut", "Zoom &out", "menuView", ("Ctrl+-",)),
    Command("actionZoomReset", "&Actual size", "menuView", ("Ctrl+0",)),
    Command("actionTheme_system", "&System", "menuTheme", tip="Follow the system", checkable=True),
    Command("actionTheme_light", "&Light", "menuTheme", tip="Use the light colour theme", checkable=True),
    Command("actionTheme_dark", "&Dark", "menuTheme", tip="Use the dark colour theme", checkable=True),
    Command(
        "actionCommandPalette", "Command &palette…", "menuView", ("Ctrl+Shift+P",), palette=False, section=1
    ),
    Command(
        "actionToggleDiffView",
        "Show rewrites as a word &diff",
        "menuView",
        ("Ctrl+Shift+D",),
        tip=(
            "Show a rewrite as deleted (struck) and inserted "
            "(highlighted) words instead of the new text below"
        ),
        toolbar="toolbarEditing",
        icon_text="Word diff",
        checkable=True,
        section=2,
    ),
    Command(
        "actionShowAlternatives",
        "&Alternatives panel",
        "menuView",
        ("Ctrl+Shift+A",),
        toolbar="toolbarEditing",
        icon_text="Alternatives",
        checkable=True,
        section=2,
    ),
    # Model.
    Command(
        "actionModelManager",
        "&Model manager…",
        "menuModel",
        tip="Choose, check and load a DiffusionGemma model",
    ),
    Command("actionLoadModel", "&Load model folder…", "menuModel"),
    Command("actionCancelLoad", "&Cancel loading", "menuModel"),
    Command(
        "actionUseServer",
        "Use a &server…",
        "menuModel",
        tip="Write with a DiffusionGemma server (vLLM) instead of the model on this computer",
        section=1,
    ),
    Command(
        "actionUseLocalModel",
        "Use the &local model",
        "menuModel",
        tip="Stop sending text to the server: write with the model on this computer again",
        section=1,
    ),
    # Help.
    Command(
        "actionShortcuts",
        "&Keyboard shortcuts…",
        "menuHelp",
        ("F1",),
        standard="HelpContents",
        tip="Every command and its keys, searchable",
    ),
    Command(
        "actionGettingStarted", "&Getting started", "menuHelp", tip="The short hint shown on the first start"
    ),
)

# Commands made at run time from other data, one action per item, all placed in one menu: the rewrite presets
# (from the settings), the strength levels (app.assist.strength.LEVELS) and the recent files.
FAMILIES: dict[str, str] = {
    "actionPreset_": "menuRewritePresets",
    "actionRewriteStrength_": "menuRewriteStrength",
    "actionStrengthDefault_": "menuRewriteStrength",  # save the dial as / reset a preset's default strength
}


@dataclass(frozen=True)
class Menu:
    """One menu of the menu bar, or a submenu placed in its `parent` menu like a command."""

    id: str  # the QMenu's objectName (scripts and tests find menus by it)
    title: str
    parent: str = ""  # "" for the menu bar
    section: int = 0  # in its parent, as a command's section
    after: str = ""  # the entry of its section it follows ("": the section's first entry)


# The menu bar in order, and the submenus. A command names its menu; this table names the menus.
MENUS: tuple[Menu, ...] = (
    Menu("menuFile", "&File"),
    Menu("menuRecent", "Open &Recent", "menuFile", after="actionOpen"),
    Menu("menuEdit", "&Edit"),
    Menu("menuView", "&View"),
    Menu("menuTheme", "&Theme", "menuView", section=1),
    Menu("menuAssist", "&Assist"),
    Menu("menuRewritePresets", "Rewrite &as", "menuAssist", after="actionRewrite"),
    Menu("menuRewriteStrength", "Rewrite &strength", "menuAssist", section=2),
    Menu("menuModel", "&Model"),
    Menu("menuHelp", "&Help"),
)
MENU_BY_ID: dict[str, Menu] = {m.id: m for m in MENUS}


def layout(menu_id: str) -> list[tuple[int, str]]:
    """(section, id) of every entry the table puts in menu `menu_id`, in order: its commands by section, in
    table order within one, each submenu after the entry it follows."""
    entries = sorted(((c.section, c.id) for c in COMMANDS if c.menu == menu_id), key=lambda e: e[0])
    for sub in MENUS:
        if sub.parent != menu_id:
            continue
        ids = [entry_id for _, entry_id in entries]
        if sub.after:
            at = ids.index(sub.after) + 1
        else:
            at = next((i for i, (section, _) in enumerate(entries) if section >= sub.section), len(entries))
        entries.insert(at, (sub.section, sub.id))
    return entries


def toolbar_layout(toolbar_id: str) -> list[tuple[int, str]]:
    """(section, id) of the commands on toolbar `toolbar_id`, in order (as `layout`)."""
    return sorted(((c.section, c.id) for c in COMMANDS if c.toolbar == toolbar_id), key=lambda e: e[0])


# Keys the editor itself answers (not commands): no command may take them.
EDITOR_KEYS: dict[str, str] = {
    "Ctrl+A": "Select all",
    "Ctrl+C": "Copy",
    "Ctrl+V": "Paste",
    "Ctrl+X": "Cut",
    "Return": "New line",
    "Enter": "New line",
    "Backspace": "Delete",
    "Del": "Delete",
}

# Other keys that do the same thing: the keypad's Enter beside Return. They are separate presses of separate
# keys, so a binding gets its twins as extra shortcuts; clashes compare canonical keys.
TWINS: dict[str, tuple[str, ...]] = {
    "Ctrl+Return": ("Ctrl+Enter",),
    "Return": ("Enter",),
}
# Other spellings of ONE press: Qt reports Shift+Tab as Backtab, with or without Shift. These are never bound
# as extra shortcuts: under X11 one press matches both "Shift+Tab" and "Backtab", and Qt then refuses the
# press as an "Ambiguous shortcut overload" (Accept next line never fired). One spelling is bound; the editor
# maps the others onto it (`app.ui.editor`), and the clash checks count them as that one key.
SAME_PRESS: dict[str, str] = {"Backtab": "Shift+Tab", "Shift+Backtab": "Shift+Tab"}
_CANONICAL: dict[str, str] = {twin: key for key, twins in TWINS.items() for twin in twins} | SAME_PRESS

BY_ID: dict[str, Command] = {c.id: c for c in COMMANDS}


def command(command_id: str) -> Command:
    """The table entry for `command_id` (KeyError names an id missing from the table)."""
    return BY_ID[command_id]


def rebindable() -> Iterator[Command]:
    """The commands the writer can rebind, in settings order."""
    return (c for c in COMMANDS if c.setting)


def by_setting(setting: str) -> Command:
    return next(c for c in COMMANDS if c.setting == setting)


def canonical(key: str) -> str:
    """One spelling per key press ("Shift+Backtab", "Backtab" -> "Shift+Tab"; "Ctrl+Enter" ->
    "Ctrl+Return")."""
    return _CANONICAL.get(key, key)


def press(key: str) -> str:
    """The one physical press a spelling stands for ("Backtab" and "Shift+Backtab" -> "Shift+Tab"; the
    keypad's "Ctrl+Enter" stays itself: it is another key)."""
    return SAME_PRESS.get(key, key)


def with_twins(key: str) -> list[str]:
    """`key` and the keys that do the same (the keypad's Enter), as shortcuts to bind ([] for no key).
    Never another spelling of the same press: see `SAME_PRESS`."""
    key = press(key)
    return [key, *TWINS.get(key, ())] if key else []


def shortcut_clashes(bound: Iterable[tuple[str, str]]) -> list[str]:
    """Sentences naming every press that more than one (action, key) binding would match, twins and other
    spellings of one press included ([] when every press reaches one action). `bound` is (action id, key
    in Qt's portable text) for every shortcut of every action. Every context counts as one: a window key
    works in the editor and a suggestion is shown in the editor, so two bindings of one press always meet
    somewhere, and Qt then triggers neither."""
    owners: dict[str, list[str]] = {}
    for action_id, key in bound:
        owners.setdefault(press(key), []).append(f"{action_id} ({key})")
    return [
        f"{key} is matched by {' and '.join(names)}: Qt would call the press ambiguous and trigger neither"
        for key, names in owners.items()
        if len(names) > 1
    ]


def default_key(setting_name: str) -> str:
    """The default key of assistant command `keys.<setting_name>` (hints fall back to it without settings)."""
    return by_setting(f"keys.{setting_name}").key


def reserved_keys() -> dict[str, str]:
    """Keys the app keeps for commands the writer cannot rebind, and the editor's own: key -> what it does."""
    owned: dict[str, str] = {}
    for c in COMMANDS:
        if not c.setting:
            for key in c.keys:
                owned.setdefault(canonical(key), c.name)
    for key, what in EDITOR_KEYS.items():
        owned.setdefault(key, what)
    return owned


__all__ = [
    "BY_ID",
    "COMMANDS",
    "CONTEXTS",
    "EDITOR_KEYS",
    "FAMILIES",
    "SAME_PRESS",
    "TWINS",
    "Command",
    "by_setting",
    "canonical",
    "command",
    "default_key",
    "press",
    "rebindable",
    "reserved_keys",
    "shortcut_clashes",
    "with_twins",
]
