"""The rewrite presets' labels as menus, the strength dial and the palette show them (declared once, with
their instructions and strengths, in `engine.api.PRESETS`).

Both the window (which builds the preset menu) and diffusion editing (the dial) read them; they live here,
below both, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.api import PRESET_LABELS


def preset_label(key: str) -> str:
    """What a preset is called on screen: its built-in label, else its key as the writer typed it."""
    return PRESET_LABELS.get(key, key.replace("_", " ").capitalize())


def preset_labels(keys: Iterable[str]) -> dict[str, str]:
    """`preset_label` of every key in `keys` (the presets in the settings, built-in ones first)."""
    return {**PRESET_LABELS, **{k: preset_label(k) for k in keys}}
