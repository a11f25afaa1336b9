"""The mutation script's plants stay in step with the kernel source (engine.tools.kernel_mutations); CI runs
the script itself, which checks that every plant fails the fast kernel tests."""

from __future__ import annotations

import pytest

from engine.tools.kernel_mutations import PLANTS, ROOT, SOURCE, Plant, PlantDidNotApply, planted


def test_every_plant_changes_the_kernel_in_exactly_one_place() -> None:
    source = (ROOT / SOURCE).read_text(encoding="utf-8")
    for plant in PLANTS:
        mutant = planted(source, plant)
        assert mutant != source and mutant.count(plant.after) == source.count(plant.after) + 1, plant.name


def test_the_plants_cover_every_class_the_review_named() -> None:
    kinds = {p.kind for p in PLANTS}
    assert kinds >= {
        "wrong group",
        "ignored program id",
        "K-loop tail",
        "offset",
        "absmax block",
        "activation",
    }


def test_a_plant_whose_line_is_gone_fails_loudly_instead_of_planting_nothing() -> None:
    with pytest.raises(PlantDidNotApply, match="matches 0 places"):
        planted("nothing here", Plant("gone", "offset", "off = tl.load(offset_ptr + e64)", "x"))
