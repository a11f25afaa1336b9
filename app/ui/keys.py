"""The assistant's keys follow the `keys.*` settings: each binding goes to its window action, at once.

The settings refuse a binding that clashes with another (see `app.config.settings.key_clash`), so here every key is
applied as it is, plus the second spelling Qt may deliver for the same press (Shift+Tab arrives as Backtab,
the keypad's Enter beside Return).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QWidget

# setting -> the window's action (objectName)
ACTIONS: dict[str, str] = {
    "keys.accept": "actionAcceptSuggestion",
    "keys.accept_word": "actionAcceptWord",
    "keys.accept_line": "actionAcceptLine",
    "keys.dismiss": "actionDismissSuggestion",
    "keys.next_alternative": "actionNextAlternative",
    "keys.previous_alternative": "actionPreviousAlternative",
    "keys.draft": "actionDraft",
    "keys.rewrite": "actionRewrite",
    "keys.infill": "actionInfill",
    "keys.reroll_uncertain": "actionRerollUncertain",
    "keys.reroll_around_pins": "actionRerollAroundPins",
    "keys.pin_next_word": "actionPinNextWord",
    "keys.unpin_last_word": "actionUnpinLastWord",
}
_TWINS = {"Shift+Tab": ["Shift+Backtab"], "Ctrl+Return": ["Ctrl+Enter"], "Return": ["Enter"]}


def sequences(key: str) -> list[QKeySequence]:
    """The key sequences one binding stands for ([] for no key)."""
    if not key:
        return []
    return [QKeySequence.fromString(k, QKeySequence.SequenceFormat.PortableText) for k in [key, *_TWINS.get(key, [])]]


def apply(window: QWidget, settings: Any) -> None:
    """Give every assistant action the key its setting names."""
    for setting, name in ACTIONS.items():
        action = window.findChild(QAction, name)
        if action is None:
            continue
        key = str(settings[setting])
        action.setShortcuts(sequences(key))
        tip = action.statusTip().split(" (")[0]
        if tip:
            action.setStatusTip(f"{tip} ({key})" if key else tip)
            action.setToolTip(action.statusTip())


def follow(window: QWidget, settings: Any) -> None:
    """Apply the keys now and whenever a `keys.*` setting changes."""
    apply(window, settings)

    def changed(key: str, _value: object) -> None:
        if key in ACTIONS:
            apply(window, settings)

    settings.changed.connect(changed)


__all__ = ["ACTIONS", "apply", "follow", "sequences"]
