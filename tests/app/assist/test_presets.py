"""The preset menu's labels come from the one preset declaration (`engine.api.PRESETS`)."""

from __future__ import annotations

from app.assist.presets import preset_label, preset_labels
from engine.api import PRESETS


def test_the_menus_show_the_declared_labels_and_a_writers_own_preset_by_its_key() -> None:
    assert [preset_label(p.key) for p in PRESETS] == [p.label for p in PRESETS]
    assert preset_label("my_style") == "My style"
    assert list(preset_labels(["my_style"]))[-1] == "my_style"
