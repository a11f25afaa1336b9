"""The rewrite presets are declared once (`engine.api.PRESETS`): the type, the instructions, the strengths and
the labels the menus show cannot drift apart."""

from __future__ import annotations

from typing import get_args

from engine.api import MAX_STRENGTH, MIN_STRENGTH, PRESET_LABELS, PRESETS, REWRITE_PRESETS, RewritePreset


def test_the_preset_type_lists_exactly_the_declared_presets() -> None:
    assert [p.key for p in PRESETS] == list(get_args(RewritePreset))


def test_every_preset_has_an_instruction_a_strength_in_bounds_and_a_label() -> None:
    for preset in PRESETS:
        assert preset.instruction.endswith(".") and preset.label
        assert MIN_STRENGTH <= preset.strength <= MAX_STRENGTH
    assert len(set(REWRITE_PRESETS.values())) == len(PRESETS)
    assert len(set(PRESET_LABELS.values())) == len(PRESETS)
